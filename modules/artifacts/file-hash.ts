import { createHash } from 'node:crypto';
import { closeSync, openSync, readSync } from 'node:fs';
import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * Bytes read at a time. Synchronous reads into one reused 1 MiB buffer cost about 2.6× less CPU
 * per byte than a stream's chunks (1 GiB: 0.71 s against 1.84 s), and a small blob costs an open,
 * two reads and a close instead of a stream's machinery (4,000 blobs of 2–4 KB: 30 ms against 250 ms).
 */
export const HASH_CHUNK = 1024 * 1024;

/** Reads between two turns of the event loop: a multi-GB file hashed in the server does not hold it for seconds. */
const READS_PER_TURN = 16;

export interface ContentHash {
  sha256: string;
  size: number;
}

/**
 * SHA-256 and size of a file's bytes, read by descriptor from its start to its end.
 *
 * `buffer` may be shared by calls running at once: each read is hashed before the call yields to
 * the event loop, so no call needs what it read after another one has run.
 * Throws the open's error as is (ENOENT for a missing file).
 */
export async function hashFile(path: string, buffer: Buffer = Buffer.allocUnsafe(HASH_CHUNK)): Promise<ContentHash> {
  const fd = openSync(path, 'r');
  try {
    const hash = createHash('sha256');
    let size = 0;
    for (let reads = 1; ; reads++) {
      const n = readSync(fd, buffer, 0, buffer.length, size);
      if (n === 0) break;
      hash.update(n === buffer.length ? buffer : buffer.subarray(0, n));
      size += n;
      if (reads % READS_PER_TURN === 0) await nextTurn();
    }
    return { sha256: hash.digest('hex'), size };
  } finally {
    closeSync(fd);
  }
}

/** SHA-256 and size of a stream's bytes (a store whose blobs are not local files: MinIO). */
export async function hashStream(stream: AsyncIterable<unknown>): Promise<ContentHash> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    const bytes = chunk as Buffer;
    hash.update(bytes);
    size += bytes.length;
  }
  return { sha256: hash.digest('hex'), size };
}
