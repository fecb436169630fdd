import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, open, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { ArtifactIntegrityError, ArtifactStoreUnavailableError } from '../../modules/artifacts/artifact-store.port.js';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { artifactStoreContract, chunked, declare, sha256Hex } from './artifact-store.contract.js';
import { expectBlocks, hashOf, sparseFile } from '../../modules/artifacts/testing/sparse-file.js';
import { tempFiles } from '../../modules/artifacts/testing/temp-files.js';

artifactStoreContract('fs', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'a2rl-fs-artifacts-'));
  return { store: await FsArtifactStore.open(dir), cleanup: () => rm(dir, { recursive: true, force: true }) };
});

/** Mounts a size-limited tmpfs; undefined where this process may not mount (not root, container limits). */
const mountTmpfs = ((): ((path: string, size: string) => void) | undefined => {
  const mount = (path: string, size: string) =>
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', path], { stdio: 'ignore' });
  const probe = mkdtempSync(join(tmpdir(), 'a2rl-mount-probe-'));
  try {
    mount(probe, '64k');
    execFileSync('umount', [probe]);
    return mount;
  } catch {
    return undefined;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
})();

// Permission bits do not stop root, and a full disk needs a small filesystem: those two cases run
// where the machine allows them and are reported as skipped elsewhere.
const asRoot = process.getuid?.() === 0;

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

describe('FsArtifactStore', () => {
  let dir: string;
  let store: FsArtifactStore;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'a2rl-fs-artifacts-'));
    store = await FsArtifactStore.open(dir);
  });

  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('leaves no temp file behind after failed puts', async () => {
    const bytes = Buffer.from('will not be stored');
    await expect(store.put(bytes, { ...declare(bytes), sha256: sha256Hex(Buffer.from('other')) })).rejects.toThrow(
      ArtifactIntegrityError,
    );
    await expect(store.put(chunked(bytes, 4), { ...declare(bytes), size: 5 })).rejects.toThrow(ArtifactIntegrityError);
    const failing = new Readable({
      read() {
        this.destroy(new Error('source went away'));
      },
    });
    await expect(store.put(failing, declare(bytes))).rejects.toThrow('source went away');
    expect(await tempFiles(dir)).toEqual([]);
    expect(await readdir(join(dir, 'sha256'))).toEqual([]);
  });

  it('keeps holes: a 1 GiB sparse file with 12 KB of data takes kilobytes in the store and reads back identical', async () => {
    const source = join(dir, 'sparse.bin');
    const data = await sparseFile(source, GiB, [0, 300 * 1024 * 1024, GiB - 4096]);
    const sha256 = await hashOf(createReadStream(source, { highWaterMark: MiB }));
    const { key } = await store.put(createReadStream(source, { highWaterMark: MiB }), { sha256, size: GiB });
    const st = await stat(join(dir, key));
    expect(st.size).toBe(GiB);
    expect(st.blocks * 512).toBeLessThan(1024 * 1024); // three 64 KiB blocks of data, not a gigabyte
    expect(await hashOf(await store.get(sha256))).toBe(sha256);
    await expectBlocks(join(dir, key), data);
  }, 120_000);

  it('writes blobs read-only under sha256/<2 hex>/<hex> and leaves tmp/ empty', async () => {
    const bytes = Buffer.from('on disk');
    const { key } = await store.put(bytes, declare(bytes));
    expect((await stat(join(dir, key))).mode & 0o777).toBe(0o444);
    expect(await tempFiles(dir)).toEqual([]);
  });

  (asRoot ? it.skip : it)('reports an unwritable directory as ArtifactStoreUnavailableError', async () => {
    await chmod(join(dir, 'tmp'), 0o555);
    try {
      const bytes = Buffer.from('denied');
      await expect(store.put(bytes, declare(bytes))).rejects.toThrow(ArtifactStoreUnavailableError);
      await expect(store.put(bytes, declare(bytes))).rejects.toThrow(`filesystem artifact store at ${dir}`);
    } finally {
      await chmod(join(dir, 'tmp'), 0o755);
    }
  });

  (mountTmpfs ? it : it.skip)('reports a full disk as ArtifactStoreUnavailableError and removes the temp file', async () => {
    const small = join(dir, 'small');
    await mkdir(small);
    mountTmpfs!(small, '256k');
    try {
      const full = await FsArtifactStore.open(small);
      const bytes = randomBytes(1024 * 1024);
      await expect(full.put(chunked(bytes), declare(bytes))).rejects.toThrow(ArtifactStoreUnavailableError);
      await expect(full.put(chunked(bytes), declare(bytes))).rejects.toThrow(/disk is full \(ENOSPC\)/);
      expect(await tempFiles(small)).toEqual([]);
      const fits = Buffer.from('still fits');
      expect((await full.put(fits, declare(fits))).created).toBe(true);
    } finally {
      execFileSync('umount', [small]);
    }
  });
});
