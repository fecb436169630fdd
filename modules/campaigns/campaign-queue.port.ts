import type { WorkerInfo } from '../ledger/events/catalog.js';

// The queue only distributes work: what a campaign has done is in its stream (the ledger), so a lost
// queue is rebuilt from it (`a2rl campaign resume`). Two adapters: the in-process pool
// (local-queue.ts, the embedded default) and BullMQ on Redis (infra/queue/, `--queue redis://…`).

/** One attempt of one cell × seed. The job id is derived from all three, so enqueueing is idempotent. */
export interface CampaignJob {
  campaignId: string;
  cell: number;
  attempt: number;
  /** GPUs the job needs on its worker (0: any worker). */
  gpus: number;
}

/** What a job runs with on the worker that took it. */
export interface JobContext {
  worker: WorkerInfo;
  /** The worker's GPU ids this job holds (as many as it asked for), released when it returns. */
  gpus: string[];
  /** Aborted when the worker is shutting down (SIGTERM): stop the run and hand the job back. */
  signal: AbortSignal;
}

/** Runs one job to its end; resolves when the job's outcome is recorded in the campaign stream. */
export type JobHandler = (job: CampaignJob, context: JobContext) => Promise<void>;

export interface CampaignQueue {
  readonly kind: 'local' | 'redis';
  /** Puts jobs on the queue; a job already waiting or running (same campaign, cell, attempt) is not added again. */
  enqueue(jobs: readonly CampaignJob[]): Promise<void>;
  /** Removes the campaign's jobs that are still waiting (cancel). */
  drop(campaignId: string): Promise<void>;
  /** Whether the queue holds the job: waiting, delayed or running (not when it was dropped, ended or ran out of attempts). */
  holds(job: CampaignJob): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * Thrown by a job's handler when the worker's ledger does not hold the job's campaign (the worker is
 * attached to another ledger, or the job is not a campaign's at all): the queue hands the job back
 * untouched, without using up one of its attempts, and the worker says so.
 */
export class ForeignJobError extends Error {
  override readonly name = 'ForeignJobError';
}

/** The job id both adapters use: `<campaignId>.<cell>.<attempt>` (no ':' — BullMQ reserves it). */
export const jobId = (job: Pick<CampaignJob, 'campaignId' | 'cell' | 'attempt'>): string => `${job.campaignId}.${job.cell}.${job.attempt}`;
