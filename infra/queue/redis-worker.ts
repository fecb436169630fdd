import { Inject, Injectable, Module, type DynamicModule, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { BullModule, OnWorkerEvent, Processor, WorkerHost } from '@nestjs/bullmq';
import { DelayedError, UnrecoverableError, WaitingError, type Job } from 'bullmq';
import { ForeignJobError, type CampaignJob, type JobHandler } from '../../modules/campaigns/campaign-queue.port.js';
import type { WorkerInfo } from '../../modules/ledger/events/catalog.js';
import { DevicePool } from './device-pool.js';
import { bullConnection, checkQueue, CPU_QUEUE, gpuQueue, queuePrefix } from './redis-connection.js';

// `a2rl worker`'s engine: BullMQ workers, declared the Nest way (@nestjs/bullmq: BullModule.forRoot and
// registerQueue, one @Processor extending WorkerHost per queue, worker options set when the worker
// starts), in a small Nest context of their own beside the command's run app.
//
// Lease: a job is locked for `leaseMs` and the lock is renewed while its handler runs. A worker that
// dies (SIGKILL, machine lost) stops renewing; within about two stalled-check intervals another
// worker's checker puts the job back on the queue and a worker takes it again. The handler then finds
// the dead holder's attempt in the campaign stream and records it lost.

export interface RedisWorkerOptions {
  url: string;
  /** Key prefix shared with the producer (default 'a2rl'). */
  prefix?: string;
  /** Jobs needing no GPU run at once (0: only GPU jobs; then `gpus` must not be empty). */
  slots: number;
  /** The GPU ids this worker advertises. */
  gpus: readonly string[];
  handler: JobHandler;
  worker: WorkerInfo;
  leaseMs: number;
  log: (line: string) => void;
  /** The worker's ledger as it may be printed (the URL without its password), for the hand-back line. */
  ledger?: string;
}

export interface RunningWorker {
  /** Stops taking jobs, aborts the running jobs' signals, waits for their handlers to return, disconnects. */
  close(): Promise<void>;
}

/**
 * A job that stalls this often is failed by BullMQ. Each stall is a worker lost while holding the job,
 * and the campaign's own retry limit (counted in the ledger) already decides how often a cell is tried,
 * so the queue should not give up first.
 */
const MAX_STALLED = 20;

const RUNTIME = Symbol('campaign-worker-runtime');

export async function startRedisWorker(options: RedisWorkerOptions): Promise<RunningWorker> {
  checkSlots(options);
  const prefix = queuePrefix(options.prefix);
  await checkQueue(options.url);
  const runtime = new JobRuntime(options);
  const app = await NestFactory.createApplicationContext(CampaignWorkerModule.register(options, prefix, runtime), { logger: false, abortOnError: false });
  let closing: Promise<void> | undefined;
  return {
    close: () =>
      (closing ??= (async () => {
        runtime.stop();
        await app.close(); // @nestjs/bullmq closes each worker, which waits for its running jobs
      })()),
  };
}

function checkSlots({ slots, gpus }: RedisWorkerOptions): void {
  if (!Number.isInteger(slots) || slots < 0) throw new Error(`--slots must be a whole number, got ${slots}`);
  if (slots === 0 && gpus.length === 0) throw new Error('--slots 0 takes no CPU jobs: give --gpus, or at least one slot');
}

/** What runs one job on this worker: its GPUs, the handler, the stop signal, the log lines. */
class JobRuntime {
  private readonly stopping = new AbortController();
  private readonly devices: DevicePool;
  private lastError = '';

  constructor(private readonly options: RedisWorkerOptions) {
    this.devices = new DevicePool(options.gpus);
  }

  stop(): void {
    this.stopping.abort(new Error('the worker is stopping'));
  }

  async process(job: Job, token: string | undefined, jobSignal: AbortSignal | undefined): Promise<void> {
    const data = this.checked(job);
    const gpus = await this.holdDevices(job, data, token);
    const { log, handler, worker } = this.options;
    const started = Date.now();
    log(`job ${job.id}: started (campaign ${data.campaignId}, cell ${data.cell}, attempt ${data.attempt}${gpus.length ? `, gpus ${gpus.join(',')}` : ''})`);
    try {
      const signal = jobSignal ? AbortSignal.any([this.stopping.signal, jobSignal]) : this.stopping.signal;
      await handler(data, { worker, gpus, signal });
      log(`job ${job.id}: finished in ${((Date.now() - started) / 1000).toFixed(1)}s`);
    } catch (err) {
      if (err instanceof ForeignJobError) return this.handBack(job, token, err);
      const left = (job.opts.attempts ?? 1) - job.attemptsMade - 1;
      log(`job ${job.id}: failed: ${oneLine(err)}${left > 0 ? ` (the queue tries it again, ${left} more time${left === 1 ? '' : 's'})` : ''}`);
      throw err;
    } finally {
      this.devices.release(gpus);
    }
  }

  private checked(job: Job): CampaignJob {
    try {
      return campaignJob(job);
    } catch (err) {
      this.options.log(`job ${job.id}: dropped: ${oneLine(err)}`);
      throw err;
    }
  }

  /** The job's GPUs; a worker that is stopping while the job waits for them hands it back unstarted. */
  private async holdDevices(job: Job, data: CampaignJob, token: string | undefined): Promise<string[]> {
    if (data.gpus === 0) return [];
    try {
      return await this.devices.acquire(data.gpus, this.stopping.signal);
    } catch (err) {
      if (!this.stopping.signal.aborted) throw err;
      await job.moveToWait(token);
      this.options.log(`job ${job.id}: handed back unstarted (the worker is stopping)`);
      throw new WaitingError();
    }
  }

  /**
   * A job whose campaign this worker's ledger does not hold goes back on the queue untouched (no
   * attempt used) for a lease, and the worker says so loudly: it is attached to the wrong ledger, or
   * the job is not a campaign's.
   */
  private async handBack(job: Job, token: string | undefined, err: ForeignJobError): Promise<never> {
    await job.moveToDelayed(Date.now() + this.options.leaseMs, token);
    this.options.log(`job ${job.id}: NOT TAKEN: ${err.message} (${this.options.ledger ?? 'its ledger'}); handed back untouched. Check A2RL_LEDGER_URL: every worker of a campaign records into its scheduler's ledger`);
    throw new DelayedError();
  }

  /** Queue trouble (Redis gone, a lock that could not be renewed): one line, not repeated while it persists. */
  workerError(err: unknown): void {
    const line = oneLine(err);
    if (line === this.lastError) return;
    this.lastError = line;
    this.options.log(`queue: ${line}`);
  }

  stalled(jobId: string): void {
    this.options.log(`job ${jobId}: its worker stopped renewing the lease; back on the queue`);
  }
}

/** The job's data, checked: Redis is shared, so a malformed job fails alone instead of reaching the ledger. */
function campaignJob(job: Job): CampaignJob {
  const d = job.data as Partial<CampaignJob> | null;
  const ok =
    d !== null &&
    typeof d === 'object' &&
    typeof d.campaignId === 'string' &&
    d.campaignId.length > 0 &&
    Number.isInteger(d.cell) &&
    d.cell! >= 0 &&
    Number.isInteger(d.attempt) &&
    d.attempt! >= 1 &&
    Number.isInteger(d.gpus) &&
    d.gpus! >= 0;
  if (!ok) throw new UnrecoverableError(`job ${job.id} is not a campaign job: ${JSON.stringify(job.data).slice(0, 200)}`);
  return { campaignId: d.campaignId!, cell: d.cell!, attempt: d.attempt!, gpus: d.gpus! };
}

/** One queue's jobs; the concrete class per queue is made by `processorFor`. */
@Injectable()
abstract class CampaignJobs extends WorkerHost {
  constructor(@Inject(RUNTIME) private readonly runtime: JobRuntime) {
    super();
  }

  // Three parameters, so that BullMQ hands over its own per-job signal too.
  override process(job: Job, token?: string, signal?: AbortSignal): Promise<void> {
    return this.runtime.process(job, token, signal);
  }

  // Without an 'error' listener a BullMQ worker's connection error would crash the process.
  @OnWorkerEvent('error')
  onError(err: Error): void {
    this.runtime.workerError(err);
  }

  @OnWorkerEvent('stalled')
  onStalled(jobId: string): void {
    this.runtime.stalled(jobId);
  }
}

/** A @Processor for `queue` with its worker options, which are known only when the worker starts. */
function processorFor(queue: string, concurrency: number, leaseMs: number): Type<CampaignJobs> {
  @Processor(queue, { concurrency, lockDuration: leaseMs, stalledInterval: leaseMs, maxStalledCount: MAX_STALLED })
  class QueueJobs extends CampaignJobs {}
  Object.defineProperty(QueueJobs, 'name', { value: `CampaignJobs[${queue}]` });
  return QueueJobs;
}

/**
 * The queues this worker takes from, with how many of each queue's jobs may run at once: CPU jobs up
 * to `slots`; for a job needing n of this worker's k GPUs, k/n at once. Jobs of different GPU counts
 * share the devices through the pool (a job may then wait for its devices on this worker).
 */
export function servedQueues(slots: number, gpuCount: number): { queue: string; concurrency: number }[] {
  const queues = slots > 0 ? [{ queue: CPU_QUEUE, concurrency: slots }] : [];
  for (let n = 1; n <= gpuCount; n++) queues.push({ queue: gpuQueue(n), concurrency: Math.floor(gpuCount / n) });
  return queues;
}

@Module({})
class CampaignWorkerModule {
  static register(options: RedisWorkerOptions, prefix: string, runtime: JobRuntime): DynamicModule {
    const served = servedQueues(options.slots, options.gpus.length);
    return {
      module: CampaignWorkerModule,
      imports: [BullModule.forRoot({ connection: bullConnection(options.url), prefix }), BullModule.registerQueue(...served.map(({ queue }) => ({ name: queue })))],
      providers: [{ provide: RUNTIME, useValue: runtime }, ...served.map(({ queue, concurrency }) => processorFor(queue, concurrency, options.leaseMs))],
    };
  }
}

function oneLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.split('\n')[0].slice(0, 300);
}
