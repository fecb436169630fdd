import { createHash } from 'node:crypto';
import { mkdtemp, mkdir, readdir, readFile, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { ArtifactIntegrityError } from '../../modules/artifacts/artifact-store.port.js';
import { hashOf } from '../../modules/artifacts/testing/sparse-file.js';
import { tempFiles } from '../../modules/artifacts/testing/temp-files.js';
import { FsArtifactStore, STALE_TEMP_MS, sweepStaleTemp, TEMP_WRITER } from './fs-artifact-store.js';

// Recovery of partial uploads: temp files left by puts that never finished are removed when the
// store opens, and only those no live process may still be writing.

const SHA = 'a'.repeat(64);
const UUID = '0f8fad5b-d9cb-469f-a165-70867728950e';
const NOW = Date.UTC(2026, 0, 1, 12);
const name = (writer: string, pid: number) => `${SHA}.${writer}.${pid}.${UUID}`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'a2rl-fs-sweep-'));
  await mkdir(join(dir, 'tmp'), { recursive: true });
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** A temp file last modified `ageMs` before NOW. */
async function temp(file: string, ageMs: number): Promise<void> {
  const path = join(dir, 'tmp', file);
  await writeFile(path, 'partial');
  const at = (NOW - ageMs) / 1000;
  await utimes(path, at, at);
}

const left = async () => (await readdir(join(dir, 'tmp'))).sort();

describe('sweepStaleTemp', () => {
  it("removes this writer's temp files whose process is gone, whatever their age, and keeps a live process's", async () => {
    await temp(name(TEMP_WRITER, 111), 0);
    await temp(name(TEMP_WRITER, 222), 10 * STALE_TEMP_MS);
    await temp(name(TEMP_WRITER, process.pid), 10 * STALE_TEMP_MS); // this process may have a put in progress
    const removed = await sweepStaleTemp(dir, { alive: (pid) => pid === 222, now: NOW });
    expect(removed).toEqual([name(TEMP_WRITER, 111)]);
    expect(await left()).toEqual([name(TEMP_WRITER, 222), name(TEMP_WRITER, process.pid)].sort());
  });

  it("judges other writers' files and files named before writers were recorded by age only", async () => {
    const other = 'b'.repeat(12);
    const legacy = `${SHA}.${UUID}`;
    await temp(name(other, 111), STALE_TEMP_MS + 1000);
    await temp(`${legacy}`, STALE_TEMP_MS + 1000);
    await temp(name(other, 333), STALE_TEMP_MS - 1000);
    await temp(`${'c'.repeat(64)}.${UUID}`, STALE_TEMP_MS - 1000);
    // A pid of another machine or container says nothing here: never asked whether it is alive.
    const asked: number[] = [];
    const removed = await sweepStaleTemp(dir, { alive: (pid) => (asked.push(pid), false), now: NOW });
    expect(removed.sort()).toEqual([legacy, name(other, 111)].sort());
    expect(asked).toEqual([]);
    expect(await left()).toEqual([`${'c'.repeat(64)}.${UUID}`, name(other, 333)].sort());
  });

  it('touches only plain files: directories and links under tmp/ stay', async () => {
    await mkdir(join(dir, 'tmp', 'sub'));
    const outside = join(dir, 'keep.bin');
    await writeFile(outside, 'x');
    await symlink(outside, join(dir, 'tmp', name(TEMP_WRITER, 111)));
    expect(await sweepStaleTemp(dir, { alive: () => false, now: NOW + 10 * STALE_TEMP_MS })).toEqual([]);
    expect(await left()).toEqual([name(TEMP_WRITER, 111), 'sub'].sort());
    expect(await readdir(dir)).toContain('keep.bin');
  });

  it("sweeps tmp/'s shard directories as tmp/ itself, and leaves the directories", async () => {
    await mkdir(join(dir, 'tmp', 'aa'));
    await mkdir(join(dir, 'tmp', 'not-a-shard'));
    for (const sub of ['aa', 'not-a-shard']) await writeFile(join(dir, 'tmp', sub, name(TEMP_WRITER, 111)), 'partial');
    await writeFile(join(dir, 'tmp', 'aa', name(TEMP_WRITER, process.pid)), 'being written');
    const removed = await sweepStaleTemp(dir, { alive: () => false, now: NOW });
    expect(removed).toEqual([`aa/${name(TEMP_WRITER, 111)}`]);
    expect(await readdir(join(dir, 'tmp', 'aa'))).toEqual([name(TEMP_WRITER, process.pid)]);
    expect(await readdir(join(dir, 'tmp', 'not-a-shard'))).toEqual([name(TEMP_WRITER, 111)]);
  });

  it('is a no-op on a store without a tmp/ directory', async () => {
    await rm(join(dir, 'tmp'), { recursive: true });
    expect(await sweepStaleTemp(dir)).toEqual([]);
  });
});

