import { randomUUID } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import type { A2rlEvent, EventData, EventType } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { OutDirNotEmptyError, ReplayIntegrityError, SeqOutOfRangeError, TimeBeforeRunError, UnknownRunError } from './errors.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { parseReplayPoint, ReplayService } from './replay.service.js';
import { openReplayHarness, type ReplayHarness } from './testing/replay-harness.js';

const RUN = 'run-replay-1';
const T0 = Date.UTC(2026, 0, 1);
/** seq → time; seqs 5 and 6 share one instant, so a time resolves to the later of them. */
const at = (seq: number) => new Date(T0 + (seq === 6 ? 5 : seq) * 1000).toISOString();

const TRAIN_1 = 'const lr = 0.1;\nconst steps = 10;\ntrain(lr, steps);\n';
const TRAIN_2 = 'const lr = 0.05;\nconst steps = 10;\ntrain(lr, steps);\n';
const UTIL = 'export const id = (x) => x;\n';
const DATA = '{"q":"1+1","a":"2"}\n';
const BASE = Buffer.from([0, 1, 2, 3, 255]);
const CKPT_MANIFEST_1 = '{"stage":"sft"}\n';
const CKPT_MANIFEST_2 = '{"stage":"rl"}\n';
const CKPT_WEIGHTS = Buffer.from([9, 0, 9, 0]);

let h: ReplayHarness;
let dirs = 0;
const outDir = () => path.join(h.dir, `out-${++dirs}`);

async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const abs = path.join(entry.parentPath, entry.name);
    out[path.relative(dir, abs)] = (await readFile(abs)).toString('latin1');
  }
  return out;
}
const latin1 = (b: string | Buffer) => Buffer.from(b).toString('latin1');

function ev<T extends EventType>(seq: number, type: T, data: EventData<T>, runId = RUN): A2rlEvent {
  return buildEvent(type, runId, seq, at(seq), data);
}

async function fileChanged(seq: number, p: string, op: 'create' | 'modify', content: string | Buffer, runId = RUN): Promise<A2rlEvent> {
  const b = await h.blob(content);
  return ev(seq, 'FileChanged', { path: p, op, sha256: b.sha256, size: b.size, key: b.key, observedAt: at(seq) }, runId);
}

async function entry(p: string, content: string | Buffer) {
  const { sha256, size } = await h.blob(content);
  return { path: p, sha256, size };
}

beforeAll(async () => {
  h = await openReplayHarness();
  await h.append([
    ev(0, 'RunScheduled', { task: 'ref-arith', agent: 'reference', baseModel: 'base', budgetSeconds: 60, seed: 0, mode: 'free' }),
    ev(1, 'WorkspacePrepared', {
      workspace: '/ws/run-replay-1', sandbox: 'none', mounts: [],
      dataManifest: [await entry('data/train.jsonl', DATA), await entry('models/base/weights.bin', BASE)],
    }),
    await fileChanged(2, 'code/train.mjs', 'create', TRAIN_1),
    await fileChanged(3, 'code/util.mjs', 'create', UTIL),
    ev(4, 'SubmissionReceived', {
      submissionId: 'sub-1', modelPath: 'output/ckpt',
      manifest: [await entry('manifest.json', CKPT_MANIFEST_1), await entry('weights.bin', CKPT_WEIGHTS)],
    }),
    ev(5, 'SubmissionGraded', { submissionId: 'sub-1', score: 40, improvement: 30 }),
    await fileChanged(6, 'code/train.mjs', 'modify', TRAIN_2),
    ev(7, 'FileChanged', { path: 'code/util.mjs', op: 'delete', observedAt: at(7) }),
    // The same directory submitted again with fewer files: the archive saw only manifest.json there.
    ev(8, 'SubmissionReceived', { submissionId: 'sub-2', modelPath: 'output/ckpt', manifest: [await entry('manifest.json', CKPT_MANIFEST_2)] }),
    ev(9, 'SubmissionGraded', { submissionId: 'sub-2', score: 83.5, improvement: 73.5 }),
    ev(10, 'RunCompleted', { submissions: 2, best: 83.5 }),
  ]);
});
afterAll(() => h.close());

