import { randomUUID } from 'node:crypto';
import type { Stats } from 'node:fs';
import { readFile, realpath } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import PQueue from 'p-queue';
import pTimeout from 'p-timeout';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { EventData, FileChanged, LimitReached } from '../ledger/events/catalog.js';
import type { Recorder } from '../ledger/recorder.js';
import { isHarnessFile } from '../workspace-fs/layout.js';
import { isMissing, openInWorkspace } from './file-access.js';
import { KnownFiles, type Known } from './file-index.js';
import { PathQueue, type Hint } from './file-queue.js';
import { inProcessReader, startReader, type FileReader, type ListEntry } from './file-reader.js';
import { workerWatchSource, type WatchSource } from './file-watch-source.js';

export interface FileWatcherOptions {
  /** The workspace root. */
  root: string;
  artifacts: ArtifactStore;
  record: Recorder;
  /** Workspace-relative posix paths to ignore (default: output/, data/, models/ and harness files). */
  skip?: (path: string) => boolean;
  /** Called when some changes could not be observed as they happened (the final states are still recorded by a rescan). */
  onGap?: (reason: string, count?: number) => unknown;
  /** Paths processed at once (their reads are batched to the reader thread). */
  concurrency?: number;
  /**
   * Artifact puts at once (default 64, as many as paths processed). FsArtifactStore commits the puts
   * made together with one barrier, so this is also the most blobs a burst's barrier can take.
   */
  putConcurrency?: number;
  /** Read files in a worker thread (default); false: with the main thread's asynchronous fs API. */
  readerThread?: boolean;
  /** A file notified again within this time of being archived waits until it has passed (a log is archived about once a second, not per write). */
  minIntervalMs?: number;
  /** Changed paths waiting to be processed beyond which notifications are dropped for a full rescan (and a gap is reported). */
  maxPending?: number;
  /** Records handed to `record` and not yet acknowledged beyond which processing waits (back-pressure on the ledger). */
  maxUnacked?: number;
  /** How long a flush waits for the watcher to report its fence file before it falls back to a full rescan. */
  fenceTimeoutMs?: number;
  /** A burst of at least this many notifications is followed by a verifying rescan (default: an eighth of the inotify queue). */
  verifyAfter?: number;
  /** Period of the rescans while notifications are incomplete (no watcher, or some directory could not be watched). */
  pollMs?: number;
  /** Where notifications come from (default: the per-directory inotify watcher in a worker thread; tests inject fakes). */
  source?: WatchSource;
  /**
   * `RunLimits.diskBytes`: when the workspace's logical size (see `counted`) first exceeds it,
   * LimitReached is recorded and `onLimit` called (the run stops the agent). Absent or null: unlimited.
   */
  diskBytes?: number | null;
  /**
   * `RunLimits.fileBytes`: a file whose logical size exceeds it is never read; its change is recorded
   * without content (FileChanged with size, no sha256 or key) after a LimitReached for its path. Absent or null: unlimited.
   */
  fileBytes?: number | null;
  /** Told of each LimitReached this observer records (`limit` is its name: only 'diskBytes' asks for the agent to be stopped). */
  onLimit?: (limit: string, data: LimitReached) => unknown;
  /**
   * Paths that `skip` leaves out of the record whose size still counts against `diskBytes` (stat
   * only, never read). Default: output/ (checkpoints, archived at submission) when `diskBytes` is set.
   */
  counted?: (path: string) => boolean;
}

/** Agent checkpoints (archived at submission), read-only inputs and the harness's own files. */
export function defaultSkip(path: string): boolean {
  const top = path.split('/', 1)[0];
  return top === 'output' || top === 'data' || top === 'models' || isHarnessFile(path);
}

const DEFAULT_IGNORE = ['output', 'data', 'models'];

/** The harness's own temporary file (run_meta.json.tmp, renamed over run_meta.json): no transient of the agent's. */
function isHarnessTemp(path: string): boolean {
  return path.endsWith('.tmp') && isHarnessFile(path.slice(0, -'.tmp'.length));
}

