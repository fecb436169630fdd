import PQueue from 'p-queue';

/**
 * Runs tasks one at a time per key (e.g. per device, or per DataSource object); different keys run in
 * parallel. A failed task rejects its caller only; the next one still runs.
 */
export class KeyedMutex<K = string> {
  private readonly queues = new Map<K, PQueue>();

  run<R>(key: K, work: () => Promise<R>): Promise<R> {
    let queue = this.queues.get(key);
    if (!queue) {
      queue = new PQueue({ concurrency: 1 });
      this.queues.set(key, queue);
      // Forget a key once its queue is drained, so keys (run ids, sessions) do not accumulate.
      queue.on('idle', () => {
        if (this.queues.get(key) === queue && queue!.size === 0 && queue!.pending === 0) this.queues.delete(key);
      });
    }
    return queue.add(work);
  }
}