describe('FsArtifactStore.open', () => {
  it("removes a dead writer's partial upload and keeps the temp file of a put in progress, which then completes", async () => {
    const dead = name(TEMP_WRITER, 2 ** 22 + 7); // above any default pid_max: never alive
    await temp(dead, 0);
    const writer = await FsArtifactStore.open(dir);
    expect(writer.sweptTemp).toEqual([dead]);

    const bytes = Buffer.from('a checkpoint, written slowly');
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const body = new PassThrough();
    const put = writer.put(body, { sha256, size: bytes.length });
    body.write(bytes.subarray(0, 5));
    // The put's temp file carries this writer and pid.
    let names: string[] = [];
    while (!names.length) names = await tempFiles(dir);
    expect(names).toEqual([expect.stringMatching(new RegExp(`^${sha256}\\.${TEMP_WRITER}\\.${process.pid}\\.`))]);
    expect(await readdir(join(dir, 'tmp', sha256.slice(0, 2)))).toEqual(names); // beside the other temp files of its shard

    // Another open (another command starting) while the put is in progress leaves its file alone.
    const reopened = await FsArtifactStore.open(dir);
    expect(reopened.sweptTemp).toEqual([]);
    body.end(bytes.subarray(5));
    await expect(put).resolves.toMatchObject({ sha256, created: true });
    expect(await reopened.exists(sha256)).toBe(true);
    expect(await tempFiles(dir)).toEqual([]);
  });

  it("stores again after tmp/ was removed under it (its shard directories are made again)", async () => {
    const store = await FsArtifactStore.open(dir);
    const one = Buffer.from('first');
    const two = Buffer.from('second, same shard?');
    await store.put(one, { sha256: createHash('sha256').update(one).digest('hex'), size: one.length });
    await rm(join(dir, 'tmp'), { recursive: true });
    const sha256 = createHash('sha256').update(two).digest('hex');
    await expect(store.put(two, { sha256, size: two.length })).resolves.toMatchObject({ created: true });
    await rm(join(dir, 'tmp'), { recursive: true });
    const file = join(dir, 'checkpoint.bin');
    const three = Buffer.from('a staged file, linked in');
    await writeFile(file, three);
    const linked = createHash('sha256').update(three).digest('hex');
    await expect(store.putFile(file, { sha256: linked, size: three.length })).resolves.toMatchObject({ created: true });
    expect(await readFile(join(dir, 'sha256', linked.slice(0, 2), linked))).toEqual(three);
  });
});

