import type { FileHandle } from 'node:fs/promises';

/** Holes are kept at this granularity: a block of zeros at an aligned offset is never written. */
export const SPARSE_BLOCK = 64 * 1024;

const ZEROS = Buffer.alloc(SPARSE_BLOCK);

/**
 * Writes a byte stream into a new file at explicit positions, leaving every 64 KiB-aligned block
 * that is all zeros unwritten, so the file keeps the holes of its source: a 1 GiB sparse file with
 * 12 KB of data takes kilobytes on disk, not a gigabyte. `end()` sets the full logical size
 * (ftruncate), so a stream ending in zeros still reads back byte for byte. Consecutive data blocks
 * go out in one write.
 */
export class SparseWriter {
  /** A block not yet complete (the stream's chunks need not be aligned). */
  private readonly partial = Buffer.allocUnsafe(SPARSE_BLOCK);
  private filled = 0;
  /** File offset of the next block. */
  private position = 0;
  /** End of the last bytes written: the file's size so far (it is new). */
  private written = 0;

  constructor(private readonly handle: FileHandle) {}

  /** Bytes taken so far (the logical size once ended). */
  get size(): number {
    return this.position + this.filled;
  }

  async write(chunk: Buffer): Promise<void> {
    let offset = 0;
    if (this.filled > 0) {
      offset = Math.min(SPARSE_BLOCK - this.filled, chunk.length);
      chunk.copy(this.partial, this.filled, 0, offset);
      this.filled += offset;
      if (this.filled < SPARSE_BLOCK) return;
      await this.blocks(this.partial);
      this.filled = 0;
    }
    const whole = offset + Math.floor((chunk.length - offset) / SPARSE_BLOCK) * SPARSE_BLOCK;
    if (whole > offset) await this.blocks(chunk.subarray(offset, whole));
    if (whole < chunk.length) {
      chunk.copy(this.partial, 0, whole);
      this.filled = chunk.length - whole;
    }
  }

  /** Writes the last partial block and sets the file's size; returns it. Does not sync or close. */
  async end(): Promise<number> {
    if (this.filled > 0) {
      await this.blocks(this.partial.subarray(0, this.filled));
      this.filled = 0;
    }
    // Extends the file over a trailing hole; skipped when the last block was written (one call less per small file).
    if (this.written < this.position) await this.handle.truncate(this.position);
    return this.position;
  }

  /** `data` starts at `this.position`, aligned: whole blocks, except possibly the stream's last one. */
  private async blocks(data: Buffer): Promise<void> {
    let run = -1; // start of the current run of data blocks within `data`
    for (let at = 0; at < data.length; at += SPARSE_BLOCK) {
      const block = data.subarray(at, at + SPARSE_BLOCK);
      if (isZero(block)) {
        if (run >= 0) await this.writeAt(data.subarray(run, at), this.position + run);
        run = -1;
      } else if (run < 0) run = at;
    }
    if (run >= 0) await this.writeAt(data.subarray(run), this.position + run);
    this.position += data.length;
  }

  private async writeAt(bytes: Buffer, position: number): Promise<void> {
    for (let done = 0; done < bytes.length; ) {
      done += (await this.handle.write(bytes, done, bytes.length - done, position + done)).bytesWritten;
    }
    this.written = Math.max(this.written, position + bytes.length);
  }
}

export function isZero(block: Buffer): boolean {
  return block.equals(block.length === SPARSE_BLOCK ? ZEROS : ZEROS.subarray(0, block.length));
}
