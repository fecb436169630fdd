import { createHash } from 'node:crypto';
import { close, constants, createReadStream, fstat, open, read, watch, type FSWatcher, type ReadStream, type Stats } from 'node:fs';
import { lstat, readdir, readlink, realpath } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { promisify } from 'node:util';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { Recorder } from '../runs/run-context.js';
import { isHarnessFile } from '../runs/workspace.js';

export interface FileWatcherOptions {
  /** The workspace root. */
  root: string;
  artifacts: ArtifactStore;
  record: Recorder;
  /** A path is processed once it has been quiet this long. */
  quietMs?: number;
  /** Period of the full rescan that catches whatever fs.watch dropped. */
  rescanMs?: number;
  /** Workspace-relative posix paths to ignore (default: output/, data/, models/ and harness files). */
  skip?: (path: string) => boolean;
}

/** Agent checkpoints (archived at submission), read-only inputs and the harness's own files. */
export function defaultSkip(path: string): boolean {
  const top = path.split('/', 1)[0];
  return top === 'output' || top === 'data' || top === 'models' || isHarnessFile(path);
}

/** Files up to this size are read once into memory (atomic snapshot) and line-diffed; larger ones are streamed. */
const IN_MEMORY_LIMIT = 8 * 1024 * 1024;
/** Above this many line pairs the diff falls back from LCS to a multiset difference. */
const LCS_CELL_LIMIT = 4_000_000;

/** No link in the last component (O_NOFOLLOW) and no blocking open of a FIFO (O_NONBLOCK); parents are checked after opening. */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

interface Known {
  sha256: string;
  size: number;
  mtimeMs: number;
  ino: number;
}

/**
 * Records every create/modify/delete of a regular file under the workspace as `FileChanged`, with
 * the content in the artifact store. fs.watch (recursive) gives promptness: events are coalesced per
 * path until it has been quiet for `quietMs`, so a burst of writes yields one event with the final
 * content. fs.watch may drop events (notably in directories created or renamed while watched), so a
 * full rescan compares the tree against the last known state every `rescanMs` and at stop(): the
 * final state is never missed, only intermediate states can be. A change is recorded only when the
 * content hash differs from the last recorded one.
 *
 * The watcher runs outside the sandbox, so it never reads through a symlink: the walks do not follow
 * links, and a file is opened O_NOFOLLOW, must be a regular file (fstat) and the kernel's path of the
 * open descriptor must be exactly the workspace path asked for (so no parent was a link either); the
 * hash, diff and stored content all come from that one descriptor. Anything else is skipped without
 * being recorded; a previously recorded file that is now only reachable through a link is recorded
 * as deleted by the reconcile, since the workspace (seen without following links) no longer holds it.
 *
 * linesAdded/linesRemoved: a line diff against the previous content — an exact LCS when the
 * changed middle section (after trimming the common prefix and suffix) is small enough, otherwise
 * a multiset difference of lines, which ignores reordering. Files over 8 MiB are stored and hashed
 * but not diffed (0/0).
 */
export class FileWatcher {
  private readonly known = new Map<string, Known>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly quietMs: number;
  private readonly rescanMs: number;
  private readonly skip: (path: string) => boolean;
  private watcher: FSWatcher | undefined;
  private rescanTimer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();
  private failure: unknown;
  private stopped = false;
  private realRoot: Promise<string> | undefined;

  constructor(private readonly opts: FileWatcherOptions) {
    this.quietMs = opts.quietMs ?? 150;
    this.rescanMs = opts.rescanMs ?? 2000;
    this.skip = opts.skip ?? defaultSkip;
  }

  /** Takes the current tree as the baseline (not recorded: the agent did not write it), then watches. */
  async start(): Promise<void> {
    for (const path of (await this.scan('')).keys()) {
      const file = await this.openInWorkspace(path);
      if (!file) continue;
      try {
        this.known.set(path, (await this.snapshot(file)).known);
      } finally {
        file.close();
      }
    }
    this.watcher = watch(this.opts.root, { recursive: true }, (_event, filename) => {
      if (filename) this.touched(filename.split(sep).join('/'));
    });
    // A watcher error (e.g. too many watches) must not crash the run: the rescans still cover it.
    this.watcher.on('error', () => this.watcher?.close());
    this.rescanTimer = setInterval(() => void this.flush().catch(() => {}), this.rescanMs);
    this.rescanTimer.unref();
  }

  /** Full rescan against the last known state; resolves once its events are recorded. */
  flush(): Promise<void> {
    return this.enqueue(() => this.reconcile(''));
  }

  /** Stops watching, records the final state; rejects with the first storage/recording error, if any. */
  async stop(): Promise<void> {
    if (this.stopped) return this.chain;
    this.stopped = true;
    this.watcher?.close();
    clearInterval(this.rescanTimer);
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await this.flush();
    if (this.failure !== undefined) throw this.failure;
  }

  private touched(path: string): void {
    if (this.stopped || this.skip(path)) return;
    clearTimeout(this.timers.get(path));
    const timer = setTimeout(() => {
      this.timers.delete(path);
      void this.enqueue(() => this.settle(path));
    }, this.quietMs);
    this.timers.set(path, timer);
  }

