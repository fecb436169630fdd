import { describe, expect, it } from '@jest/globals';
import { buildEvent } from '../ledger/events/envelope.js';
import type { A2rlEvent, EventData, EventType } from '../ledger/events/catalog.js';
import { planResume, ResumeRefusedError } from './resume-plan.js';

// The resume plan is a pure function of the stored events: whether the run may continue, with which
// budget, and what its workspace and the agent's home held when the harness was lost.

const RUN = 'ref-arith-20260101000000-abcdef';
const SHA = (c: string) => c.repeat(64);
const T0 = Date.UTC(2026, 0, 1);
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

function stream(...specs: Array<[EventType, number, Record<string, unknown>]>): A2rlEvent[] {
  return specs.map(([type, s, data], seq) => buildEvent(type, RUN, seq, at(s), data as EventData<typeof type>));
}

const START: Array<[EventType, number, Record<string, unknown>]> = [
  ['RunScheduled', 0, { task: 'ref-arith', agent: 'reference', baseModel: 'm', budgetSeconds: 600, seed: 0, mode: 'free' }],
  ['WorkspacePrepared', 1, { workspace: '/w', sandbox: 'bwrap', mounts: [], dataManifest: [{ path: 'data/train.jsonl', sha256: SHA('d'), size: 3 }, { path: 'models/m/w.json', sha256: SHA('e'), size: 2 }] }],
  ['BaselineEvaluated', 2, { score: 10, cached: true, evaluatorVersion: 'v1' }],
  ['AgentStarted', 10, { command: 'agent' }],
  ['FileChanged', 20, { path: 'code/train.py', op: 'create', sha256: SHA('a'), size: 5, observedAt: at(20) }],
  ['SubmissionReceived', 30, { submissionId: 'sub-1', modelPath: 'output/ckpt', manifest: [{ path: 'w.json', sha256: SHA('c'), size: 2 }] }],
  ['SubmissionGraded', 31, { submissionId: 'sub-1', score: 40 }],
  ['SubmissionReceived', 40, { submissionId: 'sub-2', modelPath: 'output/ckpt', manifest: [{ path: 'w.json', sha256: SHA('f'), size: 2 }] }],
  ['FileChanged', 50, { path: 'code/big.bin', op: 'create', size: 9, observedAt: at(50) }],
];

describe('planResume', () => {
  it('plans the continuation of a run whose harness was lost: budget less the agent time to its last heartbeat, files and pending grading as recorded', () => {
    const plan = planResume(RUN, stream(...START, ['RunInterrupted', 120, { reason: 'gone', cause: 'harness_gone', lastAliveAt: at(70) }], ['TreeHeadSigned', 120, { treeSize: 10, rootHash: SHA('0'), signature: 's', keyId: 'k' }]));
    expect(plan).toMatchObject({ baseline: 10, interruptedSeq: 9, lastFact: { seq: 8, at: at(50) }, agentSecondsUsed: 60, budgetSecondsLeft: 540, pending: ['sub-2'], submissionNumber: 2, segment: 2 });
    expect(plan.scores.best).toBe(40);
    // The agent's files: code and the submitted checkpoint as last archived; what was given (data/, models/) is prepared again.
    expect(plan.files.map((f) => [f.path, f.sha256])).toEqual([['code/big.bin', null], ['code/train.py', SHA('a')], ['output/ckpt/w.json', SHA('f')]]);
  });

  it('counts the agent time to the last recorded fact when no heartbeat is known, and adds the earlier segments of a run resumed before', () => {
    const once = [...START, ['RunInterrupted', 120, { reason: 'gone', cause: 'harness_gone' }], ['RunResumed', 130, { lastFactAt: at(50) }], ['AgentStarted', 140, { command: 'agent' }], ['FileChanged', 160, { path: 'code/x', op: 'create', sha256: SHA('b'), size: 1, observedAt: at(160) }], ['RunInterrupted', 200, { reason: 'gone again', cause: 'harness_gone' }]] as Array<[EventType, number, Record<string, unknown>]>;
    const plan = planResume(RUN, stream(...once));
    expect(plan).toMatchObject({ agentSecondsUsed: 40 + 20, budgetSecondsLeft: 540, segment: 3, agentStarts: [at(10), at(140)] });
  });

  it('refuses, saying why, an unknown run, one still open, a completed one, a set-up failure and one whose budget is spent', () => {
    const refusal = (events: A2rlEvent[]) => {
      try {
        planResume(RUN, events);
      } catch (error) {
        expect(error).toBeInstanceOf(ResumeRefusedError);
        return (error as Error).message;
      }
      throw new Error('not refused');
    };
    expect(refusal([])).toBe(`run ${RUN} is not in this ledger`);
    expect(refusal(stream(...START))).toMatch(/cannot be resumed: only an interrupted run can be resumed, and this one is open/);
    const done = stream(...START, ['SubmissionGraded', 60, { submissionId: 'sub-2', score: 1 }], ['AgentExited', 61, { reason: 'completed', observedAt: at(61) }], ['RunCompleted', 62, { submissions: 2 }]);
    expect(refusal(done)).toMatch(/cannot be resumed: a completed run cannot be resumed/);
    expect(refusal(stream(START[0], ['RunInterrupted', 1, { reason: 'x', cause: 'setup_failed' }]))).toMatch(/its set-up failed before the agent started/);
    expect(refusal(stream(...START, ['RunInterrupted', 700, { reason: 'gone', cause: 'harness_gone', lastAliveAt: at(650) }]))).toMatch(/its budget of 600 s was already used/);
  });
});
