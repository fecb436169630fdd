import { createHash } from 'node:crypto';
import { constants, type BigIntStats, type Stats } from 'node:fs';
import { lstat, mkdir, open, readdir, readlink, rmdir, unlink, type FileHandle } from 'node:fs/promises';

/**
 * Reading and writing a tree someone else controls (the agent's workspace, a checkpoint, a replay
 * target) without ever leaving it. Node has no openat(2), so every component is opened through the
 * descriptor of its parent as `/proc/self/fd/<parent>/<name>`: the kernel takes the magic link to the
 * directory the descriptor holds (never re-resolving its path) and looks up one name there. With
 * O_NOFOLLOW a link in that name is refused (ELOOP, or ENOTDIR with O_DIRECTORY), never followed, and
 * `..` is never asked for. What is opened is then checked by fstat. So swapping a directory for a link
 * between listing and opening gains nothing: the harness holds descriptors, not paths, and nothing
 * outside the held tree is ever opened, listed or stat'ed.
 *
 * Errors are BeneathError: they name the component only, never a host path; callers add the path
 * relative to the tree they walk.
 */

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
/** O_NONBLOCK: a FIFO put where a file was expected must not hang the reader. */
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
/** O_EXCL: a name that already exists (a link planted there included) is never written through. */
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
const CHUNK = 1024 * 1024;

/** Why a component could not be taken: a link, gone, already there (creating), the wrong kind, not readable, or a name that is not one component. */
export type BeneathRefusal = 'link' | 'missing' | 'exists' | 'not-directory' | 'not-file' | 'unreadable' | 'bad-name';

export class BeneathError extends Error {
  override readonly name = 'BeneathError';
  constructor(
    readonly refusal: BeneathRefusal,
    /** The component refused (as text), never a host path. */
    readonly component: string,
    /** The errno code behind it, when there was one. */
    readonly code?: string,
  ) {
    super(`${component}: ${refusal}${code ? ` (${code})` : ''}`);
  }
}

export type Name = string | Buffer;

/** A directory held open by its descriptor; everything below it is reached through that descriptor. */
export class HeldDir {
  private closed = false;

  private constructor(private readonly handle: FileHandle) {}

  get fd(): number {
    return this.handle.fd;
  }

  /**
   * Opens a directory the caller chose (its own path, not the agent's): the last component must not
   * be a link. Errors are the plain system errors: the path is the caller's to show or not.
   */
  static async open(path: string): Promise<HeldDir> {
    const handle = await open(path, DIR_FLAGS);
    return HeldDir.checked(handle, path);
  }

  /** The names in the directory (bytes: a name need not be UTF-8), in byte order; `.` and `..` are not listed. */
  async list(): Promise<Buffer[]> {
    try {
      return (await readdir(this.self(), { encoding: 'buffer' })).sort(Buffer.compare);
    } catch (err) {
      throw new BeneathError('unreadable', '.', codeOf(err));
    }
  }

  /** lstat of one entry (a link is described, not followed); null when it is gone. */
  async lstat(name: Name): Promise<Stats | null>;
  async lstat(name: Name, opts: { bigint: true }): Promise<BigIntStats | null>;
  async lstat(name: Name, opts?: { bigint: true }): Promise<Stats | BigIntStats | null> {
    try {
      return opts?.bigint ? await lstat(this.entry(name), { bigint: true }) : await lstat(this.entry(name));
    } catch (err) {
      if (codeOf(err) === 'ENOENT') return null;
      throw new BeneathError('unreadable', text(name), codeOf(err));
    }
  }

  /** The sub-directory `name`, held; a link there (or anything not a directory) is refused. */
  async openDir(name: Name): Promise<HeldDir> {
    let handle: FileHandle;
    try {
      handle = await open(this.entry(name), DIR_FLAGS);
    } catch (err) {
      const code = codeOf(err);
      if (code === 'ENOTDIR') {
        // O_DIRECTORY answers ENOTDIR for a link too: tell which, by the entry itself.
        const st = await this.lstat(name).catch(() => null);
        throw new BeneathError(st?.isSymbolicLink() ? 'link' : 'not-directory', text(name), code);
      }
      throw refusalOf(err, name);
    }
    return HeldDir.checked(handle, text(name));
  }

  /** The regular file `name`, open for reading; a link, FIFO, socket or directory there is refused. */
  async openFile(name: Name): Promise<FileHandle> {
    let handle: FileHandle;
    try {
      handle = await open(this.entry(name), FILE_FLAGS);
    } catch (err) {
      throw refusalOf(err, name);
    }
    try {
      if (!(await handle.stat()).isFile()) throw new BeneathError('not-file', text(name));
    } catch (err) {
      await handle.close();
      throw err instanceof BeneathError ? err : new BeneathError('unreadable', text(name), codeOf(err));
    }
    return handle;
  }

  /** The text of the link `name` (not followed: what it points to is never looked at). */
  async readLink(name: Name): Promise<string> {
    try {
      return await readlink(this.entry(name));
    } catch (err) {
      throw refusalOf(err, name);
    }
  }

  /** The sub-directory `name`, created when missing (mkdir never follows a link: a planted one is EEXIST, then refused by the open). */
  async openOrMakeDir(name: Name, mode = 0o755): Promise<HeldDir> {
    try {
      await mkdir(this.entry(name), { mode });
    } catch (err) {
      if (codeOf(err) !== 'EEXIST') throw refusalOf(err, name);
    }
    return this.openDir(name);
  }