  /** Serialises all processing so the known state and the event order stay consistent. */
  private enqueue(work: () => Promise<void>): Promise<void> {
    this.chain = this.chain.then(work).catch((err: unknown) => {
      this.failure ??= err;
    });
    return this.chain;
  }

  /** A path fs.watch reported and that has been quiet: a file, or a directory / vanished path to reconcile. */
  private async settle(path: string): Promise<void> {
    const st = (await this.linkFreeAncestors(path)) ? await lstatOrNull(join(this.opts.root, path)) : null;
    if (st?.isFile()) await this.update(path, st, true);
    else await this.reconcile(path);
  }

  /** Brings the known state of `prefix` (a directory, '' for all) in line with the disk. */
  private async reconcile(prefix: string): Promise<void> {
    const onDisk = await this.scan(prefix);
    for (const [path, st] of onDisk) await this.update(path, st, false);
    const under = (p: string) => prefix === '' || p === prefix || p.startsWith(`${prefix}/`);
    for (const path of [...this.known.keys()]) {
      if (under(path) && !onDisk.has(path)) await this.remove(path);
    }
  }

  private async update(path: string, st: Stats, force: boolean): Promise<void> {
    const prev = this.known.get(path);
    if (!force && prev && prev.size === st.size && prev.mtimeMs === st.mtimeMs && prev.ino === st.ino) return;
    // null: vanished, or refused (a link or special file); either way a reconcile records the delete.
    const file = await this.openInWorkspace(path);
    if (!file) return;
    let content: { known: Known; body?: Buffer };
    let key: string | null;
    try {
      content = await this.snapshot(file);
      if (prev?.sha256 === content.known.sha256) {
        this.known.set(path, content.known);
        return;
      }
      key = await this.store(path, file, content);
    } finally {
      file.close();
    }
    if (key === null) return; // changed while being stored: its own event follows
    const lines = await this.diff(prev, content.body);
    await this.opts.record('FileChanged', {
      path,
      op: prev ? 'modify' : 'create',
      sha256: content.known.sha256,
      size: content.known.size,
      ...(prev ? { previousSha256: prev.sha256 } : {}),
      key,
      linesAdded: lines.added,
      linesRemoved: lines.removed,
    });
    this.known.set(path, content.known);
  }

  private async remove(path: string): Promise<void> {
    const prev = this.known.get(path)!;
    const lines = await this.diff(prev, Buffer.alloc(0));
    await this.opts.record('FileChanged', {
      path,
      op: 'delete',
      previousSha256: prev.sha256,
      linesAdded: 0,
      linesRemoved: lines.removed,
    });
    this.known.delete(path);
  }

  /**
   * Opens a workspace file for reading without ever following a link and without leaving the
   * workspace; null when it is missing or refused. The descriptor's kernel path is compared with the
   * expected one after opening, so a parent swapped for a link at any moment before the open is caught.
   */
  private async openInWorkspace(path: string): Promise<OpenFile | null> {
    this.realRoot ??= realpath(this.opts.root);
    const expected = join(await this.realRoot, path);
    let fd: number;
    try {
      fd = await openAsync(join(this.opts.root, path), OPEN_FLAGS);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (isMissing(err) || code === 'ELOOP' || code === 'ENXIO') return null; // ELOOP: a link; ENXIO: a socket
      throw err;
    }
    const file = new OpenFile(fd);
    try {
      const st = await fstatAsync(fd);
      // No /proc (not Linux): the location cannot be proven, so nothing is read.
      const actual = await readlink(`/proc/self/fd/${fd}`).catch(() => null);
      if (st.isFile() && actual === expected) {
        file.st = st;
        return file;
      }
    } catch (err) {
      file.close();
      throw err;
    }
    file.close();
    return null;
  }

  /** Hash (and, when small, bytes) of an open file; its stat is taken before reading so a later write always shows as a stat change. */
  private async snapshot(file: OpenFile): Promise<{ known: Known; body?: Buffer }> {
    const { st } = file;
    const stamp = { mtimeMs: st.mtimeMs, ino: st.ino };
    if (st.size <= IN_MEMORY_LIMIT) {
      const chunks: Buffer[] = [];
      for await (const chunk of file.chunks()) chunks.push(Buffer.from(chunk));
      const body = Buffer.concat(chunks);
      const sha256 = createHash('sha256').update(body).digest('hex');
      return { known: { sha256, size: body.length, ...stamp }, body };
    }
    const hash = createHash('sha256');
    let size = 0;
    for await (const chunk of file.chunks()) {
      size += chunk.length;
      hash.update(chunk);
    }
    return { known: { sha256: hash.digest('hex'), size, ...stamp } };
  }

  /** Stores the content (large files re-read from the same descriptor); null when it changed between hashing and storing. */
  private async store(path: string, file: OpenFile, content: { known: Known; body?: Buffer }): Promise<string | null> {
    const declared = { sha256: content.known.sha256, size: content.known.size };
    try {
      return (await this.opts.artifacts.put(content.body ?? file.stream(), declared)).key;
    } catch (err) {
      // By name: adapters may raise it from another module instance.
      if ((err as Error)?.name === 'ArtifactIntegrityError' || isMissing(err)) {
        this.touched(path);
        return null;
      }
      throw err;
    }
  }