/** Checkpoints are not recorded as file changes, but they take the workspace's disk. */
function defaultCounted(path: string): boolean {
  return path.split('/', 1)[0] === 'output';
}
/** Files up to this size are read and hashed by the reader thread and stored from memory; larger ones here, streamed over 8 MiB. */
const READ_LIMIT = 1024 * 1024;
const FENCE_PREFIX = '.a2rl-fence-';
/** No notification for this long ends a burst. */
const BURST_QUIET_MS = 1000;
/** Dropped paths remembered so that a rescan does not report them again as missed. */
const DROPPED_MEMORY = 500_000;
/** TransientFileRecorded facts per run (a tool that churns lock or temp files must not flood the ledger). */
const MAX_TRANSIENTS = 10_000;
/** A burst that goes on is verified at least this often. */
const BURST_VERIFY_MS = 30_000;

/**
 * Records every create/modify/delete of a regular file under the workspace as `FileChanged`, with
 * the content in the artifact store, without ever holding the harness's event loop: an agent that
 * writes 100,000 files must not delay budget enforcement, the grading API or process tracing.
 *
 * Observation. A watcher thread (file-watch-worker.ts: one inotify watch per directory, a new
 * directory watched before it is listed) posts batches of paths that may have changed; they go to
 * a bounded queue (file-queue.ts) whose tasks have a reader thread (file-read-worker.ts) open,
 * check, read and hash the files in batches, store the content (a few puts at a time), then record
 * the event. Files over 1 MiB are read here, at most 1 MiB per synchronous hash step. Walks
 * (baseline, rescans, new directories) list directories through the reader thread and are
 * back-pressured by the queue.
 * A change is recorded only when the content hash differs from the last recorded one; a path
 * notified again within `minIntervalMs` of being archived waits until then (a log being appended is
 * archived about once a second). `observedAt` is when the hashed content was read, or when the
 * absence was seen.
 *
 * `flush()` is a fence: the watcher thread creates a file of its own in the workspace root and
 * answers when inotify reports it. inotify is ordered, so every change made before the flush has
 * then been posted; the flush resolves once those are processed and their records acknowledged.
 *
 * Nothing is lost silently. inotify drops events when its queue overflows, and nothing reports it:
 * after every burst that could have overflowed it a verifying rescan runs, and changes found that
 * were never notified are recorded and reported through `onGap` (as are notifications dropped
 * because more than `maxPending` paths were waiting, and a watcher that cannot watch everything:
 * then every flush rescans, and so does a timer). A fence that does not come back falls back to a
 * rescan. Final states are never lost: `reconcile()` (before each submission, and in `stop()`)
 * compares the whole tree with the last recorded state.
 *
 * The watcher runs outside the sandbox, so it never reads through a symlink: directories are
 * opened O_NOFOLLOW|O_DIRECTORY and listed through their descriptor, a file is opened
 * O_NOFOLLOW|O_NONBLOCK (no blocking FIFO), must be a regular file
 * (fstat) and the kernel's path of the open descriptor must be exactly the workspace path asked
 * for (so no parent was a link either); hash and stored content come from that one descriptor.
 * Anything else is not part of the observed tree: a previously recorded file now reachable only
 * through a link is recorded as deleted. Files over 8 MiB are streamed (hashed, then streamed to
 * the store from the same descriptor); one that changed in between is processed again.
 *
 * Limits. The index keeps the workspace's logical size: st.size of every regular file it holds (a
 * sparse file at its full size, a hard-linked inode once), that is every file the agent can write
 * (code/, output/ via `counted`, anything else at the top) and not data/, models/ (read-only inputs
 * of the task) or the harness's own files. A file's size counts as soon as it is stat'ed, before a
 * byte of a large one is read. Past `diskBytes`, one LimitReached (action 'stopped the agent') and
 * `onLimit`. A file over `fileBytes` is never read into the store: LimitReached (scope: its path,
 * once while it stays over) and a FileChanged without content.
 */
export class FileWatcher {
  private readonly root: string;
  private realRoot = '';
  /** Not observed at all... */
  private readonly skip: (path: string) => boolean;
  /** ...or observed for their size only (counted against diskBytes, never read or recorded). */
  private readonly countOnly: (path: string) => boolean;
  private readonly diskBytes: number;
  private readonly fileBytes: number;
  private diskReached = false;
  /** Paths over fileBytes whose LimitReached is recorded (again only once they were under it in between). */
  private readonly overLimit = new Set<string>();
  private readonly known = new KnownFiles();
  private readonly queue: PathQueue;
  private readonly outbox: Outbox;
  private readonly fenceTimeoutMs: number;
  private readonly maxPending: number;
  private readonly pollMs: number;
  private verifyAfter: number;

