import PQueue from 'p-queue';
import type { WorkerInfo } from '../ledger/events/catalog.js';
import { jobId, type CampaignJob, type CampaignQueue, type JobHandler } from './campaign-queue.port.js';

export interface LocalQueueOptions {
  /** Runs at once. */
  concurrency: number;
  handler: JobHandler;
  worker: WorkerInfo;
  /** Aborted on an operator interrupt: running jobs stop and hand back, queued ones are dropped (resume runs them). */
  signal?: AbortSignal;
  /** A handler that throws (its outcome could not be recorded): said, and the pool goes on. */
  onError?: (job: CampaignJob, err: unknown) => void;
}

/**
 * The embedded queue: the scheduling process runs the jobs itself, `concurrency` at a time (p-queue).
 * Nothing here outlives the process; the campaign's stream does, and `campaign resume` re-enqueues
 * from it. CPU jobs only: GPU jobs get no device here (a GPU task's run sees the host's GPUs).
 */
export class LocalQueue implements CampaignQueue {
  readonly kind = 'local' as const;
  private readonly pool: PQueue;
  /** Ids of the jobs waiting or running (enqueueing is idempotent). */
  private readonly held = new Set<string>();
  private readonly dropped = new Set<string>();

  constructor(private readonly o: LocalQueueOptions) {
    this.pool = new PQueue({ concurrency: o.concurrency });
    o.signal?.addEventListener('abort', () => this.pool.clear());
  }

  async enqueue(jobs: readonly CampaignJob[]): Promise<void> {
    if (this.o.signal?.aborted) return;
    for (const job of jobs) {
      const id = jobId(job);
      if (this.held.has(id) || this.dropped.has(job.campaignId)) continue;
      this.held.add(id);
      void this.pool.add(() => this.execute(job)).finally(() => this.held.delete(id));
    }
  }

  private async execute(job: CampaignJob): Promise<void> {
    if (this.dropped.has(job.campaignId)) return;
    const signal = this.o.signal ?? new AbortController().signal;
    try {
      await this.o.handler(job, { worker: this.o.worker, gpus: [], signal });
    } catch (err) {
      this.o.onError?.(job, err);
    }
  }

  async holds(job: CampaignJob): Promise<boolean> {
    return this.held.has(jobId(job));
  }

  async drop(campaignId: string): Promise<void> {
    this.dropped.add(campaignId);
  }

  /** Resolves once every job enqueued so far (and the retries they enqueue) has finished. */
  async idle(): Promise<void> {
    while (this.pool.size > 0 || this.pool.pending > 0) await this.pool.onIdle();
  }

  async close(): Promise<void> {
    this.pool.clear();
    await this.pool.onIdle();
  }
}
