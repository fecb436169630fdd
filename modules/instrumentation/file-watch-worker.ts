import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readlinkSync, unlinkSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';

/**
 * The file watcher's worker thread: one inotify watch per workspace directory (Node's fs.watch,
 * whose inotify reads run on this thread's own event loop), posting batches of workspace-relative
 * paths that may have changed to the main thread (protocol below, used by file-watch-source.ts).
 *
 * Why a thread: libuv reads inotify until the queue is empty and calls back once per event, so on
 * the harness's loop a fast writer could hold it for as long as it writes. Why not a recursive
 * watcher library: they add a watch on a new directory when notified of it, and files or
 * subdirectories created in it before that are never reported again (`mkdir -p a/b && echo > a/b/f`
 * leaves a/b unwatched for good). Here a new directory is watched first and listed second, so every
 * entry is either reported by its watch or found by the listing; a moved directory's watches are
 * dropped and its new location is watched and listed afresh, so no watch reports a stale path.
 *
 * Never outside the workspace: a directory is opened O_NOFOLLOW|O_DIRECTORY, the kernel's path of
 * the descriptor must be the expected one, and both the watch and the listing go through that
 * descriptor (/proc/self/fd/N), so a link swapped in at any moment is never watched or listed.
 *
 * inotify drops events silently when its queue (fs.inotify.max_queued_events) overflows, and libuv
 * does not report the overflow: the main thread verifies bursts by rescans (file-watcher.ts).
 */

export interface WatchWorkerData {
  /** The workspace root, a real path (no link in it). */
  root: string;
  /** Top-level directories not watched (read-only inputs, checkpoints). */
  ignore: string[];
  /** Paths are posted at most this long after their event... */
  batchMs: number;
  /** ...or as soon as this many are waiting. */
  maxBatch: number;
}

export type ToWatchWorker = { t: 'fence'; name: string };

export type FromWatchWorker =
  | { t: 'ready'; dirs: number }
  | { t: 'paths'; paths: string[] }
  /** Every event before the fence file's creation has been posted (ok: false when it could not be created). */
  | { t: 'fence'; name: string; ok: boolean }
  /** Some directory could not be watched (e.g. the inotify watch limit): notifications are incomplete from now on. */
  | { t: 'impaired'; reason: string };

interface Watched {
  watcher: FSWatcher;
  ino: number;
  /** Names of watched subdirectories. */
  children: Set<string>;
}

class TreeWatcher {
  private readonly watched = new Map<string, Watched>();
  private readonly ignore: Set<string>;
  private batch = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  /** Fence name → whether its creation was already seen (then the next event is its removal). */
  private readonly fences = new Map<string, boolean>();
  private impaired = false;

  constructor(
    private readonly data: WatchWorkerData,
    private readonly post: (msg: FromWatchWorker) => void,
  ) {
    this.ignore = new Set(data.ignore);
  }

  start(): void {
    this.addTree('', false);
    if (!this.watched.has('')) throw new Error(`cannot watch ${this.data.root}`);
    this.post({ t: 'ready', dirs: this.watched.size });
  }

  fence(name: string): void {
    this.fences.set(name, false);
    try {
      closeSync(openSync(join(this.data.root, name), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600));
    } catch {
      this.fences.delete(name);
      this.post({ t: 'fence', name, ok: false });
    }
  }

  private onEvent(dir: string, type: string, name: string | null): void {
    if (!this.watched.has(dir)) return; // closed while its events were queued
    if (name === null) return;
    if (dir === '' && this.fences.has(name)) return this.fenceEvent(name);
    if (dir === '' && this.ignore.has(name)) return;
    const path = dir === '' ? name : `${dir}/${name}`;
    this.emit(path);
    // A created, removed or renamed entry may be a directory to watch, or one no longer to watch.
    if (type === 'rename') this.recheck(path);
  }

