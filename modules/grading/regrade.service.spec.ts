import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import { analyzeRun } from '../../projections/run-analysis/analyze.js';
import { artifactBlobReader } from '../../projections/blob-reader.js';
import { evaluationNoise, noiseFloors } from '../../projections/scoreboard/scoreboard.js';
import type { TaskPack } from '../../tasks/task-pack.js';
import { SignedRunWriter } from '../audit/bundle/testing/signed-run.js';
import { initSigningKey, type SigningKey } from '../ledger/tree-head.js';
import { ChainVerifier, sealFailures } from '../audit/verify-chain.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { LedgerService } from '../ledger/ledger.service.js';
import { fakeTask } from '../runs/testing/fake-task.js';
import { materializeTask } from './task-cache.js';
import { regradeRun, RegradeRefusedError, type RegradeDeps } from './regrade.service.js';

let home: string;
let key: SigningKey;
let store: MemoryEventStore;
let artifacts: FsArtifactStore;
let ledger: LedgerService;
beforeAll(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'a2rl-regrade-'));
  key = initSigningKey(home);
  store = new MemoryEventStore();
  artifacts = await FsArtifactStore.open(path.join(home, 'artifacts'));
  ledger = new LedgerService(store, () => new Date('2026-11-24T12:00:00.000Z'));
});
afterAll(() => rm(home, { recursive: true, force: true }));

/** The fake task whose evaluator reads the restored checkpoint's `score.txt` and adds the next of `noise` (a noisy judge). */
function noisyTask(noise: number[]): TaskPack & { graded: string[] } {
  const graded: string[] = [];
  let i = 0;
  return Object.assign(fakeTask(), {
    graded,
    async evaluate(dir: string) {
      const base = Number(await readFile(path.join(dir, 'score.txt'), 'utf8'));
      graded.push(dir);
      return { score: base + noise[i++ % noise.length]!, details: { judge: 'scripted' } };
    },
  });
}

async function put(content: string): Promise<{ path: string; sha256: string; size: number }> {
  const bytes = Buffer.from(content);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  await artifacts.put(bytes, { sha256, size: bytes.length });
  return { path: 'score.txt', sha256, size: bytes.length };
}

let runs = 0;
/** A sealed run of the fake task with two graded submissions (checkpoints score 40 and 60) and one rejected. */
async function closedRun(task: TaskPack, opts: { open?: boolean } = {}): Promise<string> {
  const runId = `run-regrade-${++runs}`;
  const pack = await materializeTask(task, path.join(home, 'tasks'));
  const w = new SignedRunWriter(store, runId, key, { headEvery: 1000 });
  await w.add('RunScheduled', { task: task.id, agent: 'reference', baseModel: task.baseModel, budgetSeconds: 60, seed: 0, mode: 'free' });
  await w.add('WorkspacePrepared', { workspace: '/w', sandbox: 'none', mounts: [], dataManifest: pack.manifest });
  await w.add('BaselineEvaluated', { score: 10, cached: false, evaluatorVersion: '1' });
  await w.add('AgentStarted', { command: 'agent' });
  for (const [id, score] of [['sub-1', 40], ['sub-2', 60]] as const) {
    await w.add('SubmissionReceived', { submissionId: id, modelPath: `output/${id}`, manifest: [await put(String(score))] });
    await w.add('SubmissionGraded', { submissionId: id, score, improvement: score - 10 });
  }
  await w.add('SubmissionRejected', { submissionId: 'sub-3', reasonClass: 'invalid_path', message: 'outside' });
  if (!opts.open) {
    await w.add('AgentExited', { exitCode: 0, reason: 'completed' });
    await w.add('RunCompleted', { best: 60, submissions: 3 });
  }
  await w.seal();
  return runId;
}

const deps = (task: TaskPack): RegradeDeps => ({ ledger, artifacts, taskCacheDir: path.join(home, 'tasks'), signingKey: () => key, tmpDir: home, task: () => task, context: () => ({ device: 'cpu', judge: null, serve: () => Promise.reject(new Error('no serving')), envServer: () => Promise.reject(new Error('no env')) }) });

async function stored(runId: string): Promise<{ event: A2rlEvent; bytes: Buffer }[]> {
  const out = [];
  for await (const r of ledger.stored(runId)) out.push({ event: r.event, bytes: r.bytes });
  return out;
}