  /** Creates the file `name`, which must not exist yet (a link planted there is never written through). */
  async createFile(name: Name, mode = 0o644): Promise<FileHandle> {
    try {
      return await open(this.entry(name), CREATE_FLAGS, mode);
    } catch (err) {
      throw refusalOf(err, name);
    }
  }

  /** Removes the entry `name` and, for a real directory, everything below it, links removed as links (never followed). */
  async remove(name: Name): Promise<void> {
    const st = await this.lstat(name);
    if (st === null) return;
    if (st.isDirectory()) {
      const dir = await this.openDir(name);
      try {
        for (const child of await dir.list()) await dir.remove(child);
      } finally {
        await dir.close();
      }
    }
    // rmdir and unlink never follow a link in the last component: swapped in now, the link itself goes.
    try {
      await (st.isDirectory() ? rmdir : unlink)(this.entry(name));
    } catch (err) {
      if (codeOf(err) !== 'ENOENT') throw refusalOf(err, name);
    }
  }

  stat(): Promise<Stats> {
    return this.handle.stat();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.handle.close();
  }

  /** `/proc/self/fd/<fd>`: the held directory itself, whatever its path has become. */
  private self(): string {
    if (this.closed) throw new Error('HeldDir used after close');
    return `/proc/self/fd/${this.handle.fd}`;
  }

  /** One name inside the held directory, as a path the kernel resolves through the descriptor. */
  private entry(name: Name): Buffer {
    checkName(name);
    return Buffer.concat([Buffer.from(`${this.self()}/`), typeof name === 'string' ? Buffer.from(name) : name]);
  }

  private static async checked(handle: FileHandle, shown: string): Promise<HeldDir> {
    try {
      if (!(await handle.stat()).isDirectory()) throw new BeneathError('not-directory', shown);
    } catch (err) {
      await handle.close();
      throw err;
    }
    return new HeldDir(handle);
  }
}

/**
 * Holds the directories along one path below `base` and reuses the common prefix from one call to
 * the next: walking paths in sorted order opens each directory about once, not once per file.
 * One cursor per concurrent worker; `close()` when done (`base` is never closed by it).
 */
export class DirCursor {
  private readonly names: string[] = [];
  private readonly dirs: HeldDir[] = [];

  constructor(
    private readonly base: HeldDir,
    private readonly opts: { create?: boolean } = {},
  ) {}

  /** The held directory `names` below the base (opened, or created with `create`, where not held already). */
  async at(names: readonly string[]): Promise<HeldDir> {
    let keep = 0;
    while (keep < this.names.length && keep < names.length && this.names[keep] === names[keep]) keep++;
    await this.truncate(keep);
    for (const name of names.slice(keep)) {
      const parent = this.dirs[this.dirs.length - 1] ?? this.base;
      this.dirs.push(this.opts.create ? await parent.openOrMakeDir(name) : await parent.openDir(name));
      this.names.push(name);
    }
    return this.dirs[this.dirs.length - 1] ?? this.base;
  }

  async close(): Promise<void> {
    await this.truncate(0);
  }

  private async truncate(length: number): Promise<void> {
    while (this.dirs.length > length) {
      this.names.pop();
      await this.dirs.pop()!.close();
    }
  }
}

/**
 * sha256 and size of an open file, read with explicit positions in steps of at most 1 MiB (the
 * descriptor's offset is not used). `sizeHint` (its size when stat'ed) sizes the buffer: a small
 * file does not allocate a megabyte; a file that grew since is still read to its end.
 */
export async function hashOpenFile(handle: FileHandle, sizeHint = CHUNK): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(Math.ceil(sizeHint) + 1, 4096)));
  let size = 0;
  for (;;) {
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, size);
    if (bytesRead === 0) break;
    size += bytesRead;
    hash.update(buffer.subarray(0, bytesRead));
  }
  return { sha256: hash.digest('hex'), size };
}

/** A name as text when it is valid UTF-8 (round-trips), else null. */
export function utf8Name(name: Buffer): string | null {
  const decoded = name.toString('utf8');
  return Buffer.from(decoded).equals(name) ? decoded : null;
}

/** One component: not empty, not `.` or `..`, no `/` and no NUL. */
export function isComponent(name: Name): boolean {
  const s = typeof name === 'string' ? name : name.toString('latin1');
  return s !== '' && s !== '.' && s !== '..' && !s.includes('/') && !s.includes('\0');
}

function checkName(name: Name): void {
  if (!isComponent(name)) throw new BeneathError('bad-name', text(name));
}

function refusalOf(err: unknown, name: Name): BeneathError {
  if (err instanceof BeneathError) return err;
  const code = codeOf(err);
  const refusal: BeneathRefusal =
    code === 'ELOOP' ? 'link' : code === 'ENOENT' ? 'missing' : code === 'EEXIST' ? 'exists' : code === 'ENOTDIR' ? 'not-directory' : code === 'ENXIO' || code === 'EISDIR' ? 'not-file' : 'unreadable';
  return new BeneathError(refusal, text(name), code);
}

function codeOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function text(name: Name): string {
  return typeof name === 'string' ? name : name.toString('utf8');
}