describe('ReplayService.materialize', () => {
  it('writes the files recorded up to the seq: provided data, agent code and archived checkpoints', async () => {
    const out = outDir();
    const result = await h.replay.materialize(RUN, 4, out);
    expect(await tree(out)).toEqual({
      'data/train.jsonl': DATA,
      'models/base/weights.bin': latin1(BASE),
      'code/train.mjs': TRAIN_1,
      'code/util.mjs': UTIL,
      'output/ckpt/manifest.json': CKPT_MANIFEST_1,
      'output/ckpt/weights.bin': latin1(CKPT_WEIGHTS),
    });
    expect(result).toMatchObject({ runId: RUN, at: { seq: 4, type: 'SubmissionReceived', occurredAt: at(4) }, files: 6 });
    expect(result.bytes).toBe([DATA, BASE, TRAIN_1, UTIL, CKPT_MANIFEST_1, CKPT_WEIGHTS].reduce((n, c) => n + Buffer.byteLength(c), 0));
  });

  it('takes the latest revision per path, leaves deleted files out and replaces a resubmitted checkpoint directory', async () => {
    const out = outDir();
    await h.replay.materialize(RUN, 8, out);
    expect(await tree(out)).toEqual({
      'data/train.jsonl': DATA,
      'models/base/weights.bin': latin1(BASE),
      'code/train.mjs': TRAIN_2,
      'output/ckpt/manifest.json': CKPT_MANIFEST_2,
    });
  });

  it('gives an empty workspace before WorkspacePrepared', async () => {
    const out = outDir();
    expect((await h.replay.materialize(RUN, 0, out)).files).toBe(0);
    expect(await readdir(out)).toEqual([]);
  });

  it('resolves a time to the last event that occurred at or before it', async () => {
    // seqs 5 and 6 share an instant: the state after 6 (train.mjs modified) is the answer.
    expect(await h.replay.resolve(RUN, at(5))).toEqual({ seq: 6, occurredAt: at(5), type: 'FileChanged' });
    expect((await h.replay.resolve(RUN, new Date(T0 + 3500).toISOString())).seq).toBe(3);
    expect((await h.replay.resolve(RUN, '2030-01-01T00:00:00Z')).seq).toBe(10);
    const out = outDir();
    await h.replay.materialize(RUN, at(6), out);
    expect((await tree(out))['code/train.mjs']).toBe(TRAIN_2);
  });

  it('refuses a time before the run, a seq out of range and an unknown run, naming them', async () => {
    await expect(h.replay.resolve(RUN, '2025-12-31T23:59:59Z')).rejects.toThrow(TimeBeforeRunError);
    await expect(h.replay.materialize(RUN, 11, outDir())).rejects.toThrow(new SeqOutOfRangeError(RUN, 11, 10));
    await expect(h.replay.materialize('no-such-run', 0, outDir())).rejects.toThrow(UnknownRunError);
    await expect(h.replay.resolve('no-such-run', at(1))).rejects.toThrow(UnknownRunError);
  });

  it('refuses a non-empty output directory unless forced, and forced leaves only the replayed files', async () => {
    const out = outDir();
    await mkdir(path.join(out, 'stale'), { recursive: true });
    await writeFile(path.join(out, 'stale', 'old.txt'), 'old');
    await expect(h.replay.materialize(RUN, 3, out)).rejects.toThrow(OutDirNotEmptyError);
    expect(await tree(out)).toEqual({ 'stale/old.txt': 'old' });
    await h.replay.materialize(RUN, 3, out, { force: true });
    expect(Object.keys(await tree(out)).sort()).toEqual(['code/train.mjs', 'code/util.mjs', 'data/train.jsonl', 'models/base/weights.bin']);
  });

  it('never writes through a link planted in the output directory: forced, links go as links; the output directory itself may not be one', async () => {
    const out = outDir();
    const outside = path.join(h.dir, `outside-${dirs}`);
    await mkdir(path.join(outside, 'code'), { recursive: true });
    await writeFile(path.join(outside, 'code', 'train.mjs'), 'host file');
    await mkdir(out);
    await symlink(outside, path.join(out, 'code')); // where the replay will create code/
    await symlink(path.join(outside, 'code', 'train.mjs'), path.join(out, 'data'));
    await h.replay.materialize(RUN, 3, out, { force: true });
    expect(Object.keys(await tree(out)).sort()).toEqual(['code/train.mjs', 'code/util.mjs', 'data/train.jsonl', 'models/base/weights.bin']);
    expect((await lstat(path.join(out, 'code'))).isDirectory()).toBe(true);
    expect(await tree(outside)).toEqual({ 'code/train.mjs': 'host file' });
    const linked = `${outDir()}-link`;
    await symlink(outside, linked);
    await expect(h.replay.materialize(RUN, 3, linked, { force: true })).rejects.toThrow(/is a symbolic link; name a real directory/);
    expect(await tree(outside)).toEqual({ 'code/train.mjs': 'host file' });
  });

  it('follows events appended after an earlier replay (the index is caught up on each call)', async () => {
    const runId = `run-late-${randomUUID()}`;
    await h.append([ev(0, 'RunScheduled', { task: 't', agent: 'a', baseModel: 'b', budgetSeconds: 1, seed: 0, mode: 'free' }, runId)]);
    expect((await h.replay.materialize(runId, 0, outDir())).files).toBe(0);
    await h.append([await fileChanged(1, 'code/a.txt', 'create', 'late\n', runId)]);
    const out = outDir();
    await h.replay.materialize(runId, 1, out);
    expect(await tree(out)).toEqual({ 'code/a.txt': 'late\n' });
  });
});

