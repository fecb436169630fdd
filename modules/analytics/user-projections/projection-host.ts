import type { Worker } from 'node:worker_threads';
import { startWorker } from '../../settings/worker-thread.js';
import type { UserProjectionMeta } from './definition.js';

// The host side of a user projection's worker thread: every request shares one deadline, and a
// projection that passes it (a loop that never returns, a fold too slow for the ledger) is
// terminated and reported in one line. The thread gets its own heap limit, so a runaway allocation
// ends the thread, not the process.

export class UserProjectionError extends Error {
  override readonly name = 'UserProjectionError';
}

type Reply = { kind: 'ready'; meta: UserProjectionMeta } | { kind: 'done' } | { kind: 'rows'; rows: (string | number | boolean | null)[][]; state: unknown } | { kind: 'error'; message: string };

export class ProjectionHost {
  private pending: { resolve: (r: Reply) => void; reject: (e: Error) => void } | null = null;
  private failure: Error | null = null;

  private constructor(
    private readonly worker: Worker,
    private readonly label: string,
    private readonly deadline: number,
    private readonly timeoutMs: number,
  ) {
    worker.on('message', (reply: Reply) => this.settle(reply.kind === 'error' ? new UserProjectionError(`${label}: ${reply.message}`) : reply));
    worker.on('error', (err) => this.settle(new UserProjectionError(`${label}: ${err.message.split('\n')[0]}`)));
    worker.on('exit', (code) => this.settle(new UserProjectionError(`${label}: its thread exited (code ${code})`)));
  }

  /** Loads the module in a new thread; resolves with its meta once the definition checked out. */
  static async open(file: string, label: string, timeoutMs: number): Promise<{ host: ProjectionHost; meta: UserProjectionMeta }> {
    const worker = startWorker(new URL('./projection-worker.js', import.meta.url), { file }, { resourceLimits: { maxOldGenerationSizeMb: 512 }, env: {}, stdout: true, stderr: true });
    const host = new ProjectionHost(worker, label, Date.now() + timeoutMs, timeoutMs);
    const reply = await host.next();
    if (reply.kind !== 'ready') throw new UserProjectionError(`${label}: unexpected reply ${reply.kind}`);
    return { host, meta: reply.meta };
  }

  async setState(state: unknown): Promise<void> {
    this.worker.postMessage({ kind: 'state', state });
    await this.next();
  }

  async feed(events: readonly unknown[]): Promise<void> {
    this.worker.postMessage({ kind: 'events', events });
    await this.next();
  }

  async rows(): Promise<{ rows: (string | number | boolean | null)[][]; state: unknown }> {
    this.worker.postMessage({ kind: 'rows' });
    const reply = await this.next();
    if (reply.kind !== 'rows') throw new UserProjectionError(`${this.label}: unexpected reply ${reply.kind}`);
    return reply;
  }

  async close(): Promise<void> {
    this.failure ??= new UserProjectionError(`${this.label}: closed`);
    await this.worker.terminate();
  }

  private next(): Promise<Reply> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<Reply>((resolve, reject) => {
      const left = this.deadline - Date.now();
      const timer = setTimeout(() => {
        this.settle(new UserProjectionError(`${this.label}: stopped after ${this.timeoutMs / 1000} s (its time limit); nothing of it was written`));
        void this.worker.terminate();
      }, Math.max(0, left));
      this.pending = {
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
    });
  }

  private settle(reply: Reply | Error): void {
    if (reply instanceof Error) this.failure ??= reply;
    const p = this.pending;
    this.pending = null;
    if (!p) return;
    if (reply instanceof Error) p.reject(this.failure ?? reply);
    else p.resolve(reply);
  }
}
