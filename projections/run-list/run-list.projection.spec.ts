import { describe, expect, it } from '@jest/globals';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import type { A2rlEvent, EventData, EventType } from '../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import { foldRunLifecycle, runGuard } from '../../modules/ledger/run-lifecycle.js';
import { at } from '../../test/testing/helpers.js';
import { projection, type Fact } from '../../test/testing/given.js';
import type { RunListRow } from './run-list.entity.js';
import { runListProjection } from './run-list.projection.js';

const RUN = 'r-1';

const scheduled = (seq = 0) =>
  buildEvent('RunScheduled', RUN, seq, at(seq), {
    task: 'l1-arith', agent: 'reference', driver: 'gpt-x', baseModel: 'tiny-0', budgetSeconds: 60, seed: 7, mode: 'free',
  });
const started = (seq: number) => buildEvent('AgentStarted', RUN, seq, at(seq), { command: 'run.sh' });
const fileChanged = (seq: number) =>
  buildEvent('FileChanged', RUN, seq, at(seq), { path: 'code/train.py', op: 'create', observedAt: at(seq) });

// given(events).when(event).then(rows), the events recorded on the in-memory store (test/testing/given.ts).
const runList = projection(runListProjection, RUN);
const SCHEDULED: Fact = { type: 'RunScheduled', data: { task: 'l1-arith', agent: 'reference', driver: 'gpt-x', baseModel: 'tiny-0', budgetSeconds: 60, seed: 7, mode: 'free' } };
const STARTED: Fact = { type: 'AgentStarted', data: { command: 'run.sh' } };
const FILE: Fact = { type: 'FileChanged', data: { path: 'code/train.py', op: 'create', observedAt: at(2) } };
const row = (fields: Partial<RunListRow>): RunListRow => ({
  runId: RUN, task: 'l1-arith', agent: 'reference', driver: 'gpt-x', baseModel: 'tiny-0', state: 'scheduled', eventCount: 1, lastSeq: 0, scheduledAt: at(0), lastEventAt: at(0), ...fields,
});

function fold(events: A2rlEvent[]): RunListRow | undefined {
  return events.reduce<RunListRow | undefined>((row, e) => runListProjection.evolve(row, e), undefined);
}

