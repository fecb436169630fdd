import { createHash } from 'node:crypto';
import { close, constants, createReadStream, fstat, open, read, type ReadStream, type Stats } from 'node:fs';
import { lstat, readlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { HASH_CHUNK } from '../artifacts/file-hash.js';

/**
 * Reading the agent's workspace from outside the sandbox without ever following a link or leaving
 * the workspace. Everything is asynchronous (libuv threadpool) and read in bounded chunks, so no
 * file, however large or strange, holds the event loop.
 */

/** No link in the last component (O_NOFOLLOW) and no blocking open of a FIFO (O_NONBLOCK); parents are checked after opening. */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Files up to this size are read once into memory (an atomic snapshot); larger ones are streamed twice (hash, then store). */
export const IN_MEMORY_LIMIT = 8 * 1024 * 1024;
const CHUNK = 1024 * 1024;

const openAsync = promisify(open);
const fstatAsync = promisify(fstat);
const readAsync = promisify(read);
const closeAsync = promisify(close);

/** What a workspace path is, as seen without following links. */
export type Opened =
  | { kind: 'file'; file: OpenFile }
  /** A real directory inside the workspace (its descriptor is already closed). */
  | { kind: 'dir' }
  /** Missing (`gone`: no such entry), a link, a FIFO/socket, or anything not provably inside the workspace: not part of the observed tree. */
  | { kind: 'absent'; gone?: boolean }
  /** Exists but may not be read (EACCES: possible when the harness is not root); its last recorded state stands. */
  | { kind: 'unreadable' };

/**
 * Opens a workspace path for reading. The kernel's path of the open descriptor must equal the
 * expected one, so a parent swapped for a link at any moment before the open is caught; the
 * content later read comes from that one descriptor.
 */
export async function openInWorkspace(root: string, realRoot: string, path: string): Promise<Opened> {
  let fd: number;
  try {
    fd = await openAsync(join(root, path), OPEN_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // ELOOP: a link; ENXIO: a socket.
    if (isMissing(err) || code === 'ELOOP' || code === 'ENXIO') return { kind: 'absent', ...(code === 'ENOENT' && (await isRealDir(dirname(join(root, path)))) ? { gone: true } : {}) };
    if (code === 'EACCES') return { kind: 'unreadable' };
    throw err;
  }
  const file = new OpenFile(fd);
  try {
    const st = await fstatAsync(fd);
    // No /proc (not Linux): the location cannot be proven, so nothing is read.
    const actual = await readlink(`/proc/self/fd/${fd}`).catch(() => null);
    if (actual === join(realRoot, path)) {
      if (st.isFile()) {
        file.st = st;
        return { kind: 'file', file };
      }
      if (st.isDirectory()) {
        file.close();
        return { kind: 'dir' };
      }
    }
  } catch (err) {
    file.close();
    throw err;
  }
  file.close();
  return { kind: 'absent' };
}

/** A directory, not a link (a hint only: nothing is read through it). */
async function isRealDir(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => null))?.isDirectory() ?? false;
}

export interface Snapshot {
  sha256: string;
  size: number;
  /** The bytes when the file is small enough to be held (then hash, size and stored bytes are one atomic read). */
  body?: Buffer;
}

/** A descriptor opened by openInWorkspace; `close()` is safe to call once, in a finally. */
export class OpenFile {
  st!: Stats;
  private streamed: ReadStream | undefined;

  constructor(readonly fd: number) {}

  /** Hash and size of the whole file (with the bytes when small), read in chunks through the threadpool. */
  async snapshot(): Promise<Snapshot> {
    const hash = createHash('sha256');
    if (this.st.size <= IN_MEMORY_LIMIT) {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of this.chunks(this.st.size + 1)) {
        chunks.push(Buffer.from(chunk));
        size += chunk.length;
        if (size > IN_MEMORY_LIMIT) break; // grew while being read: hash it as a stream instead
      }
      if (size <= IN_MEMORY_LIMIT) {
        const body = Buffer.concat(chunks, size);
        return { sha256: hash.update(body).digest('hex'), size, body };
      }
    }
    let size = 0;
    for await (const chunk of this.chunks(CHUNK)) {
      size += chunk.length;
      hash.update(chunk); // at most 1 MiB per synchronous step
    }
    return { sha256: hash.digest('hex'), size };
  }

  /** The whole file, read with explicit positions (the descriptor's offset is never relied on). */
  private async *chunks(first: number): AsyncGenerator<Buffer> {
    // Sized to the file: a 10-byte file does not allocate a megabyte.
    let buf = Buffer.allocUnsafe(Math.min(Math.max(first, 1), CHUNK));
    for (let position = 0; ; ) {
      const { bytesRead } = await readAsync(this.fd, buf, 0, buf.length, position);
      if (bytesRead === 0) return;
      position += bytesRead;
      yield buf.subarray(0, bytesRead);
      if (buf.length < CHUNK) buf = Buffer.allocUnsafe(CHUNK);
    }
  }

  /**
   * The whole file as a stream from this descriptor; the stream then owns the descriptor. In 1 MiB
   * chunks, not the default 64 KiB: the store hashes and writes each chunk, and a 1 GiB file hashed
   * through a stream cost 0.74–0.83 s of CPU that way against 1.05–1.11 s.
   */
  stream(): ReadStream {
    this.streamed = createReadStream('', { fd: this.fd, start: 0, autoClose: true, highWaterMark: HASH_CHUNK });
    return this.streamed;
  }

  /** Closes the descriptor; if a stream owns it, destroying the stream closes it once its pending read is done. */
  close(): void {
    if (this.streamed) this.streamed.destroy();
    else void closeAsync(this.fd).catch(() => {});
  }
}

export function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