  private async diff(prev: Known | undefined, body: Buffer | undefined): Promise<{ added: number; removed: number }> {
    if (!body) return { added: 0, removed: 0 }; // too large to diff
    if (!prev) return lineDiff(Buffer.alloc(0), body);
    if (prev.size > IN_MEMORY_LIMIT) return { added: 0, removed: 0 };
    const before = await buffer(await this.opts.artifacts.get(prev.sha256));
    return lineDiff(before, body);
  }

  /** Regular files under `prefix` (a workspace-relative directory or file path), skipping ignored paths. */
  private async scan(prefix: string): Promise<Map<string, Stats>> {
    const found = new Map<string, Stats>();
    if (!(await this.linkFreeAncestors(prefix))) return found; // under a link: not part of the workspace
    const walk = async (rel: string): Promise<void> => {
      if (rel !== '' && this.skip(rel)) return;
      const st = await lstatOrNull(join(this.opts.root, rel));
      if (!st) return;
      if (st.isFile()) {
        found.set(rel, st);
      } else if (st.isDirectory()) {
        let names: string[];
        try {
          names = await readdir(join(this.opts.root, rel));
        } catch (err) {
          if (isMissing(err)) return;
          throw err;
        }
        for (const name of names) await walk(rel === '' ? name : `${rel}/${name}`);
      }
    };
    await walk(prefix);
    return found;
  }

  /** Whether every proper ancestor directory of `path` is a real directory (lstat: not a link). */
  private async linkFreeAncestors(path: string): Promise<boolean> {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const st = await lstatOrNull(join(this.opts.root, ...parts.slice(0, i)));
      if (!st?.isDirectory()) return false;
    }
    return true;
  }
}

const openAsync = promisify(open);
const fstatAsync = promisify(fstat);
const readAsync = promisify(read);
const closeAsync = promisify(close);

/** A descriptor opened by FileWatcher; `close()` is safe to call once, in a finally. */
class OpenFile {
  st!: Stats;
  private streamed: ReadStream | undefined;

  constructor(readonly fd: number) {}

  /** The whole file, read with explicit positions (the descriptor's offset is never relied on). */
  async *chunks(): AsyncGenerator<Buffer> {
    const buf = Buffer.allocUnsafe(1024 * 1024);
    for (let position = 0; ; ) {
      const { bytesRead } = await readAsync(this.fd, buf, 0, buf.length, position);
      if (bytesRead === 0) return;
      position += bytesRead;
      yield buf.subarray(0, bytesRead);
    }
  }

  /** The whole file as a stream from this descriptor; the stream then owns the descriptor. */
  stream(): ReadStream {
    this.streamed = createReadStream('', { fd: this.fd, start: 0, autoClose: true });
    return this.streamed;
  }

  /** Closes the descriptor; if a stream owns it, destroying the stream closes it once its pending read is done. */
  close(): void {
    if (this.streamed) this.streamed.destroy();
    else void closeAsync(this.fd).catch(() => {});
  }
}

/** Lines added and removed between two texts (see FileWatcher for the method). */
export function lineDiff(before: Buffer, after: Buffer): { added: number; removed: number } {
  const ids = new Map<string, number>();
  const toIds = (b: Buffer) => splitLines(b).map((l) => ids.get(l) ?? (ids.set(l, ids.size), ids.size - 1));
  let a = toIds(before);
  let b = toIds(after);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let end = 0;
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end++;
  a = a.slice(start, a.length - end);
  b = b.slice(start, b.length - end);
  const common = a.length * b.length <= LCS_CELL_LIMIT ? lcsLength(a, b) : multisetCommon(a, b);
  return { added: b.length - common, removed: a.length - common };
}

function splitLines(b: Buffer): string[] {
  if (b.length === 0) return [];
  const lines = b.toString('latin1').split('\n'); // latin1: byte-exact for any content
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

function lcsLength(a: number[], b: number[]): number {
  let prev = new Int32Array(b.length + 1);
  let cur = new Int32Array(b.length + 1);
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      cur[j] = a[i - 1] === b[j - 1] ? prev[j - 1] + 1 : Math.max(prev[j], cur[j - 1]);
    }
    [prev, cur] = [cur, prev];
  }
  return prev[b.length];
}

function multisetCommon(a: number[], b: number[]): number {
  const counts = new Map<number, number>();
  for (const x of a) counts.set(x, (counts.get(x) ?? 0) + 1);
  let common = 0;
  for (const x of b) {
    const n = counts.get(x) ?? 0;
    if (n > 0) {
      counts.set(x, n - 1);
      common++;
    }
  }
  return common;
}

async function lstatOrNull(path: string): Promise<Stats | null> {
  try {
    return await lstat(path);
  } catch (err) {
    if (isMissing(err)) return null;
    throw err;
  }
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