describe('FsArtifactStore group commit', () => {
  const blob = (i: number) => {
    const bytes = Buffer.from(`blob ${i}\n`);
    return { bytes, sha256: createHash('sha256').update(bytes).digest('hex') };
  };
  const blobs = Array.from({ length: 10 }, (_, i) => blob(i));
  const put = (store: FsArtifactStore, b: { bytes: Buffer; sha256: string }) => store.put(b.bytes, { sha256: b.sha256, size: b.bytes.length });

  /** A flush that waits until `open()`; `inFlight`: flushes started and not yet finished, `most`: the peak. */
  function gatedFlush(fail?: (path: string) => boolean) {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const state = { inFlight: 0, most: 0, calls: [] as string[], open: () => open() };
    const flushFile = async (path: string) => {
      state.calls.push(path);
      state.most = Math.max(state.most, ++state.inFlight);
      try {
        await gate;
        if (fail?.(path)) throw Object.assign(new Error(`EIO: i/o error, fdatasync '${path}'`), { code: 'EIO' });
      } finally {
        state.inFlight--;
      }
    };
    return { state, flushFile };
  }

  /** Until `done()` holds, giving the store's I/O turns (a condition, not a clock). */
  async function until(done: () => boolean | Promise<boolean>): Promise<void> {
    for (let i = 0; i < 100_000 && !(await done()); i++) await new Promise((resolve) => setImmediate(resolve));
    expect(await done()).toBe(true);
  }
  const temps = () => tempFiles(join(dir, 'store'));

  it('resolves no put before its barrier; puts made meanwhile share the next one, and then are all stored', async () => {
    const { state, flushFile } = gatedFlush();
    const store = await FsArtifactStore.open(join(dir, 'store'), {}, { flushFile });
    const settled: number[] = [];
    const puts = blobs.map((b, i) => put(store, b).then((r) => (settled.push(i), r)));
    // Every temp file is written and waiting for its flush: nothing is visible or acknowledged.
    await until(async () => state.inFlight === 1 && (await temps()).length === blobs.length);
    for (const b of blobs) expect(await store.exists(b.sha256)).toBe(false);
    expect(settled).toEqual([]);
    state.open();
    const results = await Promise.all(puts);
    expect(results.map((r) => r.created)).toEqual(blobs.map(() => true));
    for (const b of blobs) expect(await readFile(join(dir, 'store', 'sha256', b.sha256.slice(0, 2), b.sha256))).toEqual(b.bytes);
    expect(state.calls).toHaveLength(blobs.length);
    // The first put found the store idle and went alone; the nine staged while it waited flushed together.
    expect(state.most).toBe(blobs.length - 1);
    expect(await temps()).toEqual([]);
  });

  it('fails only the put whose file could not be flushed; the others of its batch are stored', async () => {
    const bad = blobs[3]!;
    const { state, flushFile } = gatedFlush((path) => path.includes(bad.sha256));
    const store = await FsArtifactStore.open(join(dir, 'store'), {}, { flushFile });
    const puts = blobs.map((b) => put(store, b).then((r) => r, (err: unknown) => err as Error));
    state.open();
    const results = await Promise.all(puts);
    expect(results[3]).toMatchObject({ code: 'EIO' });
    for (const [i, b] of blobs.entries()) {
      if (i === 3) continue;
      expect(results[i]).toMatchObject({ sha256: b.sha256, created: true });
      expect(await store.exists(b.sha256)).toBe(true);
    }
    expect(await store.exists(bad.sha256)).toBe(false);
    expect(await temps()).toEqual([]);
  });

  it('leaves nothing visible when the process dies before the barrier: only temp files, which the sweep removes', async () => {
    const { state, flushFile } = gatedFlush();
    const store = await FsArtifactStore.open(join(dir, 'store'), {}, { flushFile });
    const puts = blobs.map((b) => put(store, b));
    await until(async () => state.inFlight === 1 && (await temps()).length === blobs.length);
    // Crash here: the flushes never finish. Only tmp/ holds anything, each file named as this writer's put.
    expect((await temps()).every((t) => t.includes(`.${TEMP_WRITER}.${process.pid}.`))).toBe(true);
    expect(await readdir(join(dir, 'store', 'sha256'))).toEqual([]);
    for (const b of blobs) {
      expect(await store.exists(b.sha256)).toBe(false);
      await expect(store.get(b.sha256)).rejects.toMatchObject({ name: 'ArtifactNotFoundError' });
    }
    state.open();
    await Promise.all(puts);
  });

  it('stores content put twice at once a single time: the second put waits for the first and reports it existed', async () => {
    const { state, flushFile } = gatedFlush();
    const store = await FsArtifactStore.open(join(dir, 'store'), {}, { flushFile });
    const b = blobs[0]!;
    const both = Promise.all([put(store, b), put(store, b)]);
    await until(() => state.calls.length === 1);
    state.open();
    expect((await both).map((r) => r.created)).toEqual([true, false]);
    expect(state.calls).toHaveLength(1);
    // A body that does not match its declaration is still refused, even for content stored already.
    await expect(store.put(Buffer.from('other'), { sha256: b.sha256, size: 5 })).rejects.toBeInstanceOf(ArtifactIntegrityError);
  });
});

