import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { openReadModels } from '../../infra/readmodels/data-source.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import { dumpReadModel, InvalidProjectionError, ProjectionRunner } from '../../modules/readmodels/projection-runner.js';
import { analyzeRun } from './analyze.js';
import type { BlobReader } from '../blob-reader.js';
import type { RunAnalysisRow } from './run-analysis.entity.js';
import { runAnalysisProjection } from './run-analysis.projection.js';
import { at, sha, until } from '../../test/testing/helpers.js';

const CODE = 'from trl import SFTTrainer\n';
const blobs: BlobReader = { read: async (h) => (h === sha(CODE) ? Buffer.from(CODE) : null) };

/** A complete run: scheduled, baseline 10, SFT training, submissions scoring `scores`. */
function runEvents(runId: string, scores: number[]): A2rlEvent[] {
  const data: [A2rlEvent['type'], object][] = [
    ['RunScheduled', { task: 'ref-x', agent: 'a', baseModel: 'tiny', budgetSeconds: 60, seed: 0, mode: 'free' }],
    ['WorkspacePrepared', { workspace: `/ws/${runId}`, sandbox: 'none', mounts: [], dataManifest: [] }],
    ['BaselineEvaluated', { score: 10, cached: false }],
    ['AgentStarted', { command: 'agent' }],
    ['FileChanged', { path: 'code/train.py', op: 'create', sha256: sha(CODE), size: CODE.length, observedAt: at(4) }],
    ['ProcessStarted', { pid: 7, ppid: 1, argv: ['python', `/ws/${runId}/code/train.py`], cwd: `/ws/${runId}`, observedAt: at(5) }],
    ['ProcessExited', { pid: 7, exitCode: 0, durationMs: 1000, observedAt: at(6) }],
  ];
  scores.forEach((score, i) => {
    data.push(['SubmissionReceived', { submissionId: `s${i}`, modelPath: `output/s${i}`, manifest: [{ path: 'w.json', sha256: sha(`${runId}${i}`), size: 1 }] }]);
    data.push(['SubmissionGraded', { submissionId: `s${i}`, score, improvement: score - 10 }]);
  });
  data.push(['AgentExited', { reason: 'completed', exitCode: 0 }], ['RunCompleted', { submissions: scores.length }]);
  return data.map(([type, d], seq) => buildEvent(type, runId, seq, at(seq), d as never));
}

describe('run-analysis projection through the ProjectionRunner', () => {
  let cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.reverse()) await c();
    cleanup = [];
  });

  async function setup() {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-ra-'));
    const store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
    const dataSource = await openReadModels(`sqlite://${path.join(dir, 'readmodels.db')}`);
    cleanup.push(async () => {
      await dataSource.destroy();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    });
    return { store, dataSource };
  }

  /** Appends a run's events in slices, so batches hold partial runs and runs are recomputed several times. */
  async function appendInSlices(store: SqliteEventStore, events: A2rlEvent[], from: number, to: number) {
    const slice = events.slice(from, to); // from < events.length for these runs
    if (slice.length) await store.append(streamName(slice[0].runId), slice, from === 0 ? 'no_stream' : BigInt(from - 1));
  }

  it('rebuilding from zero reproduces the incremental read model byte for byte', async () => {
    const { store, dataSource } = await setup();
    const runs = { a: runEvents('a', [20, 5]), b: runEvents('b', [3]), c: runEvents('c', []) };
    const runner = new ProjectionRunner(store, dataSource, [runAnalysisProjection], { batchSize: 3, blobs });

    // Live following with tiny batches while the runs are written piece by piece.
    const abort = new AbortController();
    const live = runner.run(abort.signal);
    for (const [from, to] of [[0, 4], [4, 8], [8, 100]]) {
      for (const events of Object.values(runs)) await appendInSlices(store, events, from, to);
    }
    const total = Object.values(runs).reduce((n, e) => n + e.length, 0);
    await until('the live runner to catch up', async () => (await runner.status())[0].lag === 0);
    abort.abort();
    await live;
    const incremental = await dumpReadModel(dataSource, runAnalysisProjection);
    expect((await runner.status())[0]).toMatchObject({ lag: 0, eventsProcessed: total });

    await runner.rebuild();
    expect(await dumpReadModel(dataSource, runAnalysisProjection)).toBe(incremental);

    const rows = JSON.parse(incremental) as RunAnalysisRow[];
    expect(rows.map((r) => [r.runId, r.failureClass, r.routeBest, r.best, r.submissions, r.lastSeq])).toEqual([
      ['a', 'success', 'sft', 20, 2, runs.a.length - 1],
      ['b', 'training_diverged', 'sft', 3, 1, runs.b.length - 1],
      ['c', 'no_improvement', 'sft', null, 0, runs.c.length - 1],
    ]);
    expect(JSON.parse(rows[0].analysis)).toMatchObject({ runId: 'a', metrics: { score_trajectory: [20, 5] } });
  });

  it('catch-up recomputes each touched run once and commits rows with the final checkpoint', async () => {
    const { store, dataSource } = await setup();
    const events = runEvents('a', [20]);
    await appendInSlices(store, events, 0, events.length);
    let reads = 0;
    const counting: BlobReader = { read: (h) => ((reads += 1), blobs.read(h)) };
    const runner = new ProjectionRunner(store, dataSource, [runAnalysisProjection], { batchSize: 2, blobs: counting });
    const progress: number[] = [];
    expect(await runner.catchUp(undefined, (p) => progress.push(p.processed))).toEqual([{ name: 'run-analysis', processed: events.length }]);
    expect(progress).toEqual([events.length]);
    let once = 0;
    await analyzeRun(events, { read: (h) => ((once += 1), blobs.read(h)) });
    expect(once).toBeGreaterThan(0);
    expect(reads).toBe(once); // one analysis of run a, not one per batch
    expect(await runner.catchUp()).toEqual([{ name: 'run-analysis', processed: 0 }]);
  });

  it('stores no failure class while the run is still going, and its class once it has ended', async () => {
    const { store, dataSource } = await setup();
    const events = runEvents('a', [5]);
    const running = events.length - 2; // everything before AgentExited and RunCompleted
    await appendInSlices(store, events, 0, running);
    const runner = new ProjectionRunner(store, dataSource, [runAnalysisProjection], { blobs });
    await runner.catchUp();
    const row = async () => (JSON.parse(await dumpReadModel(dataSource, runAnalysisProjection)) as RunAnalysisRow[])[0];
    expect(await row()).toMatchObject({ runId: 'a', state: 'running', failureClass: null });
    await appendInSlices(store, events, running, events.length);
    await runner.catchUp();
    expect(await row()).toMatchObject({ runId: 'a', state: 'completed', failureClass: 'training_diverged' });
  });

  it('refuses a run projection without a BlobReader', async () => {
    const { store, dataSource } = await setup();
    expect(() => new ProjectionRunner(store, dataSource, [runAnalysisProjection])).toThrow(InvalidProjectionError);
  });
});