describe('regrade --repeat', () => {
  it('grades each archived checkpoint k times, records every grading as GradingRepeated and returns mean, std, min and max', async () => {
    const task = noisyTask([0, 1, -1]);
    const runId = await closedRun(task);
    const before = (await stored(runId)).length;
    const result = await regradeRun(deps(task), runId, { repeat: 3 });

    expect(result).toMatchObject({ runId, task: 'fake-task', repeat: 3, evaluatorVersion: '1', recordedEvaluatorVersion: '1' });
    expect(result.submissions.map((s) => [s.submissionId, s.recorded, s.scores, s.n, s.mean, s.min, s.max])).toEqual([
      ['sub-1', 40, [40, 41, 39], 3, 40, 39, 41],
      ['sub-2', 60, [60, 61, 59], 3, 60, 59, 61],
    ]);
    expect(result.submissions[0]!.std).toBeCloseTo(1, 10);
    expect(task.graded).toHaveLength(6);

    const after = await stored(runId);
    const added = after.slice(before).map((r) => r.event);
    const repeats = added.filter((e): e is Extract<A2rlEvent, { type: 'GradingRepeated' }> => e.type === 'GradingRepeated');
    expect(repeats.map((e) => [e.data.subject, e.data.submissionId, e.data.repeat, e.data.of, e.data.score, e.data.series])).toEqual([
      ['submission', 'sub-1', 1, 3, 40, result.series], ['submission', 'sub-1', 2, 3, 41, result.series], ['submission', 'sub-1', 3, 3, 39, result.series],
      ['submission', 'sub-2', 1, 3, 60, result.series], ['submission', 'sub-2', 2, 3, 61, result.series], ['submission', 'sub-2', 3, 3, 59, result.series],
    ]);
    // Sealed again: the chain verifies and a head covers the new events.
    expect(added.at(-1)!.type).toBe('TreeHeadSigned');
    const chain = new ChainVerifier(runId, key.publicKeyPem);
    for (const r of after) chain.push({ bytes: r.bytes });
    expect([...chain.failures, ...sealFailures(after.map((r) => r.event))]).toEqual([]);

    // The run's analysis keeps them per series and the scoreboard pools their spread.
    const analysis = await analyzeRun(after.map((r) => r.event), artifactBlobReader(artifacts));
    expect(analysis.state).toBe('completed');
    expect(analysis.gradingRepeats?.map((s) => [s.submissionId, s.scores])).toEqual([['sub-1', [40, 41, 39]], ['sub-2', [60, 61, 59]]]);
    expect(evaluationNoise([analysis])).toEqual({ checkpoints: 2, gradings: 6, std: 1 });
  });

  it('re-grades only the submissions asked for, records failed gradings with their error, and keeps the others', async () => {
    const task = noisyTask([2]);
    const runId = await closedRun(task);
    let calls = 0;
    const flaky = Object.assign(Object.create(task) as TaskPack, {
      evaluate: async (dir: string, privateDir: string) => {
        if (++calls === 2) throw new Error('judge API\nanswered 429');
        return task.evaluate(dir, privateDir);
      },
    });
    const result = await regradeRun(deps(flaky), runId, { repeat: 3, submissions: [2] });
    expect(result.submissions).toEqual([
      expect.objectContaining({ submissionId: 'sub-2', scores: [62, 62], failures: ['judge API answered 429'], n: 2, mean: 62, std: 0 }),
    ]);
    const failed = (await stored(runId)).map((r) => r.event).filter((e) => e.type === 'GradingRepeated' && e.data.error !== undefined);
    expect(failed.map((e) => e.type === 'GradingRepeated' && [e.data.repeat, e.data.score, e.data.error])).toEqual([[2, undefined, 'judge API answered 429']]);
  });

  it('refuses an open run, an unknown run or submission and a bad count, recording nothing', async () => {
    const task = noisyTask([0]);
    const open = await closedRun(task, { open: true });
    const closed = await closedRun(task);
    const count = async (id: string) => (await stored(id)).length;
    const [openBefore, closedBefore] = [await count(open), await count(closed)];
    await expect(regradeRun(deps(task), open, { repeat: 2 })).rejects.toThrow(/is still open \(agent-running\): re-grade it once it has ended/);
    await expect(regradeRun(deps(task), 'no-such-run', { repeat: 2 })).rejects.toMatchObject({ status: 404 });
    await expect(regradeRun(deps(task), closed, { repeat: 2, submissions: [3] })).rejects.toThrow(/has no graded submission sub-3 \(graded: sub-1, sub-2\)/);
    await expect(regradeRun(deps(task), closed, { repeat: 0 })).rejects.toBeInstanceOf(RegradeRefusedError);
    expect([await count(open), await count(closed)]).toEqual([openBefore, closedBefore]);
    expect(task.graded).toEqual([]);
  });
});

describe('baseline repeats feed the noise floor', () => {
  it('counts a fresh baseline and its repeats as samples of the task\'s floor', async () => {
    const events = [
      { type: 'RunScheduled', data: { task: 't', agent: 'a', baseModel: 'm', budgetSeconds: 60, seed: 0, mode: 'free' } },
      { type: 'WorkspacePrepared', data: { workspace: '/w', sandbox: 'none', mounts: [], dataManifest: [] } },
      { type: 'BaselineEvaluated', data: { score: 10, cached: false } },
      { type: 'GradingRepeated', data: { subject: 'baseline', series: 'b-1', repeat: 2, of: 3, score: 12 } },
      { type: 'GradingRepeated', data: { subject: 'baseline', series: 'b-1', repeat: 3, of: 3, score: 14 } },
    ].map((e, seq) => ({ ...e, runId: 'r-floor', seq, id: String(seq), occurredAt: '2026-11-24T12:00:00.000Z', schemaVersion: 1 })) as unknown as A2rlEvent[];
    const analysis = await analyzeRun(events, artifactBlobReader(artifacts));
    expect(analysis.gradingRepeats).toEqual([{ subject: 'baseline', submissionId: null, series: 'b-1', scores: [10, 12, 14], failed: 0 }]);
    const floor = [...noiseFloors([analysis]).values()][0]!;
    expect([floor.n, floor.mean]).toEqual([3, 12]);
    expect(evaluationNoise([analysis])).toEqual({ checkpoints: 1, gradings: 3, std: 2 });
  });
});