  private source: WatchSource | undefined;
  /** Notifications are incomplete: flushes rescan, and so does a timer. */
  private impaired = false;
  private started = false;
  /** The baseline is taken: from now on what changes is recorded. */
  private ready = false;
  /** stop() has begun: no new timers or background rescans. */
  private closing = false;
  private closed = false;
  private baseline = false;
  private failure: unknown;
  private stopping: Promise<void> | undefined;

  /** Fence file names handed out (never recorded). */
  private readonly fenceNames = new Set<string>();
  private fenceRunning: Promise<boolean> | undefined;
  private fenceNext: Promise<boolean> | undefined;

  private rescanRunning: Promise<void> | undefined;
  private rescanNext: Promise<void> | undefined;
  /** While a rescan runs: paths notified since it began, and paths it found changed without a notification. */
  private notified: Set<string> | undefined;
  private unnotified: Set<string> | undefined;

  private dropped = 0;
  /** TransientFileRecorded facts so far. */
  private transients = 0;
  /** Paths whose notification was dropped (reported as such, so a rescan finding them does not count them as missed again)... */
  private droppedPaths = new Set<string>();
  /** ...unless too many to remember: then the next rescan cannot tell missed from dropped and reports no count of its own. */
  private droppedForgotten = false;
  /** A rescan for notifications known to be lost (dropped, or the watcher impaired): flushes wait for it. */
  private recovery: Promise<void> | undefined;
  private burst = { count: 0, lastAt: 0, armedAt: 0 };
  private reader: FileReader | undefined;
  private readonly puts: PQueue;
  /** Directory walks run two at a time (an agent creating 100k directories must not open 100k directory handles). */
  private readonly walks = new PQueue({ concurrency: 2 });
  private verifyTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: FileWatcherOptions) {
    this.root = resolve(opts.root);
    this.diskBytes = opts.diskBytes ?? Infinity;
    this.fileBytes = opts.fileBytes ?? Infinity;
    const skip = opts.skip ?? defaultSkip;
    const counted = opts.counted ?? (this.diskBytes < Infinity ? defaultCounted : () => false);
    this.skip = (path) => skip(path) && !counted(path);
    this.countOnly = (path) => skip(path) && counted(path);
    this.fenceTimeoutMs = opts.fenceTimeoutMs ?? 2000;
    this.maxPending = opts.maxPending ?? 250_000;
    this.pollMs = opts.pollMs ?? 5000;
    this.verifyAfter = opts.verifyAfter ?? 0;
    this.puts = new PQueue({ concurrency: opts.putConcurrency ?? 64 });
    this.outbox = new Outbox(opts.record, opts.maxUnacked ?? 2000, (err) => this.fail(err));
    this.queue = new PathQueue({
      concurrency: opts.concurrency ?? 64,
      maxPending: this.maxPending,
      minIntervalMs: opts.minIntervalMs ?? 1000,
      work: (path, hint, ticket) => this.process(path, hint, ticket),
      onError: (err) => this.fail(err),
    });
  }

  /** Watches, then takes the current tree as the baseline (not recorded: the agent did not write it). */
  async start(): Promise<void> {
    this.started = true;
    this.realRoot = await realpath(this.root);
    if (!this.verifyAfter) this.verifyAfter = await defaultVerifyAfter();
    // A file over fileBytes goes to processLarge, which checks its size before reading a byte.
    const readerData = { root: this.root, realRoot: this.realRoot, limit: Math.min(READ_LIMIT, this.fileBytes) };
    this.reader = this.opts.readerThread === false ? inProcessReader(readerData) : await startReader(readerData);
    const ignore = this.opts.skip ? [] : DEFAULT_IGNORE.filter((top) => this.skip(`${top}/`));
    const source = this.opts.source ?? workerWatchSource({ root: this.realRoot, ignore });
    try {
      await source.start({ paths: (paths) => this.onPaths(paths), impaired: (reason) => this.onImpaired(reason) });
      this.source = source;
    } catch (err) {
      this.onImpaired(`no file watcher (${message(err)})`);
    }
    this.baseline = true;
    try {
      await this.walk('', { force: false, notified: true }, this.queue.ticket());
      await this.queue.barrier();
    } finally {
      this.baseline = false;
    }
    this.ready = true;
  }

  /**
   * Records every change made before this call that the watcher reports (no full rescan unless
   * the watcher failed to report the fence); resolves once those records are acknowledged.
   */
  async flush(): Promise<void> {
    if (!this.started || this.closed) return this.stopping;
    if (!(await this.fence())) await this.rescan();
    await this.recovery;
    await this.queue.barrier();
    await this.outbox.drain();
  }

  /** Full rescan against the last recorded state, then flush: every final state is recorded. */
  async reconcile(): Promise<void> {
    if (!this.started || this.closed) return this.stopping;
    await this.rescan();
    await this.queue.barrier();
    await this.outbox.drain();
  }

  /** Records the final state and stops watching; rejects with the first storage/recording error, if any. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.closing = true;
      if (this.started) {
        clearInterval(this.verifyTimer);
        clearInterval(this.pollTimer);
        await this.rescan();
        this.closed = true;
        await this.source?.close().catch(() => {});
        this.source = undefined;
        await this.queue.barrier();
        await this.outbox.drain();
        this.queue.close();
        await this.reader?.close();
      }
      this.closed = true;
      if (this.failure !== undefined) throw this.failure;
    })();
    return this.stopping;
  }

  // ── watching ────────────────────────────────────────────────────────────────────────────────

  /** Runs on the JS thread for each batch from the watcher thread; never throws. */
  private onPaths(paths: string[]): void {
    try {
      if (this.closed) return;
      this.noteBurst(paths.length);
      const ticket = this.queue.ticket();
      for (const path of paths) {
        if (this.fenceNames.has(path) || this.skip(path)) continue;
        this.notified?.add(path);
        if (!this.queue.offer(path, { force: true, notified: true }, ticket)) this.overflow(path);
      }
    } catch (err) {
      this.fail(err);
    }
  }

  /** From now on every flush rescans, and so does a timer; what was missed so far is found by a rescan now. */
  private onImpaired(reason: string): void {
    if (this.impaired || this.closing) return;
    this.impaired = true;
    this.gap(`${reason}: file changes are no longer all notified, the workspace is rescanned at every flush and every ${this.pollMs} ms`);
    this.pollTimer = setInterval(() => void (this.closing || this.rescan()), this.pollMs).unref();
    if (this.ready) this.recover(async () => {});
  }

  /** Runs `before`, then a rescan; flushes wait for both. (Not a queue unit: the rescan's own barrier would wait for it.) */
  private recover(before: () => Promise<void>): void {
    const previous = this.recovery;
    const recovery: Promise<void> = (async () => {
      await previous;
      await before();
      await this.rescan();
    })()
      .catch((err) => this.fail(err))
      .finally(() => {
        if (this.recovery === recovery) this.recovery = undefined;
      });
    this.recovery = recovery;
  }

  /** The pending set is full: notifications are dropped, a rescan after the queue drained records the final states. */
  private overflow(path: string): void {
    if (this.droppedPaths.size < DROPPED_MEMORY) this.droppedPaths.add(path);
    else this.droppedForgotten = true;
    if (this.dropped++ > 0) return; // a recovery is already on its way
    this.recover(async () => {
      await this.queue.room();
      const dropped = this.dropped;
      this.dropped = 0;
      this.gap(`more than ${this.maxPending} changed paths were waiting: ${dropped} notifications dropped, a full rescan records the final states`, dropped);
    });
  }

  /** inotify drops events silently when its queue overflows: after a burst that could have overflowed it, verify by a rescan. */
  private noteBurst(count: number): void {
    const now = Date.now();
    if (now - this.burst.lastAt > BURST_QUIET_MS) this.burst.count = 0;
    this.burst.lastAt = now;
    this.burst.count += count;
    if (this.burst.count < this.verifyAfter || this.verifyTimer || this.closing) return;
    this.burst.armedAt = now;
    this.verifyTimer = setInterval(() => {
      const at = Date.now();
      if (at - this.burst.lastAt < BURST_QUIET_MS && at - this.burst.armedAt < BURST_VERIFY_MS) return;
      clearInterval(this.verifyTimer);
      this.verifyTimer = undefined;
      this.burst.count = 0;
      if (!this.closing) void this.rescan();
    }, BURST_QUIET_MS / 4).unref();
  }

  /**
   * Resolves true once the watcher has reported a file created after this call (every earlier
   * change is then queued), false when it cannot tell within fenceTimeoutMs. Calls made while one
   * fence is out share the next one.
   */
  private fence(): Promise<boolean> {
    if (this.fenceNext) return this.fenceNext;
    const previous = this.fenceRunning ?? Promise.resolve(true);
    const next: Promise<boolean> = previous.then(() => {
      this.fenceNext = undefined;
      this.fenceRunning = next;
      return this.runFence();
    });
    this.fenceNext = next;
    void next.finally(() => {
      if (this.fenceRunning === next) this.fenceRunning = undefined;
    });
    return next;
  }

  private async runFence(): Promise<boolean> {
    if (!this.source || this.impaired || this.closed) return false;
    const name = `${FENCE_PREFIX}${randomUUID()}`;
    this.fenceNames.add(name);
    if (this.fenceNames.size > 64) this.fenceNames.delete(this.fenceNames.values().next().value!);
    return pTimeout(this.source.fence(name, this.fenceTimeoutMs).catch(() => false), { milliseconds: this.fenceTimeoutMs, fallback: () => false });
  }

  // ── rescans ─────────────────────────────────────────────────────────────────────────────────

  /** A full rescan; one at a time, and a request made while one runs is served by the next. */
  private rescan(): Promise<void> {
    if (this.rescanNext) return this.rescanNext;
    const previous = this.rescanRunning ?? Promise.resolve();
    // Never rejects: an error is kept for stop(), and the next rescan still runs.
    const next: Promise<void> = previous
      .then(() => {
        this.rescanNext = undefined;
        this.rescanRunning = next;
        return this.runRescan();
      })
      .catch((err) => this.fail(err));
    this.rescanNext = next;
    void next.finally(() => {
      if (this.rescanRunning === next) this.rescanRunning = undefined;
    });
    return next;
  }

  private async runRescan(): Promise<void> {
    const watching = this.source !== undefined && !this.impaired;
    const notified = (this.notified = new Set());
    const droppedBefore = this.droppedPaths;
    this.droppedPaths = new Set();
    let forgotten = this.droppedForgotten;
    this.droppedForgotten = false;
    const unnotified = (this.unnotified = new Set());
    try {
      if (watching) await this.fence(); // what was reported before the rescan is queued, hence "notified"
      await this.walk('', { force: false, notified: false }, this.queue.ticket());
      await this.queue.barrier();
      if (watching) await this.fence(); // a change the walk found may still be on its way from the watcher
    } finally {
      this.notified = undefined;
      this.unnotified = undefined;
    }
    forgotten ||= this.droppedForgotten;
    const reported = (path: string) => notified.has(path) || droppedBefore.has(path) || this.droppedPaths.has(path);
    const missed = [...unnotified].filter((path) => !reported(path)).length;
    if (watching && missed > 0 && !forgotten) {
      this.gap(`the file watcher missed ${missed} changes (inotify drops events when its queue overflows): recorded from a full rescan`, missed);
    }
  }

  /** Walks `dir` (see walkTree); barriers taken from now on wait for it. */
  private walk(dir: string, hint: Hint, ticket: number): Promise<void> {
    const release = this.queue.hold(ticket);
    return this.walks.add(() => this.walkTree(dir, hint, ticket)).finally(release);
  }

  /**
   * Walks `dir` (never through a link: see file-read-worker.ts), queueing each file that is new or
   * whose stat differs from the last recorded state, and each recorded file or directory no longer
   * there as such. Listings come from the reader thread; queueing waits for room and yields to the
   * event loop regularly, so a walk of 100k files never holds it.
   */
  private async walkTree(dir: string, hint: Hint, ticket: number): Promise<void> {
    const stack = [dir];
    // A directory may hold 100k entries: every loop over them gives the event loop a turn now and then.
    let steps = 0;
    const turn = () => ++steps % 2048 === 0;
    while (stack.length > 0) {
      const current = stack.pop()!;
      const at = (name: string) => (current === '' ? name : `${current}/${name}`);
      const files = new Map<string, ListEntry>();
      const dirs = new Set<string>();
      // null: gone, or under a link now; what was recorded under it is checked one by one below.
      for (const entry of (await this.reader!.list(current)) ?? []) {
        const path = at(entry.name);
        if (!this.fenceNames.has(path) && !this.skip(path)) {
          if (entry.dir) dirs.add(path);
          else files.set(path, entry);
        }
        if (turn()) await yieldToLoop();
      }
      const candidates: string[] = [];
      for (const name of this.known.names(current)) {
        const path = at(name);
        if (this.known.has(path) && !files.has(path)) candidates.push(path); // gone, or no longer a regular file
        if (this.known.hasDir(path) && !dirs.has(path)) candidates.push(path); // gone, or now a link or a file
        if (turn()) await yieldToLoop();
      }
      for (const [path, st] of files) {
        const known = this.known.get(path);
        if (!known || known.size !== st.size || known.mtimeMs !== st.mtimeMs || known.ino !== st.ino) candidates.push(path);
        if (turn()) await yieldToLoop();
      }
      for (const path of candidates) {
        await this.queue.add(path, hint, ticket);
        if (turn()) await yieldToLoop(); // awaiting a queue with room is only a microtask
      }
      stack.push(...dirs);
    }
  }

  // ── processing one path ─────────────────────────────────────────────────────────────────────

  private async process(path: string, hint: Hint, ticket: number): Promise<void> {
    const prev = this.known.get(path);
    const countOnly = this.countOnly(path);
    const result = await this.reader!.read({ path, force: hint.force, known: prev, ...(countOnly ? { statOnly: true } : {}) });
    switch (result.kind) {
      case 'unchanged':
      case 'unreadable':
        return;
      case 'error':
        throw Object.assign(new Error(`reading ${path}: ${result.message}`), { code: result.code });
      case 'absent':
        if (result.gone && !prev && hint.notified && !this.baseline && !this.known.hasDir(path) && !isHarnessTemp(path)) await this.transient(path, result.observedAt);
        await this.removeAll(path, result.observedAt, hint, ticket);
        return;
      case 'dir':
        if (prev) await this.remove(path, new Date().toISOString(), hint); // a file became a directory
        // A new or moved-in directory: what was recorded under this name and is gone, and what it holds now.
        void this.walk(path, { force: false, notified: hint.notified }, ticket).catch((err) => this.fail(err));
        return;
      case 'large':
        return this.processLarge(path, hint, ticket);
      case 'stat':
        if (this.known.hasDir(path)) await this.removeAll(path, result.observedAt, hint, ticket, false);
        this.index(path, { sha256: '', size: result.size, mtimeMs: result.mtimeMs, ino: result.ino });
        return;
      case 'file': {
        if (this.known.hasDir(path)) await this.removeAll(path, result.observedAt, hint, ticket, false); // a directory became a file
        const known: Known = { sha256: result.sha256, size: result.size, mtimeMs: result.mtimeMs, ino: result.ino };
        if (this.baseline || !result.body) {
          this.index(path, known); // same content as recorded (or the baseline): nothing to record
          return;
        }
        const body = Buffer.from(result.body.buffer, result.body.byteOffset, result.body.byteLength);
        const key = await this.store(body, known);
        await this.recordChange(path, prev, known, key!, result.observedAt, hint, result.links);
      }
    }
  }

  /** A file over the reader's limit, read here with the same checks; over 8 MiB it is streamed, never held. */
  private async processLarge(path: string, hint: Hint, ticket: number): Promise<void> {
    const opened = await openInWorkspace(this.root, this.realRoot, path);
    if (opened.kind !== 'file') {
      // It changed kind since the reader looked: look again.
      if (opened.kind !== 'unreadable') this.queue.offer(path, { force: true, notified: hint.notified }, ticket);
      return;
    }
    const { file } = opened;
    try {
      const prev = this.known.get(path);
      const observedAt = new Date().toISOString();
      // Its logical size counts before a byte is read (a sparse file of 1 TB reaches the quota here).
      this.checkDisk(this.known.bytesWith(path, file.st.ino, file.st.size));
      if (file.st.size > this.fileBytes) return await this.notArchived(path, prev, file.st, observedAt, hint, ticket);
      const content = await file.snapshot();
      // The stat was taken before reading: a write during the read shows as a stat change later.
      const known: Known = { sha256: content.sha256, size: content.size, mtimeMs: file.st.mtimeMs, ino: file.st.ino };
      if (this.known.hasDir(path)) await this.removeAll(path, observedAt, hint, ticket, false);
      if (this.baseline || prev?.sha256 === content.sha256) {
        this.index(path, known);
        return;
      }
      const key = await this.store(content.body ?? file.stream(), known);
      if (key === null) {
        this.queue.offer(path, { force: true, notified: hint.notified }, ticket); // changed while being stored: read again
        return;
      }
      await this.recordChange(path, prev, known, key, observedAt, hint, file.st.nlink > 1 ? file.st.nlink : undefined);
    } finally {
      file.close();
    }
  }

  /**
   * A file over fileBytes: never read. Its size is indexed (it counts against diskBytes) and, when
   * its stat changed, recorded as a FileChanged without content, after a LimitReached for its path.
   */
  private async notArchived(path: string, prev: Known | undefined, st: Stats, observedAt: string, hint: Hint, ticket: number): Promise<void> {
    if (this.known.hasDir(path)) await this.removeAll(path, observedAt, hint, ticket, false);
    const known: Known = { sha256: '', size: st.size, mtimeMs: st.mtimeMs, ino: st.ino };
    const same = prev !== undefined && prev.sha256 === '' && prev.size === st.size && prev.mtimeMs === st.mtimeMs && prev.ino === st.ino;
    if (this.baseline || same) {
      this.index(path, known);
      return;
    }
    if (!this.overLimit.has(path)) {
      this.overLimit.add(path);
      await this.limitReached({ limit: 'fileBytes', value: st.size, max: this.fileBytes, scope: path, action: 'not archived', observedAt });
    }
    await this.recordChange(path, prev, known, undefined, observedAt, hint);
  }

  private async recordChange(path: string, prev: Known | undefined, known: Known, key: string | undefined, observedAt: string, hint: Hint, links?: number): Promise<void> {
    this.index(path, known, false);
    if (known.sha256) this.overLimit.delete(path);
    if (!hint.notified) this.unnotified?.add(path);
    const event: FileChanged = {
      path,
      op: prev ? 'modify' : 'create',
      ...(known.sha256 ? { sha256: known.sha256 } : {}),
      size: known.size,
      ...(prev?.sha256 ? { previousSha256: prev.sha256 } : {}),
      ...(key !== undefined ? { key } : {}),
      ...(links !== undefined ? { links } : {}),
      observedAt,
    };
    await this.outbox.send('FileChanged', event);
    this.checkDisk(this.known.bytes); // after the change that took the workspace over the quota
  }

  /** Indexes a file's state; its size counts against diskBytes (checked unless the caller records first). */
  private index(path: string, known: Known, check = true): void {
    this.known.set(path, known);
    if (check) this.checkDisk(this.known.bytes);
  }

  /** The first time the workspace's logical size exceeds diskBytes: LimitReached, and the run is told to stop the agent. */
  private checkDisk(total: number): void {
    if (this.diskReached || total <= this.diskBytes) return;
    this.diskReached = true;
    const action = this.opts.onLimit ? 'stopped the agent' : 'recorded';
    void this.limitReached({ limit: 'diskBytes', value: total, max: this.diskBytes, action, observedAt: new Date().toISOString() });
  }

  private async limitReached(data: LimitReached): Promise<void> {
    try {
      const told = this.opts.onLimit?.(data.limit, data);
      if (told instanceof Promise) told.catch((err: unknown) => this.fail(err));
    } catch (err) {
      this.fail(err);
    }
    await this.outbox.send('LimitReached', data);
  }

  /** Stores the content, a few puts at a time; null when a streamed file changed between hashing and storing. */
  private async store(body: Buffer | Readable, known: Known): Promise<string | null> {
    try {
      const put = await this.puts.add(() => this.opts.artifacts.put(body, { sha256: known.sha256, size: known.size }));
      return put!.key; // p-queue types a result as possibly void only for tasks with a timeout
    } catch (err) {
      // By name: adapters may raise it from another module instance.
      if ((err as Error)?.name === 'ArtifactIntegrityError' || isMissing(err)) return null;
      throw err;
    }
  }

  /** `path` and everything recorded under it are no longer in the workspace. */
  private async removeAll(path: string, observedAt: string, hint: Hint, ticket: number, self = true): Promise<void> {
    if (self && this.known.has(path)) await this.remove(path, observedAt, hint);
    let n = 0;
    for (const child of this.known.under(path)) {
      // Being processed right now: its own run would record it after our delete; it looks again once done.
      if (this.queue.busy(child)) this.queue.offer(child, { force: false, notified: hint.notified }, ticket);
      else await this.remove(child, observedAt, hint);
      if (++n % 256 === 0) await yieldToLoop(); // a removed tree of 100k files is recorded in slices
    }
  }

  private async remove(path: string, observedAt: string, hint: Hint): Promise<void> {
    const prev = this.known.get(path);
    if (!prev) return;
    this.known.delete(path);
    this.overLimit.delete(path);
    if (this.baseline || this.countOnly(path)) return;
    if (!hint.notified) this.unnotified?.add(path);
    await this.outbox.send('FileChanged', { path, op: 'delete', ...(prev.sha256 ? { previousSha256: prev.sha256 } : {}), observedAt });
  }

  /**
   * A path notified (created, or moved in) and gone by the time it was read: a fact, without content
   * (whatever ran from it is captured at its exec: ProcessStarted.script/exe). Bounded per run.
   */
  private async transient(path: string, observedAt: string): Promise<void> {
    if (++this.transients > MAX_TRANSIENTS) {
      if (this.transients === MAX_TRANSIENTS + 1) this.gap(`more than ${MAX_TRANSIENTS} files were created and removed before they could be read: later ones are not recorded`);
      return;
    }
    await this.outbox.send('TransientFileRecorded', { path, note: 'created and removed before it could be read', observedAt });
  }

  private gap(reason: string, count?: number): void {
    try {
      const result = this.opts.onGap?.(reason, count);
      if (result instanceof Promise) result.catch((err: unknown) => this.fail(err));
    } catch (err) {
      this.fail(err);
    }
  }

  private fail(err: unknown): void {
    this.failure ??= err;
  }
}

