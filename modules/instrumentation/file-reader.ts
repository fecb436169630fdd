import { constants } from 'node:fs';
import { lstat, open, opendir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { isMissing, openInWorkspace } from './file-access.js';
import type { FromReader, ListEntry, ReadRequest, ReadResult, ReaderData, ToReader } from './file-read-worker.js';
import { startWorker } from '../settings/worker-thread.js';

export type { ListEntry, ReadRequest, ReadResult } from './file-read-worker.js';

/** Reads workspace files and lists directories for the file watcher (see file-read-worker.ts). */
export interface FileReader {
  read(req: ReadRequest): Promise<ReadResult>;
  /** null: the directory is missing or not provably inside the workspace. */
  list(dir: string): Promise<ListEntry[] | null>;
  close(): Promise<void>;
}

/** Requests made within a millisecond go to the thread as one message, up to this many. */
const BATCH = 64;

/**
 * The reader thread, batched; when it cannot start or dies, the same work continues in-process
 * (asynchronous fs calls: slower, never blocking), so a thread failure loses nothing.
 */
export async function startReader(data: ReaderData): Promise<FileReader> {
  const fallback = inProcessReader(data);
  let worker: Worker;
  try {
    worker = startWorker(new URL('./file-read-worker.js', import.meta.url), data);
    await new Promise<void>((resolve, reject) => {
      worker.once('message', () => resolve());
      worker.once('error', reject);
      worker.once('exit', () => reject(new Error('the reader thread exited')));
    });
  } catch {
    return fallback;
  }
  worker.unref(); // kept alive only while it has requests to answer (see ThreadReader.busy)
  return new ThreadReader(worker, fallback);
}

type Waiting = { req: ReadRequest; resolve: (r: ReadResult) => void };

class ThreadReader implements FileReader {
  private nextId = 0;
  private batch: Waiting[] = [];
  private scheduled = false;
  private readonly reads = new Map<number, Waiting[]>();
  private readonly lists = new Map<number, { dir: string; entries: ListEntry[]; resolve: (e: ListEntry[] | null) => void }>();
  private dead = false;

  constructor(
    private readonly worker: Worker,
    private readonly fallback: FileReader,
  ) {
    worker.on('message', (msg: FromReader) => this.onMessage(msg));
    worker.on('error', () => this.die());
    worker.on('exit', () => this.die());
  }

  read(req: ReadRequest): Promise<ReadResult> {
    if (this.dead) return this.fallback.read(req);
    return new Promise((resolve) => {
      this.batch.push({ req, resolve });
      this.busy();
      if (this.batch.length >= BATCH) this.send();
      else if (!this.scheduled) {
        // Not setImmediate: tasks finish one by one, and a batch per turn would be a message per file.
        this.scheduled = true;
        setTimeout(() => this.send(), 1);
      }
    });
  }

  list(dir: string): Promise<ListEntry[] | null> {
    if (this.dead) return this.fallback.list(dir);
    return new Promise((resolve) => {
      const id = this.nextId++;
      this.lists.set(id, { dir, entries: [], resolve });
      this.busy();
      this.worker.postMessage({ t: 'list', id, dir } satisfies ToReader);
    });
  }

  async close(): Promise<void> {
    this.dead = true;
    await this.worker.terminate();
  }

  private send(): void {
    this.scheduled = false;
    if (this.batch.length === 0) return;
    const batch = this.batch;
    this.batch = [];
    if (this.dead) return this.redo(batch);
    const id = this.nextId++;
    this.reads.set(id, batch);
    this.worker.postMessage({ t: 'read', id, items: batch.map((w) => w.req) } satisfies ToReader);
  }

  private onMessage(msg: FromReader): void {
    if (msg.t === 'read') {
      const batch = this.reads.get(msg.id);
      this.reads.delete(msg.id);
      batch?.forEach((w, i) => w.resolve(msg.results[i]));
      this.idle();
    } else if (msg.t === 'list') {
      const list = this.lists.get(msg.id);
      if (!list) return;
      if (msg.entries === null) list.entries = [];
      else list.entries.push(...msg.entries);
      if (msg.done) {
        this.lists.delete(msg.id);
        list.resolve(msg.entries === null ? null : list.entries);
        this.idle();
      }
    }
  }

  /** While an answer is awaited the thread keeps the process alive (a final rescan must not be cut short); idle, it does not. */
  private busy(): void {
    this.worker.ref();
  }

  private idle(): void {
    if (this.reads.size === 0 && this.lists.size === 0 && this.batch.length === 0) this.worker.unref();
  }

  /** The thread is gone: what it had not answered is done in-process. */
  private die(): void {
    if (this.dead) return;
    this.dead = true;
    for (const batch of this.reads.values()) this.redo(batch);
    this.reads.clear();
    for (const { dir, resolve } of this.lists.values()) void this.fallback.list(dir).then(resolve, () => resolve(null));
    this.lists.clear();
    this.redo(this.batch);
    this.batch = [];
  }

  private redo(batch: Waiting[]): void {
    for (const w of batch) {
      this.fallback.read(w.req).then(w.resolve, (err: unknown) => w.resolve({ kind: 'error', message: (err as Error).message }));
    }
  }
}

/** The same reads with the main thread's asynchronous fs API (libuv threadpool). */
export function inProcessReader(data: ReaderData): FileReader {
  return {
    async read(req) {
      const opened = await openInWorkspace(data.root, data.realRoot, req.path);
      const observedAt = new Date().toISOString();
      if (opened.kind === 'absent') return { kind: 'absent', observedAt, ...(opened.gone ? { gone: true } : {}) };
      if (opened.kind !== 'file') return opened;
      const { file } = opened;
      try {
        const { known } = req;
        const st = file.st;
        if (!req.force && known && known.size === st.size && known.mtimeMs === st.mtimeMs && known.ino === st.ino) return { kind: 'unchanged' };
        if (req.statOnly) return { kind: 'stat', size: st.size, mtimeMs: st.mtimeMs, ino: st.ino, observedAt };
        if (st.size > data.limit) return { kind: 'large' };
        const snap = await file.snapshot();
        if (!snap.body || snap.size > data.limit) return { kind: 'large' };
        const stamp = { sha256: snap.sha256, size: snap.size, mtimeMs: st.mtimeMs, ino: st.ino, observedAt, ...(st.nlink > 1 ? { links: st.nlink } : {}) };
        return known?.sha256 === snap.sha256 ? { kind: 'file', ...stamp } : { kind: 'file', ...stamp, body: snap.body };
      } finally {
        file.close();
      }
    },
    async list(dir) {
      let handle;
      try {
        handle = await open(dir === '' ? data.root : join(data.root, dir), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_DIRECTORY);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (isMissing(err) || code === 'ELOOP' || code === 'EACCES') return null;
        throw err;
      }
      try {
        const via = `/proc/self/fd/${handle.fd}`;
        const actual = await readlink(via).catch(() => null);
        if (actual !== (dir === '' ? data.realRoot : join(data.realRoot, dir))) return null;
        const entries: ListEntry[] = [];
        const files: string[] = [];
        for await (const entry of await opendir(via, { bufferSize: 256 })) {
          if (entry.isDirectory()) entries.push({ name: entry.name, dir: true, size: 0, mtimeMs: 0, ino: 0 });
          else if (entry.isFile()) files.push(entry.name);
        }
        for (let i = 0; i < files.length; i += 64) {
          const chunk = files.slice(i, i + 64);
          const stats = await Promise.all(chunk.map((name) => lstat(`${via}/${name}`).catch(() => null)));
          chunk.forEach((name, j) => {
            const st = stats[j];
            if (st?.isFile()) entries.push({ name, dir: false, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino });
          });
        }
        return entries;
      } catch (err) {
        if (isMissing(err)) return null;
        throw err;
      } finally {
        await handle.close();
      }
    },
    async close() {},
  };
}
