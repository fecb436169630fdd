import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SPARSE_BLOCK, SparseWriter } from './sparse-writer.js';

describe('SparseWriter', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'a2rl-sparse-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** Writes `content` cut into chunks of the given sizes (cycled); returns the file's path. */
  const writeChunked = async (content: Buffer, sizes: number[]) => {
    const path = join(dir, `f${Math.random()}`);
    const handle = await open(path, 'wx');
    try {
      const writer = new SparseWriter(handle);
      for (let at = 0, i = 0; at < content.length; i++) {
        const n = sizes[i % sizes.length];
        await writer.write(content.subarray(at, at + n));
        at += n;
      }
      expect(await writer.end()).toBe(content.length);
    } finally {
      await handle.close();
    }
    return path;
  };

  it('writes the exact bytes whatever the chunking, including a trailing run of zeros and a partial last block', async () => {
    const content = Buffer.alloc(5 * SPARSE_BLOCK + 1234);
    randomBytes(100).copy(content, 10);
    randomBytes(SPARSE_BLOCK).copy(content, 2 * SPARSE_BLOCK + 7);
    for (const sizes of [[1], [1000, 7], [SPARSE_BLOCK], [3 * SPARSE_BLOCK + 5], [content.length]]) {
      const path = await writeChunked(content, sizes.length === 1 && sizes[0] === 1 ? [4099] : sizes);
      expect(readFileSync(path).equals(content)).toBe(true);
    }
  });

  it('leaves aligned blocks of zeros as holes: 64 MiB with 12 KB of data takes kilobytes on disk', async () => {
    const content = Buffer.alloc(64 * 1024 * 1024);
    randomBytes(4096).copy(content, 0);
    randomBytes(4096).copy(content, 20 * 1024 * 1024);
    randomBytes(4096).copy(content, content.length - 4096);
    const path = await writeChunked(content, [1024 * 1024]);
    const st = statSync(path);
    expect(st.size).toBe(content.length);
    expect(st.blocks * 512).toBeLessThanOrEqual(4 * SPARSE_BLOCK); // three data blocks (plus filesystem metadata)
    expect(readFileSync(path).equals(content)).toBe(true);
  });

  it('writes a file of no zero blocks densely', async () => {
    const content = randomBytes(3 * SPARSE_BLOCK + 10);
    const path = await writeChunked(content, [50_000]);
    expect(statSync(path).blocks * 512).toBeGreaterThanOrEqual(content.length);
    expect(readFileSync(path).equals(content)).toBe(true);
  });
});