/**
 * Records handed to the run recorder in the order they are to be stored, without awaiting each
 * (the recorder batches them); at most `limit` unacknowledged at once.
 */
class Outbox {
  private readonly unacked: Array<{ promise: Promise<unknown>; settled: boolean }> = [];
  private head = 0;
  private count = 0;

  constructor(
    private readonly record: Recorder,
    private readonly limit: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  async send<T extends 'FileChanged' | 'LimitReached' | 'TransientFileRecorded'>(type: T, data: EventData<T>): Promise<void> {
    let promise: Promise<unknown>;
    try {
      promise = Promise.resolve(this.record(type, data));
    } catch (err) {
      promise = Promise.reject(err);
    }
    const entry = { promise, settled: false };
    this.unacked.push(entry);
    this.count++;
    promise
      .catch((err: unknown) => this.onError(err))
      .finally(() => {
        entry.settled = true;
        this.count--;
        this.trim();
      });
    while (this.count > this.limit) await this.unacked[this.head].promise.catch(() => {});
  }

  /** Resolves once every record sent so far is acknowledged (or failed). */
  async drain(): Promise<void> {
    await Promise.allSettled(this.unacked.slice(this.head).map((e) => e.promise));
  }

  private trim(): void {
    while (this.head < this.unacked.length && this.unacked[this.head].settled) this.head++;
    if (this.head > 1024 && this.head * 2 > this.unacked.length) {
      this.unacked.splice(0, this.head);
      this.head = 0;
    }
  }
}

/** An eighth of the kernel's inotify queue: a file written once makes at least two events, often more. */
async function defaultVerifyAfter(): Promise<number> {
  const queued = Number((await readFile('/proc/sys/fs/inotify/max_queued_events', 'utf8').catch(() => '16384')).trim());
  return Math.max(256, Math.floor((Number.isFinite(queued) ? queued : 16384) / 8));
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
