import type { Worker } from 'node:worker_threads';
import { startWorker } from '../settings/worker-thread.js';
import type { FromWatchWorker, ToWatchWorker, WatchWorkerData } from './file-watch-worker.js';

/** What a watch source tells the file watcher. */
export interface WatchHandlers {
  /** Workspace-relative paths that may have changed (created, written, removed, renamed; files or directories). */
  paths(paths: string[]): void;
  /** Notifications are incomplete from now on (a directory could not be watched, the watcher died). */
  impaired(reason: string): void;
}

/** Where change notifications come from (the worker below; tests use fakes). */
export interface WatchSource {
  start(handlers: WatchHandlers): Promise<void>;
  /**
   * Creates the file `name` in the workspace root and resolves true once its creation was reported,
   * every earlier change having been passed to `paths` before; false when it cannot tell within
   * `timeoutMs`.
   */
  fence(name: string, timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export interface WorkerWatchOptions {
  /** The workspace root as a real path. */
  root: string;
  ignore: string[];
  batchMs?: number;
  maxBatch?: number;
}

/** The per-directory inotify watcher of file-watch-worker.ts, in a worker thread. */
export function workerWatchSource(opts: WorkerWatchOptions): WatchSource {
  let worker: Worker | undefined;
  let handlers: WatchHandlers | undefined;
  let closing = false;
  const fences = new Map<string, (ok: boolean) => void>();
  const settle = (name: string, ok: boolean) => {
    fences.get(name)?.(ok);
    fences.delete(name);
    if (fences.size === 0) worker?.unref();
  };
  const lost = (reason: string) => {
    for (const resolve of fences.values()) resolve(false);
    fences.clear();
    if (!closing) handlers?.impaired(reason);
  };
  return {
    start(h) {
      handlers = h;
      const data: WatchWorkerData = { root: opts.root, ignore: opts.ignore, batchMs: opts.batchMs ?? 25, maxBatch: opts.maxBatch ?? 2000 };
      return new Promise<void>((resolve, reject) => {
        let ready = false;
        worker = startWorker(new URL('./file-watch-worker.js', import.meta.url), data);
        worker.on('message', (msg: FromWatchWorker) => {
          if (msg.t === 'paths') h.paths(msg.paths);
          else if (msg.t === 'fence') settle(msg.name, msg.ok); else if (msg.t === 'impaired') h.impaired(msg.reason);
          else {
            ready = true;
            worker!.unref(); // the agent keeps the harness alive, not its watcher
            resolve();
          }
        });
        worker.on('error', (err) => (ready ? lost(`the file watcher's thread failed: ${err.message}`) : reject(err)));
        worker.on('exit', () => (ready ? lost("the file watcher's thread exited") : reject(new Error("the file watcher's thread exited before it was ready"))));
      });
    },
    fence(name, timeoutMs) {
      if (!worker || closing) return Promise.resolve(false);
      return new Promise<boolean>((resolve) => {
        // Lost with dropped events, a fence would never be answered: give up on it, and let the thread be unref'd again.
        const timer = setTimeout(() => settle(name, false), timeoutMs);
        fences.set(name, (ok) => {
          clearTimeout(timer);
          resolve(ok);
        });
        worker!.ref(); // an awaited fence keeps the process alive
        worker!.postMessage({ t: 'fence', name } satisfies ToWatchWorker);
      });
    },
    async close() {
      closing = true;
      lost('closed');
      // Terminating the thread closes its loop, and with it every watch (one inotify descriptor).
      await worker?.terminate();
    },
  };
}

