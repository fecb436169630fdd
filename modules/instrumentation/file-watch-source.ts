import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
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
   * every earlier change having been passed to `paths` before; false when it cannot tell.
   */
  fence(name: string): Promise<boolean>;
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
  const lost = (reason: string) => {
    for (const resolve of fences.values()) resolve(false);
    fences.clear();
    if (!closing) handlers?.impaired(reason);
  };
  return {
    start(h) {
      handlers = h;
      const data: WatchWorkerData = { root: opts.root, ignore: opts.ignore, batchMs: opts.batchMs ?? 25, maxBatch: opts.maxBatch ?? 10_000 };
      return new Promise<void>((resolve, reject) => {
        let ready = false;
        worker = startWorker(data);
        worker.on('message', (msg: FromWatchWorker) => {
          if (msg.t === 'paths') h.paths(msg.paths);
          else if (msg.t === 'fence') {
            fences.get(msg.name)?.(msg.ok);
            fences.delete(msg.name);
          } else if (msg.t === 'impaired') h.impaired(msg.reason);
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
    fence(name) {
      if (!worker || closing) return Promise.resolve(false);
      return new Promise<boolean>((resolve) => {
        fences.set(name, resolve);
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

/**
 * Starts the worker from wherever this module runs: the compiled .js next to it in dist/, or, when
 * running from the TypeScript sources (ts-jest, tsx), the .ts file loaded through tsx (a dev
 * dependency), since a worker thread does not inherit the test runner's transform. Same approach
 * as process-tracer.ts.
 */
function startWorker(workerData: WatchWorkerData): Worker {
  const fromSources = import.meta.url.endsWith('.ts');
  const entry = new URL(`./file-watch-worker.${fromSources ? 'ts' : 'js'}`, import.meta.url);
  if (!fromSources) return new Worker(entry, { workerData });
  const boot = `const { tsImport } = await import(${JSON.stringify(tsxEsmApi())});\nawait tsImport(${JSON.stringify(entry.href)}, ${JSON.stringify(import.meta.url)});`;
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), { workerData });
}

/** File URL of tsx's ESM API (`tsx/esm/api`, import condition), read from its package exports. */
function tsxEsmApi(): string {
  const manifest = createRequire(import.meta.url).resolve('tsx/package.json');
  const exported = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports?: Record<string, unknown> }).exports?.['./esm/api'] as
    | { import?: string | { default?: string } }
    | undefined;
  const target = typeof exported?.import === 'string' ? exported.import : exported?.import?.default;
  if (!target) throw new Error('running from TypeScript sources needs tsx (a dev dependency) for the file watcher worker');
  return pathToFileURL(join(dirname(manifest), target)).href;
}