describe('FsArtifactStore.putFile', () => {
  const bytes = Buffer.from('staged checkpoint bytes\n'.repeat(1000));
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const blobPath = (sha: string) => join(dir, 'store', 'sha256', sha.slice(0, 2), sha);
  let store: FsArtifactStore;
  let file: string;
  beforeEach(async () => {
    store = await FsArtifactStore.open(join(dir, 'store'));
    file = join(dir, 'staged.bin');
    await writeFile(file, bytes, { mode: 0o644 });
  });
  const storeTemp = () => tempFiles(join(dir, 'store'));

  it('takes the file in by a hard link: the blob is the same inode, read-only, and reads back', async () => {
    await expect(store.putFile(file, { sha256, size: bytes.length })).resolves.toEqual({ key: `sha256/${sha256.slice(0, 2)}/${sha256}`, sha256, size: bytes.length, created: true });
    const [blob, staged] = await Promise.all([stat(blobPath(sha256)), stat(file)]);
    expect(blob.ino).toBe(staged.ino);
    expect(blob.mode & 0o777).toBe(0o444);
    expect(await hashOf(await store.get(sha256))).toBe(sha256);
    expect(await storeTemp()).toEqual([]);
    // The caller removing its file leaves the blob.
    await rm(file);
    expect(await hashOf(await store.get(sha256))).toBe(sha256);
  });

  it('refuses a file that does not match its declaration, leaving nothing in the store and the file as it was', async () => {
    const wrong = createHash('sha256').update('other').digest('hex');
    await expect(store.putFile(file, { sha256: wrong, size: bytes.length })).rejects.toBeInstanceOf(ArtifactIntegrityError);
    await expect(store.putFile(file, { sha256, size: bytes.length + 1 })).rejects.toBeInstanceOf(ArtifactIntegrityError);
    expect(await store.exists(wrong)).toBe(false);
    expect(await store.exists(sha256)).toBe(false);
    expect(await storeTemp()).toEqual([]);
    expect(await readFile(file)).toEqual(bytes);
    expect((await stat(file)).nlink).toBe(1);
  });

  it('with hashedAsWritten, links the file checking its size only (the writer hashed it); a wrong size is still refused', async () => {
    await expect(store.putFile(file, { sha256, size: bytes.length + 1 }, { hashedAsWritten: true })).rejects.toBeInstanceOf(ArtifactIntegrityError);
    expect(await storeTemp()).toEqual([]);
    // The hash is taken on the writer's word: a wrong one is stored under its key (a2rl verify re-hashes every blob and names it).
    const claimed = createHash('sha256').update('the writer said so').digest('hex');
    await expect(store.putFile(file, { sha256: claimed, size: bytes.length }, { hashedAsWritten: true })).resolves.toMatchObject({ sha256: claimed, created: true });
    expect((await stat(blobPath(claimed))).ino).toBe((await stat(file)).ino);
    expect(await hashOf(await store.get(claimed))).toBe(sha256);
  });

  it('links nothing when the content is stored already, and still checks the file', async () => {
    await store.put(Buffer.from(bytes), { sha256, size: bytes.length });
    await expect(store.putFile(file, { sha256, size: bytes.length })).resolves.toMatchObject({ created: false });
    expect((await stat(file)).nlink).toBe(1);
    await writeFile(file, 'changed');
    await expect(store.putFile(file, { sha256, size: bytes.length })).rejects.toBeInstanceOf(ArtifactIntegrityError);
  });

  it('with hashedAsWritten, content stored already is neither linked nor read again: its size is checked', async () => {
    await store.put(Buffer.from(bytes), { sha256, size: bytes.length });
    // A resubmitted checkpoint: the writer hashed its copy; reading a multi-GB file again would only repeat that.
    await writeFile(file, Buffer.alloc(bytes.length, 0x61));
    await expect(store.putFile(file, { sha256, size: bytes.length }, { hashedAsWritten: true })).resolves.toEqual({ key: `sha256/${sha256.slice(0, 2)}/${sha256}`, sha256, size: bytes.length, created: false });
    expect((await stat(file)).nlink).toBe(1);
    expect(await hashOf(await store.get(sha256))).toBe(sha256);
    expect(await storeTemp()).toEqual([]);
    await expect(store.putFile(file, { sha256, size: bytes.length + 1 }, { hashedAsWritten: true })).rejects.toBeInstanceOf(ArtifactIntegrityError);
  });

  it('copies a symlink\'s content rather than storing the link', async () => {
    const link = join(dir, 'link.bin');
    await symlink(file, link);
    await expect(store.putFile(link, { sha256, size: bytes.length })).resolves.toMatchObject({ created: true });
    const blob = await stat(blobPath(sha256));
    expect(blob.isFile()).toBe(true);
    expect(blob.ino).not.toBe((await stat(file)).ino);
    expect(await hashOf(await store.get(sha256))).toBe(sha256);
    expect(await storeTemp()).toEqual([]);
  });

  it('copies a file from another filesystem (no hard link across devices)', async () => {
    const shm = await mkdtemp(join('/dev/shm', 'a2rl-putfile-')).catch(() => null);
    if (!shm) return; // no tmpfs here to be another filesystem
    try {
      const other = join(shm, 'staged.bin');
      await writeFile(other, bytes);
      const crossDevice = (await stat(other)).dev !== (await stat(dir)).dev;
      await expect(store.putFile(other, { sha256, size: bytes.length })).resolves.toMatchObject({ created: true });
      expect(await hashOf(await store.get(sha256))).toBe(sha256);
      if (crossDevice) expect((await stat(blobPath(sha256))).ino).not.toBe((await stat(other)).ino);
      expect(await storeTemp()).toEqual([]);
    } finally {
      await rm(shm, { recursive: true, force: true });
    }
  });
});

describe('FsArtifactStore.get', () => {
  it('streams a checkpoint-sized blob in 1 MiB chunks and a small one as it is', async () => {
    const store = await FsArtifactStore.open(join(dir, 'store'));
    const chunkSizes = async (bytes: Buffer) => {
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      await store.put(bytes, { sha256, size: bytes.length });
      const sizes: number[] = [];
      for await (const chunk of await store.get(sha256)) sizes.push((chunk as Buffer).length);
      return sizes;
    };
    expect(await chunkSizes(Buffer.alloc(3 * 1024 * 1024 + 5, 7))).toEqual([1024 * 1024, 1024 * 1024, 1024 * 1024, 5]);
    expect(await chunkSizes(Buffer.from('a small blob'))).toEqual([12]);
  });
});
