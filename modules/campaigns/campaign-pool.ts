import type { CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { WorkerInfo } from '../ledger/events/catalog.js';
import type { LedgerService } from '../ledger/ledger.service.js';
import type { RunService } from '../runs/run.service.js';
import type { CampaignLedger } from './campaign-ledger.js';
import type { CampaignJob, CampaignQueue } from './campaign-queue.port.js';
import { CampaignRunner } from './campaign-runner.js';
import type { CampaignService } from './campaign.service.js';
import { LocalQueue } from './local-queue.js';
import { watchStrandedCells } from './stranded-cells.js';
import { workerInfo } from './worker-info.js';

// Running a campaign's owed jobs, as `a2rl campaign run` and `resume` do: in this process (the
// embedded pool) or on a shared queue that `a2rl worker`s take from, following the campaign's stream
// until it ends. The commands only print what these report (onProgress, log).

export interface FollowOptions {
  /** Every new state of the campaign, from its stream (the first one is the state it started from). */
  onProgress: (progress: CampaignProgress) => void;
  /** Aborted on an operator interrupt: the pool stops its runs and hands their cells back; following a queue just stops. */
  signal?: AbortSignal;
}

export interface EmbeddedOptions extends FollowOptions {
  ledger: CampaignLedger;
  service: CampaignService;
  runs: RunService;
  runLedger: LedgerService;
  artifacts: ArtifactStore;
  gradingBaseUrl: string;
  /** Runs at once. */
  concurrency: number;
  /** The runner's own lines (set-up warnings, starts). */
  log: (line: string) => void;
  /** A job whose outcome could not be recorded. */
  onJobError: (job: CampaignJob, err: unknown) => void;
  /** This process as a worker (default: workerInfo()). */
  worker?: WorkerInfo;
}

/**
 * Runs the campaign's owed jobs in this process, `concurrency` at a time, until none is left, and
 * returns the campaign's state at the end. An interrupt (`signal`) aborts the pool: running jobs
 * hand their cell back (recorded), waiting ones stay owed, and `campaign resume` picks them up.
 */
export async function runEmbedded(progress: CampaignProgress, o: EmbeddedOptions): Promise<CampaignProgress> {
  let queue: LocalQueue | undefined;
  const runner = new CampaignRunner({
    ledger: o.ledger,
    runs: o.runs,
    runLedger: o.runLedger,
    artifacts: o.artifacts,
    gradingBaseUrl: o.gradingBaseUrl,
    enqueue: (jobs: CampaignJob[]) => queue!.enqueue(jobs),
    log: o.log,
  });
  queue = new LocalQueue({ concurrency: o.concurrency, handler: runner.handle, worker: o.worker ?? workerInfo(), signal: o.signal, onError: o.onJobError });
  o.onProgress(progress);
  await queue.enqueue(o.service.pendingJobs(progress));
  // Follow until the campaign ends, or the pool has nothing left (interrupted, or cancelled elsewhere).
  const poolDone = new AbortController();
  const idle = queue.idle().then(() => poolDone.abort());
  await o.ledger.follow(progress.campaignId, (p) => o.onProgress(p), poolDone.signal);
  await queue.drop(progress.campaignId); // ended or cancelled: nothing more starts
  await queue.close(); // the running jobs record how they ended (a cancelled campaign's runs are stopped)
  await idle;
  const last = await o.ledger.read(progress.campaignId);
  o.onProgress(last);
  return last;
}

export interface OnQueueOptions extends FollowOptions {
  ledger: CampaignLedger;
  service: CampaignService;
  /** How often the queue is checked for cells whose job it no longer holds (stranded-cells.ts): half a worker lease. */
  watchMs: number;
  /** What was done about a stranded cell. */
  log: (line: string) => void;
}

/**
 * Puts the owed jobs on a shared queue and follows the campaign while workers run them, acting on any
 * cell whose job the queue lost (the signal stops following only).
 */
export async function runOnQueue(progress: CampaignProgress, queue: CampaignQueue, o: OnQueueOptions): Promise<CampaignProgress> {
  await queue.enqueue(o.service.pendingJobs(progress));
  o.onProgress(progress);
  return followWatching(progress.campaignId, queue, o);
}

/** Follows the campaign to its end (or the signal) while watching the queue for stranded cells. */
export async function followWatching(campaignId: string, queue: CampaignQueue, o: Omit<OnQueueOptions, 'service'>): Promise<CampaignProgress> {
  const stopWatching = new AbortController();
  const signal = o.signal ? AbortSignal.any([o.signal, stopWatching.signal]) : stopWatching.signal;
  const watching = watchStrandedCells(campaignId, { ledger: o.ledger, queue, intervalMs: o.watchMs, log: o.log, signal }).catch((err: unknown) =>
    o.log(`[${campaignId}] watching the queue for stranded cells stopped: ${err instanceof Error ? err.message : String(err)}`),
  );
  try {
    return await o.ledger.follow(campaignId, (p) => o.onProgress(p), o.signal);
  } finally {
    stopWatching.abort();
    await watching;
  }
}
