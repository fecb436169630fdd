import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent, EventData, EventType, WorkerInfo } from '../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { acceptedRuns, emptyCampaign, evolveCampaign, foldCampaign, type CampaignProgress } from './campaign-progress.js';
import { testPlan } from './testing/campaign-plan.js';

// The progress fold over hand-written campaign streams: the happy path, retries (infra failure, lost
// worker, hand-back), cancellation, completion, and streams that do not follow the rules.

const ID = 'cmp-20261124100000-abcdef';
const at = (s: number) => new Date(Date.UTC(2026, 10, 24, 10, 0, s)).toISOString();
const W1: WorkerInfo = { id: 'h1-100-aaaa', host: 'h1', pid: 100, gpus: ['0', '1'] };
const W2: WorkerInfo = { id: 'h2-200-bbbb', host: 'h2', pid: 200, gpus: [] };

const plan = (cells = 2, retries = 1) => testPlan(cells, retries, 2);

/** A campaign stream written event by event (dense seqs, one second apart). */
class Stream {
  readonly events: A2rlEvent[] = [];
  add<T extends EventType>(type: T, data: EventData<T>): this {
    this.events.push(buildEvent(type, ID, this.events.length, at(this.events.length), data));
    return this;
  }
  scheduled(p = plan()): this {
    this.add('CampaignScheduled', p);
    for (const c of p.cells) this.add('RunRequested', { cell: c.cell, attempt: 1 });
    return this;
  }
  assigned(cell: number, attempt: number, runId: string, worker = W1, gpus: string[] = []): this {
    return this.add('RunAssigned', { cell, attempt, runId, worker, gpus });
  }
  fold(): CampaignProgress {
    return foldCampaign(ID, this.events);
  }
}

