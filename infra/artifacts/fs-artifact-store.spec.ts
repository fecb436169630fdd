import { createHash } from 'node:crypto';
import { mkdtemp, mkdir, readdir, readFile, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { ArtifactIntegrityError } from '../../modules/artifacts/artifact-store.port.js';
import { hashOf } from '../../modules/artifacts/testing/sparse-file.js';
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
    while (!names.length) names = await left();
    expect(names).toEqual([expect.stringMatching(new RegExp(`^${sha256}\\.${TEMP_WRITER}\\.${process.pid}\\.`))]);

    // Another open (another command starting) while the put is in progress leaves its file alone.
    const reopened = await FsArtifactStore.open(dir);
    expect(reopened.sweptTemp).toEqual([]);
    body.end(bytes.subarray(5));
    await expect(put).resolves.toMatchObject({ sha256, created: true });
    expect(await reopened.exists(sha256)).toBe(true);
    expect(await left()).toEqual([]);
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
  const storeTemp = () => readdir(join(dir, 'store', 'tmp'));

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
