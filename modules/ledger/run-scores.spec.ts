import { describe, expect, it } from '@jest/globals';
import { fold, type Fact } from '../../test/testing/given.js';
import { foldRunLifecycle } from './run-lifecycle.js';
import { bestSubmissionId, evolveScores, foldRunScores, initialRunScores, outcomeCounts, type RunScores } from './run-scores.js';

const scores = fold<RunScores>({ stream: 'run', id: 'r-1', initial: initialRunScores, evolve: evolveScores });

const f = {
  scheduled: (): Fact => ({ type: 'RunScheduled', data: { task: 't', agent: 'reference', baseModel: 'm', budgetSeconds: 60, seed: 0, mode: 'free' } }),
  prepared: (): Fact => ({ type: 'WorkspacePrepared', data: { workspace: '/w', sandbox: 'none', mounts: [], dataManifest: [] } }),
  baseline: (score: number): Fact => ({ type: 'BaselineEvaluated', data: { score, cached: false } }),
  started: (): Fact => ({ type: 'AgentStarted', data: { command: 'run.sh', pid: 42 } }),
  received: (id: string): Fact => ({ type: 'SubmissionReceived', data: { submissionId: id, modelPath: 'output/ck', manifest: [] } }),
  graded: (id: string, score: number): Fact => ({ type: 'SubmissionGraded', data: { submissionId: id, score } }),
  rejected: (id: string): Fact => ({ type: 'SubmissionRejected', data: { submissionId: id, reasonClass: 'invalid_path', message: 'no such dir' } }),
  exited: (): Fact => ({ type: 'AgentExited', data: { exitCode: 0, reason: 'completed' } }),
  completed: (submissions: number): Fact => ({ type: 'RunCompleted', data: { submissions } }),
  interrupted: (): Fact => ({ type: 'RunInterrupted', data: { reason: 'the harness exited while the run was open' } }),
};

const opened = [f.scheduled(), f.prepared(), f.baseline(10), f.started()];

describe('run scores (one fold for state, baseline, best and submissions)', () => {
  it('starts empty: no state, baseline, best or submission', async () => {
    const s = await scores.given().state();
    expect([s.lifecycle.status, s.baseline, s.best, s.named.size, s.submissions.size]).toEqual([null, null, null, 0, 0]);
  });

  it('keeps the highest grading as best, counts every submission, and names the first graded with it', async () => {
    const s = await scores
      .given(...opened, f.received('a'), f.graded('a', 40), f.received('b'), f.graded('b', 70), f.received('c'))
      .when(f.rejected('c'))
      .then({ baseline: 10, best: 70, named: new Set(['a', 'b', 'c']) });
    expect([...s.submissions]).toEqual([['a', { type: 'SubmissionGraded', score: 40 }], ['b', { type: 'SubmissionGraded', score: 70 }], ['c', { type: 'SubmissionRejected' }]]);
    expect(bestSubmissionId(s)).toBe('b');
    expect(outcomeCounts(s)).toEqual({ graded: 2, rejected: 1 });
  });

  it('a lower grading after the best leaves it; a first grading of 0 is a best too', async () => {
    await scores.given(...opened, f.received('a')).when(f.graded('a', 0)).then({ best: 0 });
    await scores.given(...opened, f.received('a'), f.graded('a', 50), f.received('b')).when(f.graded('b', 20)).then({ best: 50 });
  });

  it('on a tie, the best submission is the first received, whichever was graded first', async () => {
    const s = await scores.given(...opened, f.received('a'), f.received('b'), f.graded('b', 60)).when(f.graded('a', 60)).then({ best: 60 });
    expect(bestSubmissionId(s)).toBe('a');
  });

  it('the baseline is the last one evaluated (an operator may set it again)', async () => {
    await scores.given(...opened).when(f.baseline(25)).then({ baseline: 25 });
  });

  it('a submission refused outright (never received) is a submission with its outcome', async () => {
    const s = await scores.given(...opened).when(f.rejected('x')).then({ named: new Set(['x']), best: null });
    expect(outcomeCounts(s)).toEqual({ graded: 0, rejected: 1 });
  });

  it('a grading of a submission never received is counted as named, but attaches to nothing and is no best', async () => {
    const s = await scores.given(...opened).when(f.graded('ghost', 99)).then({ named: new Set(['ghost']), best: null });
    expect(s.submissions.size).toBe(0);
    expect(bestSubmissionId(s)).toBeUndefined();
  });

  it('only a submission\'s first outcome counts (a second, which the recorder refuses, is ignored)', async () => {
    const s = await scores.given(...opened, f.received('a'), f.graded('a', 30)).when(f.graded('a', 90)).then({ best: 30 });
    expect(outcomeCounts(s)).toEqual({ graded: 1, rejected: 0 });
    await scores.given(...opened, f.received('b'), f.rejected('b')).when(f.graded('b', 90)).then({ best: null });
  });

  it('a grading still in flight is a submission without an outcome', async () => {
    const s = await scores.given(...opened).when(f.received('a')).then({ best: null, named: new Set(['a']) });
    expect([...s.submissions]).toEqual([['a', null]]);
  });

  it('its lifecycle is the run-lifecycle evolve over the same events', async () => {
    const events = [...opened, f.received('a'), f.graded('a', 40), f.exited(), f.completed(1)];
    const s = await scores.given(...events.slice(0, -1)).when(events.at(-1)!).then({ best: 40 });
    expect(s.lifecycle).toEqual(foldRunLifecycle(events));
    expect(s.lifecycle.status).toBe('completed');
    expect((await scores.given(...opened).when(f.interrupted()).then({})).lifecycle.phase).toBe('interrupted');
  });

  it('an event that changes none of it returns the same state object (folding a long run stays cheap)', () => {
    const before = foldRunScores(opened);
    const head = { type: 'TreeHeadSigned', data: { treeSize: 3, rootHash: 'a'.repeat(64), signature: 'sig', keyId: 'k' } } as const;
    expect(evolveScores(before, head)).toBe(before);
    expect(evolveScores(before, f.received('a'))).not.toBe(before);
    expect(before.named.size).toBe(0); // never mutated
  });
});