describe('campaign progress: the fold', () => {
  it('starts unknown: no plan, no cells, revision −1', () => {
    expect(foldCampaign(ID, [])).toEqual(emptyCampaign(ID));
    expect(emptyCampaign(ID)).toMatchObject({ scheduled: null, status: 'scheduled', cells: [], revision: -1, scheduledAt: null, updatedAt: null });
  });

  it('schedules every cell as pending at attempt 1, keeps the plan without its cells, and tracks the revision', () => {
    const p = plan(3);
    const state = new Stream().scheduled(p).fold();
    const { cells: _cells, ...rest } = p;
    expect(state.scheduled).toEqual(rest);
    expect(state.status).toBe('scheduled');
    expect(state.cells.map((c) => [c.cell, c.status, c.attempt, c.retriesUsed, c.runId, c.runs])).toEqual([
      [0, 'pending', 1, 0, null, []],
      [1, 'pending', 1, 0, null, []],
      [2, 'pending', 1, 0, null, []],
    ]);
    expect(state.cells[1]).toMatchObject({ task: 'ref-arith', agent: 'reference', seed: 1, gpus: 0, devices: [], worker: null, best: null, baseline: null, reason: null });
    expect(state.counts).toEqual({ pending: 3, running: 0, completed: 0, failed: 0, cancelled: 0 });
    expect([state.revision, state.scheduledAt, state.updatedAt]).toEqual([3, at(0), at(3)]);
  });

  it('follows schedule → assign → finish → completed, with the worker, its devices and the scores', () => {
    const s = new Stream().scheduled().assigned(0, 1, 'r-a', W1, ['1']);
    let state = s.fold();
    expect(state.status).toBe('running');
    expect(state.cells[0]).toMatchObject({ status: 'running', runId: 'r-a', worker: W1, devices: ['1'], runs: ['r-a'] });
    expect(state.counts).toMatchObject({ pending: 1, running: 1 });

    s.add('RunFinished', { cell: 0, attempt: 1, runId: 'r-a', outcome: 'completed', best: 40, baseline: 10 });
    s.assigned(1, 1, 'r-b', W2).add('RunFinished', { cell: 1, attempt: 1, runId: 'r-b', outcome: 'completed', baseline: 10 });
    state = s.fold();
    expect(state.cells.map((c) => [c.status, c.runId, c.best, c.baseline, c.reason])).toEqual([
      ['completed', 'r-a', 40, 10, null],
      ['completed', 'r-b', null, 10, null],
    ]);
    expect(state.status).toBe('running');
    s.add('CampaignCompleted', { completed: 2, failed: 0 });
    state = s.fold();
    expect(state.status).toBe('completed');
    expect(state.counts).toEqual({ pending: 0, running: 0, completed: 2, failed: 0, cancelled: 0 });
    expect(acceptedRuns(state)).toEqual(['r-a', 'r-b']);
  });

  it('retries an infrastructure failure: the cell is pending at the next attempt, the failed run stays in its history but is not accepted', () => {
    const s = new Stream().scheduled(plan(1)).assigned(0, 1, 'r-1');
    s.add('RunFinished', { cell: 0, attempt: 1, runId: 'r-1', outcome: 'infra_failed', reason: 'set-up failed: no dataset' });
    expect(s.fold().cells[0]).toMatchObject({ status: 'failed', reason: 'set-up failed: no dataset' }); // until the retry that follows in the same append
    s.add('RunRetried', { cell: 0, attempt: 2, reason: 'set-up failed: no dataset' }).add('RunRequested', { cell: 0, attempt: 2 });
    let state = s.fold();
    expect(state.cells[0]).toMatchObject({ status: 'pending', attempt: 2, retriesUsed: 1, runId: null, worker: null, devices: [], runs: ['r-1'] });
    expect(state.counts).toMatchObject({ pending: 1, failed: 0 });
    expect(acceptedRuns(state)).toEqual([]);

    s.assigned(0, 2, 'r-2', W2).add('RunFinished', { cell: 0, attempt: 2, runId: 'r-2', outcome: 'completed', best: 30, baseline: 10 });
    state = s.fold();
    expect(state.cells[0]).toMatchObject({ status: 'completed', attempt: 2, runId: 'r-2', worker: W2, runs: ['r-1', 'r-2'], best: 30, reason: null });
    expect(acceptedRuns(state)).toEqual(['r-2']);
  });

  it('retries a lost worker the same way, and leaves a cell whose retries ran out failed', () => {
    const s = new Stream().scheduled(plan(1, 1)).assigned(0, 1, 'r-1');
    s.add('RunFinished', { cell: 0, attempt: 1, runId: 'r-1', outcome: 'lost', reason: 'worker h1-100-aaaa on h1 was lost' });
    s.add('RunRetried', { cell: 0, attempt: 2, reason: 'worker h1-100-aaaa on h1 was lost' }).add('RunRequested', { cell: 0, attempt: 2 });
    s.assigned(0, 2, 'r-2').add('RunFinished', { cell: 0, attempt: 2, runId: 'r-2', outcome: 'lost' });
    s.add('CampaignCompleted', { completed: 0, failed: 1 });
    const state = s.fold();
    expect(state.cells[0]).toMatchObject({ status: 'failed', attempt: 2, retriesUsed: 1, runs: ['r-1', 'r-2'], reason: 'lost' });
    expect(state.status).toBe('completed');
    expect(state.counts).toMatchObject({ failed: 1, completed: 0 });
    expect(acceptedRuns(state)).toEqual([]);
  });

  it('does not count a hand-back (a worker shutting down) against the retries', () => {
    const s = new Stream().scheduled(plan(1)).assigned(0, 1, 'r-1');
    s.add('RunFinished', { cell: 0, attempt: 1, runId: 'r-1', outcome: 'infra_failed', reason: 'the worker was stopped' });
    s.add('RunRetried', { cell: 0, attempt: 2, reason: 'the worker was stopped', handedBack: true }).add('RunRequested', { cell: 0, attempt: 2 });
    expect(s.fold().cells[0]).toMatchObject({ status: 'pending', attempt: 2, retriesUsed: 0 });
  });

  it('cancels: pending cells end cancelled at once, a running one when its RunFinished says so; no cell is accepted but the completed ones', () => {
    const s = new Stream().scheduled(plan(3)).assigned(0, 1, 'r-0').assigned(1, 1, 'r-1');
    s.add('RunFinished', { cell: 0, attempt: 1, runId: 'r-0', outcome: 'completed', best: 20 });
    s.add('CampaignCancelled', { reason: 'operator' });
    let state = s.fold();
    expect(state.status).toBe('cancelled');
    expect(state.cells.map((c) => [c.status, c.reason])).toEqual([
      ['completed', null],
      ['running', null],
      ['cancelled', 'operator'],
    ]);
    s.add('RunFinished', { cell: 1, attempt: 1, runId: 'r-1', outcome: 'cancelled' });
    state = s.fold();
    expect(state.cells[1]).toMatchObject({ status: 'cancelled', reason: 'the campaign was cancelled' });
    expect(state.counts).toEqual({ pending: 0, running: 0, completed: 1, failed: 0, cancelled: 2 });
    expect(acceptedRuns(state)).toEqual(['r-0']);
    expect(new Stream().scheduled(plan(1)).add('CampaignCancelled', {}).fold().cells[0].reason).toBe('the campaign was cancelled');
  });

  it('never throws on a stream with odd events, and ignores what does not fit', () => {
    const s = new Stream();
    s.add('RunFinished', { cell: 0, attempt: 1, outcome: 'completed' }); // before the plan
    s.add('RunAssigned', { cell: 0, attempt: 1, runId: 'r-early', worker: W1, gpus: [] });
    s.scheduled(plan(2));
    s.add('RunRequested', { cell: 7, attempt: 1 }); // no such cell
    s.add('RunAssigned', { cell: 7, attempt: 1, runId: 'r-x', worker: W1, gpus: [] });
    s.add('RunFinished', { cell: 9, attempt: 1, outcome: 'infra_failed' });
    s.add('RunRetried', { cell: 9, attempt: 2, reason: 'x' });
    s.assigned(0, 3, 'r-stale'); // an attempt the cell is not at
    s.add('RunFinished', { cell: 1, attempt: 2, runId: 'r-stale', outcome: 'completed', best: 99 });
    s.add('RunRetried', { cell: 1, attempt: 2, reason: 'not failed' }); // a pending cell is not retried
    s.assigned(0, 1, 'r-0').add('RunFinished', { cell: 0, attempt: 1, runId: 'r-0', outcome: 'completed', best: 5 });
    s.add('RunFinished', { cell: 0, attempt: 1, runId: 'r-again', outcome: 'infra_failed' }); // an ended cell stays ended
    s.assigned(0, 1, 'r-late');
    s.add('RunRequested', { cell: 0, attempt: 2 });
    s.add('CampaignCompleted', { completed: 5, failed: 5 });
    s.add('CampaignCancelled', {}); // a completed campaign stays completed
    const events = [...s.events, buildEvent('AgentStarted', ID, s.events.length, at(99), { command: 'not a campaign event' })];

    let state!: CampaignProgress;
    expect(() => (state = foldCampaign(ID, events))).not.toThrow();
    expect(state.revision).toBe(events.length - 1);
    expect(state.cells.map((c) => [c.status, c.attempt, c.runId, c.runs, c.best])).toEqual([
      ['completed', 1, 'r-0', ['r-0'], 5],
      ['pending', 1, null, [], null],
    ]);
    expect(state.status).toBe('completed');
    expect(state.counts).toMatchObject({ completed: 1, pending: 1 });
    expect(acceptedRuns(state)).toEqual(['r-0']);
  });

  it('is pure: evolving returns a new state and leaves its input as it was', () => {
    const s = new Stream().scheduled(plan(1));
    const before = s.fold();
    const snapshot = structuredClone(before);
    const after = evolveCampaign(before, buildEvent('RunAssigned', ID, s.events.length, at(9), { cell: 0, attempt: 1, runId: 'r-1', worker: W1, gpus: ['0'] }));
    expect(before).toEqual(snapshot);
    expect(after.cells[0].status).toBe('running');
    expect(foldCampaign(ID, s.events)).toEqual(before); // same events, same state
  });
});
