import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { link, mkdir, mkdtemp, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { REFERENCE_LIMITS } from '../sandbox/limits.js';
import { archiveCheckpoint } from './checkpoint-archive.js';
import { openCheckpointDir } from './workspace-path.js';
import { SubmissionRefusedError } from './submission-refused.error.js';
import { post, startGradingServer, type TestServer } from './testing/grading-fixtures.js';
import { expectBlocks, hashOf, sparseFile } from '../artifacts/testing/sparse-file.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** A sparse file of `size` bytes with 4 KiB of random data at each of `at`; returns those pieces. */
/** Blobs in a filesystem artifact store (files under sha256/). */
async function blobs(storeDir: string): Promise<string[]> {
  const out: string[] = [];
  for (const shard of await readdir(path.join(storeDir, 'sha256')).catch(() => [])) out.push(...(await readdir(path.join(storeDir, 'sha256', shard))));
  return out;
}

describe('archiveCheckpoint: limits, sparse and hard-linked files', () => {
  let home: string;
  let ws: string;
  let ckpt: string;
  let storeDir: string;
  let staging: string;
  let artifacts: ArtifactStore;

  beforeEach(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'a2rl-ckpt-'));
    ws = path.join(home, 'ws');
    ckpt = path.join(ws, 'output', 'ck');
    await mkdir(ckpt, { recursive: true });
    storeDir = path.join(home, 'artifacts');
    staging = path.join(home, 'staging');
    artifacts = await FsArtifactStore.open(storeDir);
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });

  /** Archives `output/ck` of the workspace as /submit does: from the held checkpoint directory. */
  const archiveWith = async (store: ArtifactStore, maxBytes?: number) => {
    const checkpoint = await openCheckpointDir(ws, path.relative(ws, ckpt), 'output/ck');
    try {
      return await archiveCheckpoint({ checkpoint, artifacts: store, stagingRoot: staging, maxBytes });
    } finally {
      await checkpoint.close();
    }
  };
  const archive = (maxBytes?: number) => archiveWith(artifacts, maxBytes);

  it('refuses a sparse checkpoint by its logical size before copying a byte (413, naming the limit and the size)', async () => {
    await writeFile(path.join(ckpt, 'manifest.json'), '{}');
    await sparseFile(path.join(ckpt, 'weights.bin'), GiB, [0, 4096, 8192]); // 12 KB of data
    const refused = await archive(64 * MiB).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(SubmissionRefusedError);
    const err = refused as SubmissionRefusedError;
    expect(err.status).toBe(413);
    expect(err.reasonClass).toBe('invalid_checkpoint');
    expect(err.message).toContain('checkpointBytes limit of 67108864 bytes');
    expect(err.message).toContain(`logical size is ${GiB + 2} bytes`);
    expect(err.limit).toEqual({ limit: 'checkpointBytes', value: GiB + 2, max: 64 * MiB, observedAt: expect.any(String) });
    expect(await readdir(staging).catch(() => [])).toEqual([]); // nothing staged
    expect(await blobs(storeDir)).toEqual([]); // nothing stored
  });

  it('archives a 1 GiB sparse file with 12 KB of data as kilobytes, in the staging copy and in the store, with the full content hash', async () => {
    const source = path.join(ckpt, 'weights.bin');
    const data = await sparseFile(source, GiB, [0, 512 * MiB, GiB - 4096]);
    const sha256 = await hashOf(createReadStream(source, { highWaterMark: MiB }));
    const archived = await archive(GiB);
    try {
      expect(archived.manifest).toEqual([{ path: 'weights.bin', sha256, size: GiB }]);
      const staged = await stat(path.join(archived.stagedDir, 'weights.bin'));
      const stored = await stat(path.join(storeDir, 'sha256', sha256.slice(0, 2), sha256));
      for (const st of [staged, stored]) {
        expect(st.size).toBe(GiB);
        expect(st.blocks * 512).toBeLessThan(MiB); // three 64 KiB blocks, not a gigabyte
      }
      expect(await hashOf(await artifacts.get(sha256))).toBe(sha256);
      expect(await hashOf(createReadStream(path.join(archived.stagedDir, 'weights.bin'), { highWaterMark: MiB }))).toBe(sha256);
      await expectBlocks(path.join(archived.stagedDir, 'weights.bin'), data);
    } finally {
      await rm(archived.stagedDir, { recursive: true, force: true });
    }
  }, 120_000);

  it('stages and stores a file of many chunks byte for byte, with the hash of exactly those bytes (reads, hashing and writes overlap)', async () => {
    // 7 MiB + 12,345 bytes: several 1 MiB reads in flight at once, zero blocks inside and across chunk edges, a partial last chunk.
    const content = randomBytes(7 * MiB + 12_345);
    content.fill(0, MiB - 64 * 1024, MiB + 128 * 1024);
    content.fill(0, 5 * MiB, 5 * MiB + 64 * 1024);
    await writeFile(path.join(ckpt, 'model.safetensors'), content);
    await writeFile(path.join(ckpt, 'config.json'), '{"a":1}');
    const sha256 = createHash('sha256').update(content).digest('hex');
    const archived = await archive();
    try {
      expect(archived.manifest).toEqual([
        { path: 'config.json', sha256: createHash('sha256').update('{"a":1}').digest('hex'), size: 7 },
        { path: 'model.safetensors', sha256, size: content.length },
      ]);
      const staged = await readFile(path.join(archived.stagedDir, 'model.safetensors'));
      expect(staged.equals(content)).toBe(true);
      expect(await hashOf(await artifacts.get(sha256))).toBe(sha256);
    } finally {
      await rm(archived.stagedDir, { recursive: true, force: true });
    }
  });

  it('counts a hard-linked file once against the limit, reads it once and stages the second name as a link', async () => {
    const content = randomBytes(3 * MiB);
    await writeFile(path.join(ckpt, 'a.bin'), content);
    await mkdir(path.join(ckpt, 'sub'));
    await link(path.join(ckpt, 'a.bin'), path.join(ckpt, 'sub', 'b.bin'));
    let puts = 0;
    const counting: ArtifactStore = Object.create(artifacts, {
      put: { value: (...args: Parameters<ArtifactStore['put']>) => (puts++, artifacts.put(...args)) },
      putFile: { value: (...args: Parameters<NonNullable<ArtifactStore['putFile']>>) => (puts++, artifacts.putFile!(...args)) },
    });
    // 3 MiB of content under two names: within a 4 MiB limit only if counted once.
    const archived = await archiveWith(counting, 4 * MiB);
    try {
      const sha256 = createHash('sha256').update(content).digest('hex');
      expect(archived.manifest).toEqual([
        { path: 'a.bin', sha256, size: content.length },
        { path: 'sub/b.bin', sha256, size: content.length },
      ]);
      expect(puts).toBe(2); // the content once, the manifest once
      const [a, b] = await Promise.all([stat(path.join(archived.stagedDir, 'a.bin')), stat(path.join(archived.stagedDir, 'sub', 'b.bin'))]);
      expect(b.ino).toBe(a.ino);
    } finally {
      await rm(archived.stagedDir, { recursive: true, force: true });
    }
  });

  it("stores a staged file by a hard link in the filesystem store (its bytes written once), never the agent's file", async () => {
    const content = randomBytes(3 * MiB);
    await writeFile(path.join(ckpt, 'model.safetensors'), content);
    const archived = await archive();
    const sha256 = createHash('sha256').update(content).digest('hex');
    const blob = path.join(storeDir, 'sha256', sha256.slice(0, 2), sha256);
    try {
      const [staged, stored, source] = await Promise.all([stat(path.join(archived.stagedDir, 'model.safetensors')), stat(blob), stat(path.join(ckpt, 'model.safetensors'))]);
      expect(stored.ino).toBe(staged.ino);
      expect(stored.ino).not.toBe(source.ino);
      expect(stored.mode & 0o222).toBe(0); // read-only, for the evaluator too
    } finally {
      await rm(archived.stagedDir, { recursive: true, force: true });
    }
    // Removing the staged copy after grading leaves the blob.
    expect(await hashOf(await artifacts.get(sha256))).toBe(sha256);
  });

  it('counts two distinct files of the same content twice (the limit is on the workspace bytes submitted)', async () => {
    const content = randomBytes(3 * MiB);
    await writeFile(path.join(ckpt, 'a.bin'), content);
    await writeFile(path.join(ckpt, 'b.bin'), content);
    await expect(archive(4 * MiB)).rejects.toMatchObject({ status: 413, limit: { value: 6 * MiB } });
  });

  it('limits nothing when no limit is given', async () => {
    await writeFile(path.join(ckpt, 'weights.json'), '{"score": 1}');
    const archived = await archive(undefined);
    await rm(archived.stagedDir, { recursive: true, force: true });
    expect(archived.manifest).toHaveLength(1);
  });
});

describe('POST /submit over the run checkpointBytes limit', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startGradingServer();
  });
  afterAll(async () => {
    await server?.close();
  });

  it('answers 413 with a message naming the limit, records LimitReached then SubmissionRejected, and grades nothing', async () => {
    const r = await server.newRun();
    r.ctx.limits = { ...REFERENCE_LIMITS, checkpointBytes: MiB };
    await r.checkpoint('big', { score: 90 });
    await sparseFile(path.join(r.ws.outputDir, 'big', 'padding.bin'), 8 * MiB, [0]);
    const res = await post(`${r.url}/submit`, { model_path: 'output/big' });
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ submission_id: 'sub-1', reason: 'invalid_checkpoint' });
    expect(res.body.error).toMatch(/checkpointBytes limit of 1048576 bytes/);
    expect(r.events.map((e) => e.type)).toEqual(['LimitReached', 'SubmissionRejected']);
    expect(r.events[0].data).toEqual({
      limit: 'checkpointBytes',
      value: 8 * MiB + 12,
      max: MiB,
      scope: 'sub-1', // its action, the submission refused, is the limit's own: readers name it
      observedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(r.task.calls).toBe(0);
  });
});
