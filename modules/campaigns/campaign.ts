import type { CampaignScheduled, EventData, RunFinished, WorkerInfo } from '../ledger/events/catalog.js';
import { isTerminal, type CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';

// The campaign as a pure decider: `decideCampaign(state, command)` answers a scheduling step with the
// events to append to the campaign's stream, or a CampaignRuleError; the state is the progress fold
// (projections/campaign-progress). No I/O: the campaign ledger reads, decides and appends with the
// exact expected revision, so two workers deciding on the same state cannot both win.

export type CampaignEvent =
  | { type: 'CampaignScheduled'; data: EventData<'CampaignScheduled'> }
  | { type: 'RunRequested'; data: EventData<'RunRequested'> }
  | { type: 'RunAssigned'; data: EventData<'RunAssigned'> }
  | { type: 'RunFinished'; data: EventData<'RunFinished'> }
  | { type: 'RunRetried'; data: EventData<'RunRetried'> }
  | { type: 'CampaignCompleted'; data: EventData<'CampaignCompleted'> }
  | { type: 'CampaignCancelled'; data: EventData<'CampaignCancelled'> };

export type CampaignCommand =
  | { type: 'schedule'; plan: CampaignScheduled }
  | { type: 'assign'; cell: number; attempt: number; runId: string; worker: WorkerInfo; gpus: string[] }
  /** The running attempt's run, whose holder was lost, is resumed by this worker (the same run, the same attempt). */
  | { type: 'resume'; cell: number; attempt: number; runId: string; worker: WorkerInfo; gpus: string[] }
  /**
   * `retryable`: an infrastructure failure gets another attempt while retries are left; 'always': a job
   * handed back by a worker shutting down (not the run's fault, so no retry is used up). Never for an
   * agent's own failure.
   */
  | { type: 'finish'; result: RunFinished; retryable: boolean | 'always' }
  | { type: 'cancel'; reason?: string };

/** Refused: the step does not fit the campaign's state. Nothing was appended. */
export class CampaignRuleError extends Error {
  override readonly name = 'CampaignRuleError';
}

export function decideCampaign(state: CampaignProgress, command: CampaignCommand): CampaignEvent[] {
  if (command.type === 'schedule') {
    if (state.scheduled) throw new CampaignRuleError(`campaign ${state.campaignId} is already scheduled`);
    if (!command.plan.cells.length) throw new CampaignRuleError('a campaign needs at least one cell');
    if (command.plan.cells.some((c, i) => c.cell !== i)) throw new CampaignRuleError('cells must be numbered 0, 1, 2 … in order');
    return [
      { type: 'CampaignScheduled', data: command.plan },
      ...command.plan.cells.map((c): CampaignEvent => ({ type: 'RunRequested', data: { cell: c.cell, attempt: 1 } })),
    ];
  }
  if (!state.scheduled) throw new CampaignRuleError(`campaign ${state.campaignId} does not exist`);
  switch (command.type) {
    case 'assign': {
      const cell = currentCell(state, command.cell, command.attempt);
      if (state.status === 'cancelled') throw new CampaignRuleError(`campaign ${state.campaignId} was cancelled`);
      if (cell.status !== 'pending') throw new CampaignRuleError(`cell ${command.cell} attempt ${command.attempt} is ${cell.status}, not pending`);
      const { cell: index, attempt, runId, worker, gpus } = command;
      return [{ type: 'RunAssigned', data: { cell: index, attempt, runId, worker, gpus } }];
    }
    case 'resume': {
      const cell = currentCell(state, command.cell, command.attempt);
      if (state.status === 'cancelled') throw new CampaignRuleError(`campaign ${state.campaignId} was cancelled`);
      if (cell.status !== 'running' || cell.runId !== command.runId) throw new CampaignRuleError(`cell ${command.cell} attempt ${command.attempt} is ${cell.status}${cell.runId ? ` with run ${cell.runId}` : ''}, not running ${command.runId}`);
      const { cell: index, attempt, runId, worker, gpus } = command;
      return [{ type: 'RunAssigned', data: { cell: index, attempt, runId, worker, gpus, resumed: true } }];
    }
    case 'finish': {
      const { result } = command;
      const cell = currentCell(state, result.cell, result.attempt);
      if (isTerminal(cell.status)) throw new CampaignRuleError(`cell ${result.cell} attempt ${result.attempt} has already ended (${cell.status})`);
      const events: CampaignEvent[] = [{ type: 'RunFinished', data: result }];
      const retriesLeft = command.retryable === 'always' || (command.retryable && retriesUsed(state, result.cell) < state.scheduled.retries);
      const retry = retriesLeft && result.outcome !== 'completed' && result.outcome !== 'cancelled' && state.status !== 'cancelled';
      if (retry) {
        const attempt = cell.attempt + 1;
        const handedBack = command.retryable === 'always' ? { handedBack: true } : {};
        events.push({ type: 'RunRetried', data: { cell: result.cell, attempt, reason: result.reason ?? result.outcome, ...handedBack } });
        events.push({ type: 'RunRequested', data: { cell: result.cell, attempt } });
      }
      if (!retry && state.status !== 'cancelled' && lastOpenCell(state, result.cell)) {
        const completed = state.counts.completed + (result.outcome === 'completed' ? 1 : 0);
        const cancelled = state.counts.cancelled + (result.outcome === 'cancelled' ? 1 : 0);
        events.push({ type: 'CampaignCompleted', data: { completed, failed: state.cells.length - completed - cancelled } });
      }
      return events;
    }
    case 'cancel':
      if (state.status === 'completed' || state.status === 'cancelled') throw new CampaignRuleError(`campaign ${state.campaignId} has already ${state.status === 'completed' ? 'completed' : 'been cancelled'}`);
      return [{ type: 'CampaignCancelled', data: command.reason ? { reason: command.reason } : {} }];
  }
}

/** The cell, which must exist and be at this attempt. */
function currentCell(state: CampaignProgress, index: number, attempt: number) {
  const cell = state.cells[index];
  if (!cell) throw new CampaignRuleError(`campaign ${state.campaignId} has no cell ${index}`);
  if (cell.attempt !== attempt) throw new CampaignRuleError(`cell ${index} is at attempt ${cell.attempt}, not ${attempt}`);
  return cell;
}

/** Retries a cell has had that counted against `retries` (hand-backs do not). */
function retriesUsed(state: CampaignProgress, index: number): number {
  return state.cells[index]?.retriesUsed ?? 0;
}

/** Whether every other cell has ended, i.e. finishing this one ends the campaign. */
function lastOpenCell(state: CampaignProgress, index: number): boolean {
  return state.cells.every((c) => c.cell === index || isTerminal(c.status));
}
