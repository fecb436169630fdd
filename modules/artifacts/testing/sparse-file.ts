import { expect } from '@jest/globals';
import { createHash, randomBytes } from 'node:crypto';
import { open } from 'node:fs/promises';
import type { Readable } from 'node:stream';

/** A block of random data written at `position` of a sparse test file. */
export interface SparseBlock {
  position: number;
  bytes: Buffer;
}

/** Writes `size` logical bytes of which only 4 KiB at each of `at` are data; the rest are holes. */
export async function sparseFile(file: string, size: number, at: number[]): Promise<SparseBlock[]> {
  const handle = await open(file, 'wx');
  const data = at.map((position) => ({ position, bytes: randomBytes(4096) }));
  try {
    for (const { position, bytes } of data) await handle.write(bytes, 0, bytes.length, position);
    await handle.truncate(size);
  } finally {
    await handle.close();
  }
  return data;
}

/** The data blocks read back from a copy are the ones written. */
export async function expectBlocks(file: string, data: SparseBlock[]): Promise<void> {
  const back = await open(file, 'r');
  try {
    for (const { position, bytes } of data) {
      const read = Buffer.alloc(bytes.length);
      await back.read(read, 0, read.length, position);
      expect(read.equals(bytes)).toBe(true);
    }
  } finally {
    await back.close();
  }
}

/** The sha256 of everything a stream yields. */
export async function hashOf(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
