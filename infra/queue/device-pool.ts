// The GPUs one worker advertises, handed to its jobs: a job needing n gets n device ids no other job of
// this worker holds, first come first served, and gives them back when it returns. Gradings on one
// device are serialised separately, by the grading service.

interface Waiter {
  n: number;
  resolve: (ids: string[]) => void;
}

export class DevicePool {
  private readonly free: Set<string>;
  private readonly waiters: Waiter[] = [];

  constructor(private readonly ids: readonly string[]) {
    this.free = new Set(ids);
  }

  get size(): number {
    return this.ids.length;
  }

  get available(): number {
    return this.free.size;
  }

  /** n free device ids (in the advertised order); waits while they are held. Rejects when `signal` aborts first. */
  acquire(n: number, signal: AbortSignal): Promise<string[]> {
    if (!Number.isInteger(n) || n < 1 || n > this.ids.length) return Promise.reject(new Error(`a job needs ${n} GPUs; this worker has ${this.ids.length}`));
    if (signal.aborted) return Promise.reject(abortError(signal));
    if (this.waiters.length === 0 && this.free.size >= n) return Promise.resolve(this.take(n));
    return new Promise<string[]>((resolve, reject) => {
      const waiter: Waiter = {
        n,
        resolve: (ids) => {
          signal.removeEventListener('abort', onAbort);
          resolve(ids);
        },
      };
      const onAbort = () => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(abortError(signal));
        this.handOut(); // a large job that gave up may have been blocking smaller ones
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  release(ids: readonly string[]): void {
    for (const id of ids) if (this.ids.includes(id)) this.free.add(id);
    this.handOut();
  }

  /** Serves waiters in arrival order: a later, smaller job does not overtake one that waits for more devices. */
  private handOut(): void {
    while (this.waiters.length > 0 && this.free.size >= this.waiters[0].n) {
      const waiter = this.waiters.shift()!;
      waiter.resolve(this.take(waiter.n));
    }
  }

  private take(n: number): string[] {
    const ids = this.ids.filter((id) => this.free.has(id)).slice(0, n);
    for (const id of ids) this.free.delete(id);
    return ids;
  }
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('stopped while waiting for GPUs');
}