  private fenceEvent(name: string): void {
    if (this.fences.get(name)) {
      this.fences.delete(name); // its removal
      return;
    }
    this.fences.set(name, true);
    this.send(); // inotify is ordered: everything before the fence is in this batch or an earlier one
    this.post({ t: 'fence', name, ok: true });
    try {
      unlinkSync(join(this.data.root, name));
    } catch {
      this.fences.delete(name);
    }
  }

  private recheck(path: string): void {
    let st;
    try {
      st = lstatSync(join(this.data.root, path));
    } catch {
      st = undefined;
    }
    const entry = this.watched.get(path);
    if (st?.isDirectory()) {
      if (entry?.ino === st.ino) return;
      if (entry) this.closeTree(path); // another directory now has this name
      this.addTree(path, true);
    } else if (entry) {
      this.closeTree(path); // removed, moved away (its new name gets its own event), or replaced by a link
    }
  }

  /** Watches `rel` and every directory under it, each watched before it is listed; with `report`, posts every entry found. */
  private addTree(rel: string, report: boolean): void {
    const stack = [rel];
    while (stack.length > 0) {
      const dir = stack.pop()!;
      if (this.watched.has(dir)) continue;
      const abs = dir === '' ? this.data.root : join(this.data.root, dir);
      let fd: number;
      try {
        fd = openSync(abs, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      } catch {
        continue; // gone, a link, or not a directory any more: its parent's watch reports that
      }
      try {
        const via = `/proc/self/fd/${fd}`;
        if (readlinkSync(via) !== abs) continue; // a parent was swapped for a link
        const ino = fstatSync(fd).ino;
        let watcher: FSWatcher;
        try {
          watcher = watch(via, { persistent: false }, (type, name) => this.onEvent(dir, type, name));
        } catch (err) {
          this.impair(`cannot watch ${dir || '.'}: ${(err as Error).message}`);
          continue;
        }
        watcher.on('error', (err) => this.impair(`watch on ${dir || '.'} failed: ${err.message}`));
        this.watched.set(dir, { watcher, ino, children: new Set() });
        if (dir !== '') this.watched.get(parentOf(dir))?.children.add(dir.slice(dir.lastIndexOf('/') + 1));
        for (const entry of readdirSync(via, { withFileTypes: true })) {
          if (dir === '' && (this.ignore.has(entry.name) || this.fences.has(entry.name))) continue;
          const path = dir === '' ? entry.name : `${dir}/${entry.name}`;
          if (entry.isDirectory()) stack.push(path);
          else if (report) this.emit(path);
        }
      } catch {
        // Vanished while being listed: its parent's watch reports that.
      } finally {
        closeSync(fd);
      }
    }
  }

  private closeTree(rel: string): void {
    const entry = this.watched.get(rel);
    if (!entry) return;
    for (const child of entry.children) this.closeTree(`${rel}/${child}`);
    entry.watcher.close();
    this.watched.delete(rel);
    if (rel !== '') this.watched.get(parentOf(rel))?.children.delete(rel.slice(rel.lastIndexOf('/') + 1));
  }

  private impair(reason: string): void {
    if (this.impaired) return; // one report is enough: from now on the main thread rescans
    this.impaired = true;
    this.post({ t: 'impaired', reason });
  }

  private emit(path: string): void {
    this.batch.add(path);
    if (this.batch.size >= this.data.maxBatch) this.send();
    else this.timer ??= setTimeout(() => this.send(), this.data.batchMs);
  }

  private send(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.batch.size === 0) return;
    const paths = [...this.batch];
    this.batch = new Set();
    this.post({ t: 'paths', paths });
  }
}

function parentOf(path: string): string {
  const cut = path.lastIndexOf('/');
  return cut < 0 ? '' : path.slice(0, cut);
}

if (parentPort) {
  const port = parentPort;
  const tree = new TreeWatcher(workerData as WatchWorkerData, (msg) => port.postMessage(msg));
  port.on('message', (msg: ToWatchWorker) => tree.fence(msg.name));
  tree.start();
}
