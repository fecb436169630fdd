import type { A2rlEvent, CampaignCell, CampaignScheduled, WorkerInfo } from '../../modules/ledger/events/catalog.js';

/**
 * A campaign's progress: a pure fold of its stream (`campaign-<id>`) into one row per cell × seed.
 * The decider (modules/campaigns/campaign.ts) judges the next scheduling step on this state; the CLI,
 * the query API and the scoreboard read it. Total: an event that does not fit (an old or odd ledger)
 * is folded as far as it goes, never thrown on.
 */
export type CellStatus = 'pending' | 'running' | 'completed' | 'failed' | 'cancelled';

export interface CellProgress extends CampaignCell {
  status: CellStatus;
  /** The current attempt (1 before any retry). */
  attempt: number;
  /** Retries that counted against the campaign's `retries` (hand-backs by a stopping worker do not). */
  retriesUsed: number;
  /** The current attempt's run, once a worker scheduled it. */
  runId: string | null;
  worker: WorkerInfo | null;
  /** The worker's GPU ids the current attempt holds. */
  devices: string[];
  /** Every run of every attempt, oldest first (retried ones included). */
  runs: string[];
  /** The completed run's best-of-budget inputs, from RunFinished. */
  best: number | null;
  baseline: number | null;
  /** Why the last attempt did not complete (infra failure, lost worker, cancellation). */
  reason: string | null;
}

export type CampaignStatus = 'scheduled' | 'running' | 'completed' | 'cancelled';

export interface CampaignProgress {
  campaignId: string;
  /** Null until CampaignScheduled (an unknown campaign). */
  scheduled: Omit<CampaignScheduled, 'cells'> | null;
  status: CampaignStatus;
  cells: CellProgress[];
  counts: Record<CellStatus, number>;
  /** occurredAt of the first and last event (for display; never a wall clock). */
  scheduledAt: string | null;
  updatedAt: string | null;
  /** Revision of the last folded event (−1: none): the expected revision of the next append. */
  revision: number;
}

export const emptyCampaign = (campaignId: string): CampaignProgress => ({
  campaignId,
  scheduled: null,
  status: 'scheduled',
  cells: [],
  counts: { pending: 0, running: 0, completed: 0, failed: 0, cancelled: 0 },
  scheduledAt: null,
  updatedAt: null,
  revision: -1,
});

const TERMINAL: ReadonlySet<CellStatus> = new Set(['completed', 'failed', 'cancelled']);
export const isTerminal = (status: CellStatus): boolean => TERMINAL.has(status);

function countCells(cells: readonly CellProgress[]): Record<CellStatus, number> {
  const counts: Record<CellStatus, number> = { pending: 0, running: 0, completed: 0, failed: 0, cancelled: 0 };
  for (const c of cells) counts[c.status] += 1;
  return counts;
}

/** Replaces one cell (by index) with `patch` applied; an index the campaign does not have changes nothing. */
function patchCell(state: CampaignProgress, index: number, patch: (cell: CellProgress) => Partial<CellProgress>): CellProgress[] {
  const cell = state.cells[index];
  if (!cell) return state.cells;
  const cells = state.cells.slice();
  cells[index] = { ...cell, ...patch(cell) };
  return cells;
}

/** Folds one event of the campaign's stream. */
export function evolveCampaign(state: CampaignProgress, event: A2rlEvent): CampaignProgress {
  const at = { revision: event.seq, updatedAt: event.occurredAt };
  let cells = state.cells;
  let status = state.status;
  let scheduled = state.scheduled;
  let scheduledAt = state.scheduledAt;
  switch (event.type) {
    case 'CampaignScheduled': {
      const { cells: planned, ...rest } = event.data;
      scheduled = rest;
      scheduledAt = event.occurredAt;
      cells = planned.map((c) => ({ ...c, status: 'pending', attempt: 1, retriesUsed: 0, runId: null, worker: null, devices: [], runs: [], best: null, baseline: null, reason: null }));
      break;
    }
    case 'RunRequested':
      cells = patchCell(state, event.data.cell, (c) => (isTerminal(c.status) || event.data.attempt < c.attempt ? {} : { attempt: event.data.attempt }));
      break;
    case 'RunAssigned': {
      const d = event.data;
      cells = patchCell(state, d.cell, (c) => (d.attempt !== c.attempt || isTerminal(c.status) ? {} : { status: 'running', runId: d.runId, worker: d.worker, devices: d.gpus, runs: c.runs.includes(d.runId) ? c.runs : [...c.runs, d.runId] }));
      if (status === 'scheduled' && cells !== state.cells) status = 'running';
      break;
    }
    case 'RunFinished': {
      const d = event.data;
      cells = patchCell(state, d.cell, (c) => {
        if (d.attempt !== c.attempt || isTerminal(c.status)) return {};
        const runs = d.runId && !c.runs.includes(d.runId) ? [...c.runs, d.runId] : c.runs;
        if (d.outcome === 'completed') return { status: 'completed', runId: d.runId ?? c.runId, runs, best: d.best ?? null, baseline: d.baseline ?? null, reason: null };
        if (d.outcome === 'cancelled') return { status: 'cancelled', runs, reason: d.reason ?? 'the campaign was cancelled' };
        // An infra failure or a lost worker: failed unless a RunRetried follows in the same append.
        return { status: 'failed', runs, reason: d.reason ?? d.outcome };
      });
      break;
    }
    case 'RunRetried':
      cells = patchCell(state, event.data.cell, (c) => (c.status === 'failed' || c.status === 'running'
          ? { status: 'pending', attempt: event.data.attempt, retriesUsed: c.retriesUsed + (event.data.handedBack ? 0 : 1), runId: null, worker: null, devices: [] }
          : {}));
      break;
    case 'CampaignCompleted':
      status = 'completed';
      break;
    case 'CampaignCancelled':
      if (status === 'completed') return { ...state, ...at };
      status = 'cancelled';
      cells = state.cells.map((c) => (c.status === 'pending' ? { ...c, status: 'cancelled', reason: event.data.reason ?? 'the campaign was cancelled' } : c));
      break;
    default:
      return { ...state, ...at };
  }
  return { ...state, ...at, scheduled, scheduledAt, status, cells, counts: cells === state.cells ? state.counts : countCells(cells) };
}

/** Folds a campaign's stream from the start. */
export function foldCampaign(campaignId: string, events: Iterable<A2rlEvent>): CampaignProgress {
  let state = emptyCampaign(campaignId);
  for (const event of events) state = evolveCampaign(state, event);
  return state;
}

/** The run each completed cell contributes (the campaign's results: retried attempts are not among them). */
export function acceptedRuns(progress: CampaignProgress): string[] {
  return progress.cells.flatMap((c) => (c.status === 'completed' && c.runId ? [c.runId] : []));
}
