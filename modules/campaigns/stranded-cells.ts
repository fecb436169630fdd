import { setTimeout as sleep } from 'node:timers/promises';
import type { CampaignProgress, CellProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { isTerminal } from '../../projections/campaign-progress/campaign-progress.js';
import { CampaignRuleError } from './campaign.js';
import type { CampaignLedger } from './campaign-ledger.js';
import { jobId, type CampaignJob, type CampaignQueue } from './campaign-queue.port.js';

// A campaign on a shared queue can lose a job without any worker recording why: BullMQ gives up on a
// job whose handler threw on every attempt (the ledger unreachable from that worker, a bug), a job is
// removed by hand, Redis is flushed. The cell would then wait forever. Whoever follows the campaign
// with the queue at hand (`campaign run|resume --queue`, `campaign status --follow --queue`) looks
// for such cells and acts, so no cell is ever stranded.

export interface StrandedCellOptions {
  ledger: CampaignLedger;
  queue: CampaignQueue;
  /** How often the queue is looked at; a cell is acted on when two looks in a row miss its job (default: half a worker lease). */
  intervalMs: number;
  log: (line: string) => void;
  /** Stops looking. */
  signal: AbortSignal;
}

/** The reason a lost pending attempt is recorded with (the campaign's retry rules then apply). */
export const JOB_LEFT_QUEUE = 'its job left the queue without an outcome (dropped, or its queue attempts ran out on infrastructure errors)';

/** Looks for stranded cells until the campaign ends or `signal` aborts. */
export async function watchStrandedCells(campaignId: string, o: StrandedCellOptions): Promise<void> {
  const misses = new Set<string>();
  for (;;) {
    try {
      await sleep(o.intervalMs, undefined, { signal: o.signal });
    } catch {
      return; // aborted
    }
    const state = await o.ledger.read(campaignId);
    if (state.status === 'completed' || state.status === 'cancelled') return;
    for (const cell of state.cells.filter((c) => !isTerminal(c.status))) {
      const job = jobOf(campaignId, cell);
      if (await o.queue.holds(job)) misses.delete(jobId(job));
      else if (!misses.has(jobId(job))) misses.add(jobId(job));
      else {
        misses.delete(jobId(job));
        await rescue(state, cell, o);
      }
    }
  }
}

const jobOf = (campaignId: string, cell: CellProgress): CampaignJob => ({ campaignId, cell: cell.cell, attempt: cell.attempt, gpus: cell.gpus });

/**
 * A pending attempt no queue holds is recorded lost, which retries the cell within the campaign's
 * --retries (or fails it). A running one is put back on the queue: the worker that takes it settles
 * the attempt (waits while its holder still beats, else records it lost and retries).
 */
async function rescue(seen: CampaignProgress, cell: CellProgress, o: StrandedCellOptions): Promise<void> {
  const say = (line: string) => o.log(`[${seen.campaignId}] cell ${cell.cell}: ${line}`);
  if (cell.status === 'running') {
    await o.queue.enqueue([jobOf(seen.campaignId, cell)]);
    return say(`attempt ${cell.attempt} is assigned but no queue holds its job: put back on the queue to be settled`);
  }
  let state: CampaignProgress;
  try {
    state = await o.ledger.execute(seen.campaignId, { type: 'finish', result: { cell: cell.cell, attempt: cell.attempt, outcome: 'lost', reason: JOB_LEFT_QUEUE }, retryable: true });
  } catch (err) {
    if (err instanceof CampaignRuleError) return; // the cell moved on meanwhile
    throw err;
  }
  const now = state.cells[cell.cell];
  if (now.status === 'pending') {
    await o.queue.enqueue([jobOf(seen.campaignId, now)]);
    return say(`attempt ${cell.attempt} was lost: ${JOB_LEFT_QUEUE}; retrying as attempt ${now.attempt}`);
  }
  say(`attempt ${cell.attempt} was lost: ${JOB_LEFT_QUEUE}; no retries left (${now.status})`);
}
