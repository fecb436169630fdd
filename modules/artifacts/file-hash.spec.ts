import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { HASH_CHUNK, hashFile, hashStream } from './file-hash.js';

// Hashing a file by descriptor into one reused buffer (verify's blob check of the filesystem store)
// gives what hashing its bytes in memory gives, at every size around the read size, with the buffer
// shared by hashes running at once.

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('hashFile', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'a2rl-file-hash-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const file = (name: string, bytes: Buffer) => {
    const path = join(dir, name);
    writeFileSync(path, bytes);
    return path;
  };

  it.each([0, 1, 4096, HASH_CHUNK - 1, HASH_CHUNK, HASH_CHUNK + 1, 3 * HASH_CHUNK + 17])('hashes a file of %i bytes as its content hashes', async (size) => {
    const bytes = randomBytes(size);
    expect(await hashFile(file(`f${size}`, bytes))).toEqual({ sha256: sha(bytes), size });
  });

  it('shares one buffer between hashes running at once, across the turns a large file yields', async () => {
    // 17 MiB and more: each yields to the event loop at least once while the others read into the same buffer.
    const contents = [17 * HASH_CHUNK + 5, 40, 18 * HASH_CHUNK, HASH_CHUNK + 3].map((size) => randomBytes(size));
    const buffer = Buffer.alloc(HASH_CHUNK);
    const hashes = await Promise.all(contents.map((bytes, i) => hashFile(file(`shared${i}`, bytes), buffer)));
    expect(hashes).toEqual(contents.map((bytes) => ({ sha256: sha(bytes), size: bytes.length })));
  });

  it('throws the open error for a missing file', async () => {
    await expect(hashFile(join(dir, 'missing'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('hashes what the filesystem store streams for a blob, from the file it names', async () => {
    const store = await FsArtifactStore.open(join(dir, 'store'));
    const bytes = randomBytes(200_000);
    await store.put(bytes, { sha256: sha(bytes), size: bytes.length });
    expect(await hashFile(store.localFile(sha(bytes)))).toEqual(await hashStream(await store.get(sha(bytes))));
    expect(await hashStream(Readable.from([bytes.subarray(0, 7), bytes.subarray(7)]))).toEqual({ sha256: sha(bytes), size: bytes.length });
  });
});
