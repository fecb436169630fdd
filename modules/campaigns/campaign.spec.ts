import { describe, expect, it } from '@jest/globals';
import { evolveCampaign, emptyCampaign, type CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { testPlan } from '../../projections/campaign-progress/testing/campaign-plan.js';
import type { RunFinished, WorkerInfo } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { decider, type Fact } from '../../test/testing/given.js';
import { CampaignRuleError, decideCampaign, type CampaignCommand, type CampaignEvent } from './campaign.js';

// The campaign decider, driven the way the campaign ledger drives it: decide on the folded state,
// append the answer (here: fold it), decide the next step on the new state.

const ID = 'cmp-20261124100000-abcdef';
const T = '2026-11-24T10:00:00.000Z';
const W: WorkerInfo = { id: 'h1-100-aaaa', host: 'h1', pid: 100, gpus: ['0'] };

const plan = (cells = 2, retries = 1) => testPlan(cells, retries);

const assign = (cell: number, attempt = 1, runId = `r-${cell}-${attempt}`): CampaignCommand => ({ type: 'assign', cell, attempt, runId, worker: W, gpus: [] });
const finish = (cell: number, attempt: number, outcome: RunFinished['outcome'], retryable: boolean | 'always', extra: Partial<RunFinished> = {}): CampaignCommand => ({
  type: 'finish',
  result: { cell, attempt, runId: `r-${cell}-${attempt}`, outcome, ...extra },
  retryable,
});

/** Folds decided events as the ledger would append them (dense seqs after the state's revision). */
function apply(state: CampaignProgress, events: CampaignEvent[]): CampaignProgress {
  return events.reduce((s, e, i) => evolveCampaign(s, buildEvent(e.type, ID, state.revision + 1 + i, T, e.data)), state);
}

/** Decides and applies each command in turn; returns the state and the last decision. */
function run(state: CampaignProgress, ...commands: CampaignCommand[]): { state: CampaignProgress; events: CampaignEvent[] } {
  let events: CampaignEvent[] = [];
  for (const command of commands) {
    events = decideCampaign(state, command);
    state = apply(state, events);
  }
  return { state, events };
}

const scheduled = (cells = 2, retries = 1) => run(emptyCampaign(ID), { type: 'schedule', plan: plan(cells, retries) }).state;

function refusal(state: CampaignProgress, command: CampaignCommand): CampaignRuleError {
  let error: unknown;
  try {
    decideCampaign(state, command);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(CampaignRuleError);
  return error as CampaignRuleError;
}

const types = (events: CampaignEvent[]) => events.map((e) => e.type);

// The decider on the in-memory store (test/testing/given.ts): given the campaign stream's events,
// when a command, then these events (appended and folded) or this refusal.
const campaign = decider<CampaignProgress, CampaignCommand>({ stream: 'campaign', id: ID, initial: emptyCampaign(ID), evolve: evolveCampaign, decide: decideCampaign });
const Scheduled = (cells = 2, retries = 1): Fact[] => [
  { type: 'CampaignScheduled', data: plan(cells, retries) },
  ...Array.from({ length: cells }, (_, cell): Fact => ({ type: 'RunRequested', data: { cell, attempt: 1 } })),
];
const Assigned = (cell: number, attempt = 1): Fact => ({ type: 'RunAssigned', data: { cell, attempt, runId: `r-${cell}-${attempt}`, worker: W, gpus: [] } });
const Finished = (cell: number, attempt: number, outcome: RunFinished['outcome']): Fact => ({ type: 'RunFinished', data: { cell, attempt, runId: `r-${cell}-${attempt}`, outcome } });

describe('campaign decider: schedule', () => {
  it('records the plan and a request for attempt 1 of every cell', async () => {
    const state = await campaign.given().when({ type: 'schedule', plan: plan(3) }).then([
      { type: 'CampaignScheduled', data: plan(3) },
      { type: 'RunRequested', data: { cell: 0, attempt: 1 } },
      { type: 'RunRequested', data: { cell: 1, attempt: 1 } },
      { type: 'RunRequested', data: { cell: 2, attempt: 1 } },
    ]);
    expect(state.cells.map((c) => c.status)).toEqual(['pending', 'pending', 'pending']);
  });

  it('refuses scheduling a campaign twice', async () => {
    await campaign.given(...Scheduled()).when({ type: 'schedule', plan: plan() }).thenRefuses(CampaignRuleError, /already scheduled/);
  });

  it('refuses any other step on a campaign that was never scheduled', async () => {
    for (const command of [assign(0), finish(0, 1, 'completed', false), { type: 'cancel' } as const]) {
      await campaign.given().when(command).thenRefuses(CampaignRuleError, /does not exist/);
    }
  });
});

describe('campaign decider: assign', () => {
  it('assigns a pending cell to the worker with its run', () => {
    expect(decideCampaign(scheduled(), { type: 'assign', cell: 1, attempt: 1, runId: 'r-x', worker: W, gpus: ['0'] })).toEqual([
      { type: 'RunAssigned', data: { cell: 1, attempt: 1, runId: 'r-x', worker: W, gpus: ['0'] } },
    ]);
  });

  it('refuses a cell that is not pending: running, completed, failed', () => {
    const running = run(scheduled(2, 0), assign(0)).state;
    expect(refusal(running, assign(0, 1, 'r-other')).message).toMatch(/cell 0 attempt 1 is running, not pending/);
    const completed = run(running, finish(0, 1, 'completed', false)).state;
    expect(refusal(completed, assign(0)).message).toMatch(/is completed, not pending/);
    const failed = run(completed, assign(1), finish(1, 1, 'infra_failed', true)).state;
    expect(refusal(failed, assign(1)).message).toMatch(/is failed, not pending/);
  });

  it('refuses an attempt the cell is not at, a cell the campaign does not have, and a cancelled campaign', () => {
    const state = scheduled();
    expect(refusal(state, assign(0, 2)).message).toMatch(/cell 0 is at attempt 1, not 2/);
    expect(refusal(state, assign(5)).message).toMatch(/has no cell 5/);
    const cancelled = run(state, { type: 'cancel' }).state;
    expect(refusal(cancelled, assign(0)).message).toMatch(/cancelled/);
  });
});

describe('campaign decider: finish', () => {
  it('retries an infrastructure failure while retries are left: RunFinished, RunRetried, RunRequested for the next attempt', async () => {
    const state = await campaign.given(...Scheduled(2, 1), Assigned(0)).when(finish(0, 1, 'infra_failed', true, { reason: 'set-up failed: no dataset' })).then([
      { type: 'RunFinished', data: { cell: 0, attempt: 1, runId: 'r-0-1', outcome: 'infra_failed', reason: 'set-up failed: no dataset' } },
      { type: 'RunRetried', data: { cell: 0, attempt: 2, reason: 'set-up failed: no dataset' } },
      { type: 'RunRequested', data: { cell: 0, attempt: 2 } },
    ]);
    expect(state.cells[0]).toMatchObject({ status: 'pending', attempt: 2, retriesUsed: 1 });
  });

  it('retries a lost worker, naming the outcome when no reason is given', () => {
    const { events } = run(scheduled(), assign(0), finish(0, 1, 'lost', true));
    expect(events[1]).toEqual({ type: 'RunRetried', data: { cell: 0, attempt: 2, reason: 'lost' } });
  });

  it('stops retrying when the retries are used up: the cell fails', () => {
    let { state, events } = run(scheduled(2, 2), assign(0), finish(0, 1, 'infra_failed', true), assign(0, 2), finish(0, 2, 'lost', true));
    expect(types(events)).toEqual(['RunFinished', 'RunRetried', 'RunRequested']);
    ({ state, events } = run(state, assign(0, 3), finish(0, 3, 'infra_failed', true)));
    expect(types(events)).toEqual(['RunFinished']);
    expect(state.cells[0]).toMatchObject({ status: 'failed', attempt: 3, retriesUsed: 2 });
    expect(types(run(scheduled(2, 0), assign(0), finish(0, 1, 'infra_failed', true)).events)).toEqual(['RunFinished']); // --retries 0
  });

  it("never retries an agent's own failure: a completed run is the cell's result, whatever it scored", () => {
    const { state, events } = run(scheduled(2, 3), assign(0), finish(0, 1, 'completed', false, { best: 3, baseline: 10 }));
    expect(events).toEqual([{ type: 'RunFinished', data: { cell: 0, attempt: 1, runId: 'r-0-1', outcome: 'completed', best: 3, baseline: 10 } }]);
    expect(state.cells[0]).toMatchObject({ status: 'completed', attempt: 1, best: 3 });
    // Not retryable means not retried, whatever the outcome says.
    expect(types(run(scheduled(2, 3), assign(0), finish(0, 1, 'infra_failed', false)).events)).toEqual(['RunFinished']);
    // A completed outcome is never retried, even when called retryable.
    expect(types(run(scheduled(2, 3), assign(0), finish(0, 1, 'completed', true)).events)).toEqual(['RunFinished']);
  });

  it('hands back a job of a stopping worker without using a retry, even with none left', () => {
    const { state, events } = run(scheduled(2, 0), assign(0), finish(0, 1, 'infra_failed', 'always', { reason: 'the worker was stopped' }));
    expect(events.slice(1)).toEqual([
      { type: 'RunRetried', data: { cell: 0, attempt: 2, reason: 'the worker was stopped', handedBack: true } },
      { type: 'RunRequested', data: { cell: 0, attempt: 2 } },
    ]);
    expect(state.cells[0]).toMatchObject({ status: 'pending', attempt: 2, retriesUsed: 0 });
  });

  it('finishes a pending attempt whose set-up failed before it was assigned', () => {
    expect(types(run(scheduled(), finish(0, 1, 'infra_failed', true)).events)).toEqual(['RunFinished', 'RunRetried', 'RunRequested']);
  });

  it('refuses finishing an ended attempt, or an attempt the cell has moved on from', () => {
    const done = run(scheduled(), assign(0), finish(0, 1, 'completed', false)).state;
    expect(refusal(done, finish(0, 1, 'infra_failed', true)).message).toMatch(/cell 0 attempt 1 has already ended \(completed\)/);
    const retried = run(scheduled(), assign(0), finish(0, 1, 'lost', true)).state;
    expect(refusal(retried, finish(0, 1, 'completed', false)).message).toMatch(/cell 0 is at attempt 2, not 1/);
  });

  it('appends CampaignCompleted with the counts to the finish of the last open cell', async () => {
    const history = [...Scheduled(3, 0), Assigned(0), Finished(0, 1, 'completed'), Assigned(1), Finished(1, 1, 'infra_failed'), Assigned(2)];
    expect((await campaign.given(...history).state()).status).toBe('running');
    const end = await campaign.given(...history).when(finish(2, 1, 'completed', false)).then([
      { type: 'RunFinished', data: { cell: 2, attempt: 1, runId: 'r-2-1', outcome: 'completed' } },
      { type: 'CampaignCompleted', data: { completed: 2, failed: 1 } },
    ]);
    expect(end.status).toBe('completed');
  });

  it('counts a last cell that failed as failed, and does not complete a campaign whose last cell is being retried', () => {
    const retrying = run(scheduled(1, 1), assign(0), finish(0, 1, 'infra_failed', true));
    expect(types(retrying.events)).toEqual(['RunFinished', 'RunRetried', 'RunRequested']);
    const { events } = run(retrying.state, assign(0, 2), finish(0, 2, 'infra_failed', true));
    expect(events).toEqual([
      { type: 'RunFinished', data: { cell: 0, attempt: 2, runId: 'r-0-2', outcome: 'infra_failed' } },
      { type: 'CampaignCompleted', data: { completed: 0, failed: 1 } },
    ]);
  });

  it('refuses any step after the campaign completed', () => {
    const done = run(scheduled(1), assign(0), finish(0, 1, 'completed', false)).state;
    expect(done.status).toBe('completed');
    expect(refusal(done, finish(0, 1, 'completed', false)).message).toMatch(/already ended/);
    expect(refusal(done, assign(0)).message).toMatch(/not pending/);
    expect(refusal(done, { type: 'cancel' }).message).toMatch(/has already completed/);
  });
});

describe('campaign decider: cancel', () => {
  it('records CampaignCancelled, with the reason when given', async () => {
    await campaign.given(...Scheduled()).when({ type: 'cancel', reason: 'operator' }).then([{ type: 'CampaignCancelled', data: { reason: 'operator' } }]);
    const state = await campaign.given(...Scheduled()).when({ type: 'cancel' }).then([{ type: 'CampaignCancelled', data: {} }]);
    expect(state.cells.map((c) => c.status)).toEqual(['cancelled', 'cancelled']);
  });

  it('refuses cancelling twice', async () => {
    await campaign.given(...Scheduled(), { type: 'CampaignCancelled', data: {} }).when({ type: 'cancel' }).thenRefuses(CampaignRuleError, /has already been cancelled/);
  });

  it('lets a running attempt finish after the cancel, never retried and without CampaignCompleted', () => {
    const state = run(scheduled(2, 3), assign(0), { type: 'cancel' }).state;
    expect(state.cells.map((c) => c.status)).toEqual(['running', 'cancelled']);
    expect(decideCampaign(state, finish(0, 1, 'cancelled', false))).toEqual([{ type: 'RunFinished', data: { cell: 0, attempt: 1, runId: 'r-0-1', outcome: 'cancelled' } }]);
    expect(types(decideCampaign(state, finish(0, 1, 'infra_failed', true)))).toEqual(['RunFinished']);
    expect(types(decideCampaign(state, finish(0, 1, 'lost', 'always')))).toEqual(['RunFinished']);
  });

  it('never retries a cancelled outcome', () => {
    expect(types(run(scheduled(2, 3), assign(0), finish(0, 1, 'cancelled', true)).events)).toEqual(['RunFinished']);
  });
});

describe('campaign decider: purity', () => {
  it('decides without touching the state it was given', () => {
    const state = run(scheduled(2, 1), assign(0)).state;
    const snapshot = structuredClone(state);
    decideCampaign(state, finish(0, 1, 'infra_failed', true));
    decideCampaign(state, { type: 'cancel' });
    expect(state).toEqual(snapshot);
  });
});
