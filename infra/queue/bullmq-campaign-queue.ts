import { Job, Queue, type JobsOptions } from 'bullmq';
import { jobId, type CampaignJob, type CampaignQueue } from '../../modules/campaigns/campaign-queue.port.js';
import { bullConnection, checkQueue, probeClient, queueOf, queuePrefix, type RedisQueueOptions } from './redis-connection.js';

// The campaign queue on Redis, through BullMQ: `a2rl campaign run --queue redis://…` puts jobs here and
// `a2rl worker` processes (redis-worker.ts), on any machine, take them. The queue only distributes
// work; the campaign's stream in the ledger says what was done, so a lost queue is rebuilt from it.
//
// BullMQ's Queue is used directly rather than through @nestjs/bullmq's BullModule.registerQueue: the
// queues a campaign needs (one per GPU count) are known only when its jobs are, and this adapter is
// opened by a command like the other stores, outside the Nest container.

/** The job's BullMQ name (all jobs are alike; the queue says what they need). */
export const JOB_NAME = 'campaign-run';

/**
 * A job whose handler throws (the ledger briefly unreachable, a bug) is tried again a few times by
 * BullMQ; the handler is idempotent against the campaign stream. Jobs leave Redis when they end, so
 * a later `enqueue` of the same id (resume) adds it again and the handler skips a cell that is done.
 */
const JOB_OPTIONS: JobsOptions = { removeOnComplete: true, removeOnFail: true, attempts: 3, backoff: { type: 'exponential', delay: 10_000 } };

/** The states in which a job is still only waiting (`drop` removes those; a running job ends by itself). */
const NOT_STARTED = new Set(['waiting', 'delayed', 'prioritized', 'paused', 'waiting-children']);

/** Opens the queue at `url` after checking that Redis answers (a one-line error within seconds otherwise). */
export async function openRedisCampaignQueue(url: string, opts: RedisQueueOptions = {}): Promise<CampaignQueue> {
  const prefix = queuePrefix(opts.prefix);
  await checkQueue(url);
  return new RedisCampaignQueue(url, prefix);
}

class RedisCampaignQueue implements CampaignQueue {
  readonly kind = 'redis' as const;
  private readonly queues = new Map<string, Queue>();

  constructor(
    private readonly url: string,
    private readonly prefix: string,
  ) {}

  async enqueue(jobs: readonly CampaignJob[]): Promise<void> {
    const byQueue = new Map<string, CampaignJob[]>();
    for (const job of jobs) {
      const batch = byQueue.get(queueOf(job)) ?? [];
      batch.push(job);
      byQueue.set(queueOf(job), batch);
    }
    for (const [name, batch] of byQueue) {
      // BullMQ skips a job whose id it still holds (waiting, delayed or running): enqueueing is idempotent.
      await this.queue(name).addBulk(batch.map((job) => ({ name: JOB_NAME, data: toData(job), opts: { ...JOB_OPTIONS, jobId: jobId(job) } })));
    }
  }

  async drop(campaignId: string): Promise<void> {
    for (const { queueName, id } of await this.campaignJobKeys(campaignId)) {
      const job = await Job.fromId(this.queue(queueName), id);
      if (!job || !NOT_STARTED.has(await job.getState())) continue;
      // A worker may take it meanwhile: then it is locked, remove() refuses, and the handler sees the cancellation.
      await job.remove().catch(() => undefined);
    }
  }

  async holds(job: CampaignJob): Promise<boolean> {
    const found = await Job.fromId(this.queue(queueOf(job)), jobId(job));
    if (!found) return false;
    const state = await found.getState();
    return state === 'active' || NOT_STARTED.has(state);
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
  }

  private queue(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: bullConnection(this.url), prefix: this.prefix });
      this.queues.set(name, queue);
    }
    return queue;
  }

  /** The campaign's jobs in every campaign queue: their hashes are `<prefix>:<queue>:<campaignId>.<cell>.<attempt>`. */
  private async campaignJobKeys(campaignId: string): Promise<{ queueName: string; id: string }[]> {
    const client = probeClient(this.url);
    const found: { queueName: string; id: string }[] = [];
    try {
      await client.connect();
      const match = `${globEscape(this.prefix)}:campaign-*:${globEscape(campaignId)}.*`;
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        cursor = next;
        for (const key of keys) {
          const parts = key.split(':');
          if (parts.length === 3) found.push({ queueName: parts[1], id: parts[2] });
        }
      } while (cursor !== '0');
    } finally {
      client.disconnect();
    }
    return found;
  }
}

/** Exactly the port's fields (a caller's object may carry more). */
function toData(job: CampaignJob): CampaignJob {
  return { campaignId: job.campaignId, cell: job.cell, attempt: job.attempt, gpus: job.gpus };
}

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