describe('run-list projection', () => {
  it('keys every event by its run', () => {
    expect(runListProjection.keyOf(started(3))).toBe(RUN);
  });

  it('records what was scheduled and when, from the event time', async () => {
    await runList.given().when(SCHEDULED).then([{
      runId: RUN, task: 'l1-arith', agent: 'reference', driver: 'gpt-x', baseModel: 'tiny-0', state: 'scheduled',
      eventCount: 1, lastSeq: 0, scheduledAt: at(0), lastEventAt: at(0),
    }]);
  });

  it('stores a missing driver as null', () => {
    const e = buildEvent('RunScheduled', RUN, 0, at(0), { task: 't', agent: 'a', baseModel: 'm', budgetSeconds: 1, seed: 0, mode: 'sft-only' });
    expect(fold([e])?.driver).toBeNull();
  });

  it.each([
    ['WorkspacePrepared', buildEvent('WorkspacePrepared', RUN, 1, at(1), { workspace: '/w', sandbox: 'none', mounts: [], dataManifest: [] }), 'running'],
    ['AgentStarted', started(1), 'running'],
    ['RunResumed', buildEvent('RunResumed', RUN, 1, at(1), {}), 'running'],
    ['RunCompleted', buildEvent('RunCompleted', RUN, 1, at(1), { submissions: 2, best: 40 }), 'completed'],
    ['RunInterrupted', buildEvent('RunInterrupted', RUN, 1, at(1), { reason: 'host restart' }), 'interrupted'],
  ])('moves the run to the state %s implies', (_type, event, state) => {
    expect(fold([scheduled(), event])?.state).toBe(state);
  });

  it('shows set-up failures and cancellations as their own states, from the recorded causes', () => {
    const setupFailed = buildEvent('RunInterrupted', RUN, 1, at(1), { reason: 'setup failed before the agent started: no dataset', cause: 'setup_failed' });
    expect(fold([scheduled(), setupFailed])?.state).toBe('setup_failed');
    // Recorded before the cause was kept: read as before.
    expect(fold([scheduled(), buildEvent('RunInterrupted', RUN, 1, at(1), { reason: 'setup failed before the agent started: no dataset' })])?.state).toBe('interrupted');
    for (const stoppedBy of ['operator', 'campaign'] as const) {
      const exited = buildEvent('AgentExited', RUN, 2, at(2), { exitCode: 143, reason: 'killed', stoppedBy });
      expect(fold([scheduled(), started(1), exited])?.state).toBe('cancelled');
      expect(fold([scheduled(), started(1), exited, buildEvent('RunCompleted', RUN, 3, at(3), { submissions: 0 })])?.state).toBe('cancelled');
    }
    const limit = buildEvent('AgentExited', RUN, 2, at(2), { exitCode: 143, reason: 'killed', stoppedBy: 'limit' });
    expect(fold([scheduled(), started(1), limit, buildEvent('RunCompleted', RUN, 3, at(3), { submissions: 0 })])?.state).toBe('completed');
  });

  it('keeps the state on events that are not lifecycle events, and counts them', async () => {
    await runList.given(SCHEDULED, STARTED, FILE).when(FILE).then([row({ state: 'running', eventCount: 4, lastSeq: 3, lastEventAt: at(3) })]);
  });

  it('follows an interruption and resumption', async () => {
    const interrupted: Fact = { type: 'RunInterrupted', data: { reason: 'oom' } };
    await runList.given(SCHEDULED, STARTED).when(interrupted).then([row({ state: 'interrupted', eventCount: 3, lastSeq: 2, lastEventAt: at(2) })]);
    await runList.given(SCHEDULED, STARTED, interrupted).when({ type: 'RunResumed', data: {} }).then([row({ state: 'running', eventCount: 4, lastSeq: 3, lastEventAt: at(3) })]);
  });

  it('builds a row with null run facts when RunScheduled is missing', () => {
    expect(fold([fileChanged(5)])).toEqual({
      runId: RUN, task: null, agent: null, driver: null, baseModel: null, state: null,
      eventCount: 1, lastSeq: 5, scheduledAt: null, lastEventAt: at(5),
    });
    expect(fold([started(4), fileChanged(5)])?.state).toBe('running');
  });

  it('does not mutate the previous row', () => {
    const before = fold([scheduled()])!;
    const copy = { ...before };
    runListProjection.evolve(before, started(1));
    expect(before).toEqual(copy);
  });

  it('shows the same state as the run-lifecycle evolve after every event of a recorded run', async () => {
    // Recorded as the run recorder does (guarded, appended, read back decoded from the stored bytes).
    const sha = 'b'.repeat(64);
    const observedAt = at(3);
    const facts: Array<[EventType, EventData<EventType>]> = [
      ['RunScheduled', { task: 't', agent: 'reference', baseModel: 'm', budgetSeconds: 60, seed: 0, mode: 'free' }],
      ['WorkspacePrepared', { workspace: '/w', sandbox: 'none', mounts: [], dataManifest: [] }],
      ['BaselineEvaluated', { score: 10, cached: true }],
      ['FileChanged', { path: 'code/train.py', op: 'create', sha256: sha, size: 1, observedAt }],
      ['AgentStarted', { command: 'run.sh', pid: 7 }],
      ['ProcessStarted', { pid: 8, ppid: 7, argv: ['python3', 'code/train.py'], cwd: '/w', observedAt }],
      ['SubmissionReceived', { submissionId: 'sub-1', modelPath: 'output/ck', manifest: [] }],
      ['ProcessExited', { pid: 8, exitCode: 0, durationMs: 3, observedAt }],
      ['SubmissionReceived', { submissionId: 'sub-2', modelPath: 'output/ck2', manifest: [] }],
      ['SubmissionGraded', { submissionId: 'sub-1', score: 40, improvement: 30 }],
      ['RunInterrupted', { reason: 'the harness exited while the run was open', cause: 'harness_gone' }],
      ['TreeHeadSigned', { treeSize: 11, rootHash: sha, signature: 's', keyId: 'k' }],
      ['RunResumed', { note: 'resumed' }],
      ['SubmissionRejected', { submissionId: 'sub-2', reasonClass: 'infra_error', message: 'the harness was lost while this submission was being graded' }],
      ['AgentStarted', { command: 'run.sh', pid: 9 }],
      ['AgentExited', { exitCode: 0, reason: 'completed' }],
      ['RunCompleted', { submissions: 2, best: 40 }],
      ['TreeHeadSigned', { treeSize: 17, rootHash: sha, signature: 's', keyId: 'k' }],
    ];
    const guard = runGuard();
    const store = new MemoryEventStore();
    const built = facts.map(([type, data], seq) => {
      guard(type, data);
      return buildEvent(type, RUN, seq, at(seq), data);
    });
    await store.append(streamName(RUN), built.slice(0, 9), 'no_stream');
    await store.append(streamName(RUN), built.slice(9), 8n);
    const recorded: A2rlEvent[] = [];
    for await (const r of store.readStream(streamName(RUN))) recorded.push(r.event);
    expect(recorded).toHaveLength(facts.length);

    const states = recorded.map((_, i) => fold(recorded.slice(0, i + 1))?.state);
    expect(states).toEqual(recorded.map((_, i) => foldRunLifecycle(recorded.slice(0, i + 1)).status));
    expect(states).toEqual([
      'scheduled', 'running', 'running', 'running', 'running', 'running', 'running', 'running', 'running',
      'running', 'interrupted', 'interrupted', 'running', 'running', 'running', 'running', 'completed', 'completed',
    ]);
    await store.close();
  });
});
