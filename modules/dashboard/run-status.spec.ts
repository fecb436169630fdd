import { describe, expect, it } from '@jest/globals';
import { fold, type Fact } from '../../test/testing/given.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { foldRunScores } from '../ledger/run-scores.js';
import { RunStatusFold } from './run-status.js';

// The kit records the facts and reads them back; the spec then folds the stored events into the live status.
const stored = fold<A2rlEvent[]>({ stream: 'run', id: 'r-1', initial: [], evolve: (events, e) => [...events, e] });

const f = {
  scheduled: (): Fact => ({ type: 'RunScheduled', data: { task: 't', agent: 'reference', baseModel: 'm', budgetSeconds: 60, seed: 0, mode: 'free' } }),
  prepared: (): Fact => ({ type: 'WorkspacePrepared', data: { workspace: '/w', sandbox: 'none', mounts: [], dataManifest: [] } }),
  baseline: (score: number): Fact => ({ type: 'BaselineEvaluated', data: { score, cached: false } }),
  started: (): Fact => ({ type: 'AgentStarted', data: { command: 'run.sh', pid: 42 } }),
  received: (id: string): Fact => ({ type: 'SubmissionReceived', data: { submissionId: id, modelPath: 'output/ck', manifest: [] } }),
  graded: (id: string, score: number): Fact => ({ type: 'SubmissionGraded', data: { submissionId: id, score } }),
  rejected: (id: string): Fact => ({ type: 'SubmissionRejected', data: { submissionId: id, reasonClass: 'invalid_path', message: 'no such dir' } }),
};

function statusOf(events: A2rlEvent[]) {
  const live = new RunStatusFold();
  for (const e of events) live.add(e);
  return live.status(Date.parse(events.at(-1)!.occurredAt));
}

describe('the dashboard\'s live run status', () => {
  it('shows state, baseline, best and submissions as the run-scores fold has them', async () => {
    const events = await stored
      .given(f.scheduled(), f.prepared(), f.baseline(10), f.started(), f.received('a'), f.graded('a', 40), f.received('b'), f.graded('b', 30), f.rejected('c'))
      .state();
    const scores = foldRunScores(events);
    expect(statusOf(events)).toMatchObject({ state: 'running', baseline: 10, best: 40, submissions: 3, lastSeq: 8 });
    expect([scores.lifecycle.status, scores.baseline, scores.best, scores.named.size]).toEqual(['running', 10, 40, 3]);
  });

  it('before any grading: no best; the baseline and the submission in flight show', async () => {
    const events = await stored.given(f.scheduled(), f.prepared(), f.baseline(12), f.started(), f.received('a')).state();
    expect(statusOf(events)).toMatchObject({ best: null, baseline: 12, submissions: 1 });
  });
});