describe('ReplayService.materialize integrity', () => {
  it('rejects a blob whose bytes differ from the recorded sha256 and leaves no file with the wrong bytes', async () => {
    const runId = `run-tampered-${randomUUID()}`;
    const changed = await fileChanged(1, 'code/victim.txt', 'create', `original ${runId}\n`, runId);
    await h.append([ev(0, 'RunScheduled', { task: 't', agent: 'a', baseModel: 'b', budgetSeconds: 1, seed: 0, mode: 'free' }, runId), changed]);
    const blobFile = path.join(h.dir, 'artifacts', (changed.data as { key: string }).key);
    await chmod(blobFile, 0o644);
    await writeFile(blobFile, `tampered ${runId}\n`);
    const out = outDir();
    await expect(h.replay.materialize(runId, 1, out)).rejects.toThrow(/code\/victim\.txt \(written at seq 1\): blob content has sha256 [0-9a-f]{64}/);
    expect(await tree(out)).toEqual({});
  });

  // Blobs over 4 MiB are copied chunk by chunk, read, hashed and written overlapped, never held
  // whole: from the blob's own file where the store has one (the filesystem store), else from its
  // stream (MinIO; here the same store seen without localFile).
  it.each([
    ['its file', false],
    ['its stream', true],
  ])('copies a large blob byte for byte through %s, and removes one whose bytes differ from the recorded sha256', async (_how, streamOnly) => {
    const runId = `run-large-${randomUUID()}`;
    const big = Buffer.alloc(9 * 1024 * 1024 + 123);
    for (let i = 0; i < big.length; i += 4096) big.writeInt32LE(i ^ 0x9e3779b9, i); // a pattern, so that chunks in the wrong place would show
    const good = await fileChanged(1, 'output/ckpt/model.safetensors', 'create', big, runId);
    const victim = Buffer.from(big);
    victim[victim.length - 1] ^= 1;
    const bad = await fileChanged(2, 'output/other/model.safetensors', 'create', victim, runId);
    await h.append([ev(0, 'RunScheduled', { task: 't', agent: 'a', baseModel: 'b', budgetSeconds: 1, seed: 0, mode: 'free' }, runId), good, bad]);
    await h.replay.state(runId, 2); // the projection caught up, for a service built without the runner
    const store = h.artifacts;
    const streamed: ArtifactStore = {
      backend: 'fs',
      put: (body, declared) => store.put(body, declared),
      get: (sha256) => store.get(sha256),
      stat: (sha256) => store.stat(sha256),
      exists: (sha256) => store.exists(sha256),
      close: async () => undefined,
    };
    const replay = streamOnly ? new ReplayService({ events: h.events, readModels: h.readModels, artifacts: streamed, catchUp: async () => undefined }) : h.replay;

    const out = outDir();
    await replay.materialize(runId, 1, out);
    expect((await readFile(path.join(out, 'output/ckpt/model.safetensors'))).equals(big)).toBe(true);

    const blobFile = path.join(h.dir, 'artifacts', (bad.data as { key: string }).key);
    await chmod(blobFile, 0o644);
    await writeFile(blobFile, big); // same size, one byte different from what was recorded
    const out2 = outDir();
    await expect(replay.materialize(runId, 2, out2)).rejects.toThrow(/output\/other\/model\.safetensors \(written at seq 2\): blob content has sha256/);
    expect(Object.keys(await tree(out2))).toEqual(['output/ckpt/model.safetensors']);
  });

  it('names a file whose blob is missing from the artifact store', async () => {
    const runId = `run-missing-${randomUUID()}`;
    await h.append([
      ev(0, 'RunScheduled', { task: 't', agent: 'a', baseModel: 'b', budgetSeconds: 1, seed: 0, mode: 'free' }, runId),
      ev(1, 'FileChanged', { path: 'code/gone.txt', op: 'create', sha256: 'ab'.repeat(32), size: 3, observedAt: at(1) }, runId),
    ]);
    await expect(h.replay.materialize(runId, 1, outDir())).rejects.toThrow(new ReplayIntegrityError(
      `code/gone.txt (written at seq 1): blob ${'ab'.repeat(32)} is missing from the artifact store`,
    ));
  });

  it('refuses a recorded path that would leave the output directory', async () => {
    const runId = `run-escape-${randomUUID()}`;
    await h.append([
      ev(0, 'RunScheduled', { task: 't', agent: 'a', baseModel: 'b', budgetSeconds: 1, seed: 0, mode: 'free' }, runId),
      await fileChanged(1, '../escaped.txt', 'create', 'x', runId),
    ]);
    const out = outDir();
    await expect(h.replay.materialize(runId, 1, out)).rejects.toThrow(/refusing to write recorded path "\.\.\/escaped\.txt"/);
    await expect(readFile(path.join(out, '..', 'escaped.txt'))).rejects.toThrow(/ENOENT/);
  });
});

