import { open, mkdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Makes one temp file's bytes durable before it is renamed in; `handle`: the file, still open from its writing. */
export type FlushFile = (path: string, handle?: FileHandle) => Promise<void>;

/** How a temp file arrives: open from its writing (flushed, then closed, here), or synced by its writer already. */
export type TempState = { handle: FileHandle } | { synced: true };

export interface GroupCommitOptions {
  /** Default: fdatasync (the bytes and what reading them back needs; the name is fsynced with its directory). */
  flushFile?: FlushFile;
  /** Most puts one barrier takes (default 1024); more wait for the next. */
  maxBatch?: number;
  /** fsyncs in flight at once (default 16; libuv runs four at a time unless UV_THREADPOOL_SIZE says more). */
  syncConcurrency?: number;
}

/** A put whose temp file is written and checked, waiting for its batch's barrier. */
interface Staged {
  temp: string;
  final: string;
  state: TempState;
  resolve: (created: boolean) => void;
  reject: (err: unknown) => void;
}

type Outcome = { ok: true } | { ok: false; error: unknown };

/**
 * Group commit for blobs: the puts staged while a batch is being committed are committed together in
 * the next one, as the ledger groups its appends. A batch: every temp file's bytes flushed (the
 * fdatasyncs issued together, so the filesystem's journal takes them in a few commits instead of one
 * each), then each renamed to its final name, then one fsync per shard directory touched (and of the
 * shards' parent when a shard is new). A put resolves only after all three for its file: an
 * acknowledged blob is as durable as one fsynced on its own. A crash before the rename leaves only a
 * temp file (swept when the store next opens); one failing file fails its own put only.
 *
 * syncfs(2) was measured too (through `sync -f`): no faster per file here, and it waits for every
 * dirty byte on the filesystem, so a batch would wait behind the agent writing a checkpoint to the
 * same disk.
 */
export class BlobGroupCommit {
  private readonly waiting: Staged[] = [];
  private running = false;
  private readonly flushFile: FlushFile;
  private readonly maxBatch: number;
  private readonly syncConcurrency: number;
  /** Shard directories known to exist: a put into one skips its mkdir (a shard removed meanwhile is made again). */
  private readonly shards = new Set<string>();

  constructor(opts: GroupCommitOptions = {}) {
    this.flushFile = opts.flushFile ?? fdatasyncPath;
    this.maxBatch = opts.maxBatch ?? 1024;
    this.syncConcurrency = opts.syncConcurrency ?? 16;
  }

  /**
   * Resolves once `temp` is durably at `final`: true when renamed in, false when `final` was there
   * already (same content). An open handle is closed here, whatever happens.
   */
  commit(temp: string, final: string, state: TempState): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ temp, final, state, resolve, reject });
      if (!this.running) void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.waiting.length > 0) await this.commitBatch(this.waiting.splice(0, this.maxBatch));
    } finally {
      this.running = false;
    }
  }

  private async commitBatch(batch: Staged[]): Promise<void> {
    try {
      const flushed = await this.flushAll(batch);
      const placed = await this.renameAll(flushed);
      await this.syncDirectories(placed);
    } catch (err) {
      // Each step settles its files itself; this is a bug's last resort, never a put left hanging.
      for (const s of batch) s.reject(err);
    }
  }

  /** Flushes a file written by a put (through the handle it was written with, then closed); one synced by its writer is taken as it is. */
  private async flush(s: Staged): Promise<void> {
    if (!('handle' in s.state)) return;
    try {
      await this.flushFile(s.temp, s.state.handle);
    } finally {
      await s.state.handle.close();
    }
  }

  /** The barrier: every file's bytes durable. Files whose flush failed are rejected here. */
  private async flushAll(batch: Staged[]): Promise<Staged[]> {
    const outcomes = await settleEach(batch, this.syncConcurrency, (s) => this.flush(s));
    return batch.filter((s, i) => kept(s, outcomes[i]));
  }

  /** Renames each flushed file in (visible from now on); a blob already there keeps its file and the temp goes. */
  private async renameAll(flushed: Staged[]): Promise<Array<{ staged: Staged; created: boolean; newShard: boolean }>> {
    const placed: Array<{ staged: Staged; created: boolean; newShard: boolean }> = [];
    const outcomes = await settleEach(flushed, this.syncConcurrency, async (s) => {
      if (await pathExists(s.final)) {
        await rm(s.temp, { force: true });
        placed.push({ staged: s, created: false, newShard: false });
        return;
      }
      placed.push({ staged: s, created: true, newShard: await this.renameIn(s.temp, s.final) });
    });
    flushed.forEach((s, i) => kept(s, outcomes[i]));
    return placed;
  }

  /** Renames into the shard, made first where it is not known to exist; true when the shard is new. */
  private async renameIn(temp: string, final: string): Promise<boolean> {
    const shard = dirname(final);
    if (this.shards.has(shard)) {
      try {
        await rename(temp, final);
        return false;
      } catch (err) {
        if ((err as NodeJS.ErrnoException)?.code !== 'ENOENT') throw err;
        this.shards.delete(shard); // removed since: made again below (a missing temp fails there again)
      }
    }
    const made = await mkdir(shard, { recursive: true });
    await rename(temp, final);
    this.shards.add(shard);
    return made !== undefined;
  }

  /** One fsync per shard directory touched, and of the shards' parent when one was new; then the puts resolve. */
  private async syncDirectories(placed: Array<{ staged: Staged; created: boolean; newShard: boolean }>): Promise<void> {
    const byShard = new Map<string, typeof placed>();
    for (const p of placed) {
      const shard = dirname(p.staged.final);
      const list = byShard.get(shard);
      if (list) list.push(p);
      else byShard.set(shard, [p]);
    }
    const parents = new Set(placed.filter((p) => p.newShard).map((p) => dirname(dirname(p.staged.final))));
    const dirs = [...byShard.keys(), ...parents];
    const outcomes = await settleEach(dirs, this.syncConcurrency, fsyncPath);
    const failed = new Map<string, unknown>();
    dirs.forEach((d, i) => {
      const o = outcomes[i];
      if (!o.ok) failed.set(d, o.error);
    });
    for (const p of placed) {
      const shard = dirname(p.staged.final);
      const error = failed.get(shard) ?? (p.newShard ? failed.get(dirname(shard)) : undefined);
      if (error !== undefined) p.staged.reject(error);
      else p.staged.resolve(p.created);
    }
  }
}

/** Rejects the put whose step failed; true when it goes on. */
function kept(s: Staged, outcome: Outcome): boolean {
  if (outcome.ok) return true;
  s.reject(outcome.error);
  return false;
}

/** Runs `step` over `items`, at most `limit` at once; never throws: each item's outcome, in order. */
async function settleEach<T>(items: readonly T[], limit: number, step: (item: T) => Promise<unknown>): Promise<Outcome[]> {
  const outcomes: Outcome[] = new Array<Outcome>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      try {
        await step(items[i]);
        outcomes[i] = { ok: true };
      } catch (error) {
        outcomes[i] = { ok: false, error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return outcomes;
}

async function fdatasyncPath(path: string, handle?: FileHandle): Promise<void> {
  if (handle) return handle.datasync();
  const opened = await open(path, 'r');
  try {
    await opened.datasync();
  } finally {
    await opened.close();
  }
}

/** fsync of a file or directory by path. */
export async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException)?.code === 'ENOENT') return false;
    throw err;
  }
}