describe('ReplayService.diff', () => {
  it('lists added, removed and modified files with unified hunks for text and a note for binary content', async () => {
    const d = await h.replay.diff(RUN, 4, 8);
    expect(d.from).toEqual({ seq: 4, occurredAt: at(4), type: 'SubmissionReceived' });
    expect(d.to.seq).toBe(8);
    expect(d.files.map((f) => [f.change, f.path])).toEqual([
      ['modified', 'code/train.mjs'],
      ['removed', 'code/util.mjs'],
      ['modified', 'output/ckpt/manifest.json'],
      ['removed', 'output/ckpt/weights.bin'],
    ]);
    const train = d.files[0];
    expect(train.before).toMatchObject({ seq: 2, size: TRAIN_1.length });
    expect(train.after).toMatchObject({ seq: 6, size: TRAIN_2.length });
    expect(train.diff).toMatchObject({ linesAdded: 1, linesRemoved: 1, note: null });
    expect(train.diff.hunks[0].lines).toEqual(['-const lr = 0.1;', '+const lr = 0.05;', ' const steps = 10;', ' train(lr, steps);']);
    expect(d.files[3].diff.note).toBe('binary content: diff not shown');
  });

  it('is empty between two points with the same files', async () => {
    expect((await h.replay.diff(RUN, 9, 10)).files).toEqual([]);
  });
});

describe('ReplayService.timeline', () => {
  it('lists every event in seq order with a one-line summary', async () => {
    const entries = await h.replay.timeline(RUN);
    expect(entries.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(entries[6]).toEqual({ seq: 6, occurredAt: at(6), type: 'FileChanged', summary: 'modify code/train.mjs (53 B, +1 B)' });
    expect(entries[9].summary).toBe('sub-2 score 83.5 (+73.5)');
    await expect(h.replay.timeline('no-such-run')).rejects.toThrow(UnknownRunError);
  });
});

describe('parseReplayPoint', () => {
  it('reads digits as a seq and an ISO 8601 date-time as a time, and refuses anything else', () => {
    expect(parseReplayPoint('42')).toBe(42);
    expect(parseReplayPoint('2026-01-01T00:00:05.000Z')).toBe('2026-01-01T00:00:05.000Z');
    for (const bad of ['-1', '1.5', 'yesterday', '2026-01-01', '2026-13-45T00:00', '2026-01-01T10:00', '2026-01-01T10:00:00']) expect(() => parseReplayPoint(bad)).toThrow(/neither a seq/);
  });
});

describe('workspace-revision index on PostgreSQL', () => {
  const schema = `replay_spec_${randomUUID().replaceAll('-', '')}`;
  const url = 'postgres://postgres@127.0.0.1:5432/test';
  let p: ReplayHarness;
  afterAll(async () => {
    await p?.close();
    const client = new pg.Client(url);
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
  });

  it('answers the same workspace states as on SQLite', async () => {
    p = await openReplayHarness({ readModelUrl: `${url}?schema=${schema}` });
    const body = Buffer.from('pg\n');
    const b = await p.blob(body);
    await p.append([
      buildEvent('RunScheduled', RUN, 0, at(0), { task: 't', agent: 'a', baseModel: 'b', budgetSeconds: 1, seed: 0, mode: 'free' }),
      buildEvent('FileChanged', RUN, 1, at(1), { path: 'code/a.txt', op: 'create', sha256: b.sha256, size: b.size, observedAt: at(1) }),
      buildEvent('FileChanged', RUN, 2, at(2), { path: 'code/a.txt', op: 'delete', observedAt: at(2) }),
    ]);
    expect([...(await p.replay.state(RUN, 1)).files.values()]).toEqual([{ path: 'code/a.txt', sha256: b.sha256, size: 3, seq: 1 }]);
    expect((await p.replay.state(RUN, 2)).files.size).toBe(0);
  });
});
