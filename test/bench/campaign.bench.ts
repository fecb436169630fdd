// `npm run bench -- campaign`: what the campaign machinery costs per run, and how it scales out.
//
// 1. Scheduling overhead per run: a campaign of N cells on the embedded SQLite ledger (a file in a
//    temporary directory, durable appends) is planned and scheduled, and each job goes through the
//    in-process pool (LocalQueue) to a handler that does the ledger steps of a job and nothing else —
//    read the campaign as the runner does, record RunAssigned, record RunFinished (the last one also
//    CampaignCompleted) — with no run in between. The same number of jobs through the same pool with
//    a handler that does nothing is subtracted. Per run: (plan + schedule + jobs) / N. Measured for a
//    small campaign and for the paper's matrix size (6 tasks × 5 agents × 6 drivers × 3 seeds = 540
//    cells), since every step folds the campaign's stream from its start. Goal ≤ 50 ms.
// 2. Throughput, 4 workers vs 1, on trivial runs: each job does the same ledger steps around a
//    STANDIN_MS sleep standing in for a run. Through the in-process pool at concurrency 4 vs 1, and,
//    where Redis answers, through 4 BullMQ workers (each `a2rl worker`'s engine, one slot, in this
//    process) vs 1. Goal ≥ 3×. What limits it is contention on the one campaign stream: concurrent
//    steps race for its next revision and the losers re-read and decide again.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { openRedisCampaignQueue } from '../../infra/queue/bullmq-campaign-queue.js';
import { checkQueue } from '../../infra/queue/redis-connection.js';
import { deleteKeys as deleteRedisKeys } from '../../infra/queue/testing/redis-keys.js';
import { startRedisWorker } from '../../infra/queue/redis-worker.js';
import { CampaignLedger } from '../../modules/campaigns/campaign-ledger.js';
import type { CampaignJob, JobHandler } from '../../modules/campaigns/campaign-queue.port.js';
import { CampaignService } from '../../modules/campaigns/campaign.service.js';
import { LocalQueue } from '../../modules/campaigns/local-queue.js';
import { workerInfo } from '../../modules/campaigns/worker-info.js';
import type { EventStore } from '../../modules/ledger/event-store.port.js';

const SMALL_CAMPAIGN = 36;
const PAPER_CAMPAIGN = 540;
const THROUGHPUT_JOBS = 48;
const STANDIN_MS = 250;
const GOAL_OVERHEAD_MS = 50;
const GOAL_RATIO = 3;
const REDIS_URL = process.env.A2RL_BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

const clock = () => new Date();

interface Campaigns {
  ledger: CampaignLedger;
  service: CampaignService;
  store: EventStore;
}

/** A fresh SQLite ledger in a temporary directory for `work`. */
async function withLedger<T>(work: (c: Campaigns) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-campaign-bench-'));
  const store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
  const ledger = new CampaignLedger(store, clock);
  try {
    return await work({ ledger, service: new CampaignService(ledger, clock), store });
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A campaign of `cells` cells (one task × one agent × `cells` seeds: the size is what matters). */
function plan(service: CampaignService, cells: number, queue: 'local' | 'redis') {
  return service.plan({ tasks: ['ref-arith'], agents: ['faulty-idle'], drivers: [], seeds: cells, budgetSeconds: 60, retries: 0, queue, ...(queue === 'local' ? { concurrency: 1 } : {}) });
}

let runSeq = 0;
/** A job's ledger steps as the runner takes them, around an optional stand-in for the run. */
function ledgerSteps(ledger: CampaignLedger, runMs: number, done?: () => void): JobHandler {
  return async (job, ctx) => {
    await ledger.read(job.campaignId);
    const runId = `bench-run-${++runSeq}`;
    await ledger.execute(job.campaignId, { type: 'assign', cell: job.cell, attempt: job.attempt, runId, worker: ctx.worker, gpus: ctx.gpus });
    if (runMs) await sleep(runMs);
    await ledger.execute(job.campaignId, { type: 'finish', result: { cell: job.cell, attempt: job.attempt, runId, outcome: 'completed', best: 50, baseline: 10 }, retryable: false });
    done?.();
  };
}

async function throughLocalPool(jobs: CampaignJob[], concurrency: number, handler: JobHandler): Promise<number> {
  const started = performance.now();
  const queue = new LocalQueue({ concurrency, handler, worker: workerInfo(), onError: (_job, err) => console.error(err) });
  await queue.enqueue(jobs);
  await queue.idle();
  await queue.close();
  return performance.now() - started;
}

/** ms per run of plan + schedule + the jobs' ledger steps, less the pool's own cost. */
async function schedulingOverhead(cells: number): Promise<{ cells: number; msPerRun: number; events: number }> {
  return withLedger(async ({ ledger, service }) => {
    const started = performance.now();
    const { campaignId, progress } = await service.schedule(plan(service, cells, 'local'));
    const jobs = service.pendingJobs(progress);
    await throughLocalPool(jobs, 1, ledgerSteps(ledger, 0));
    const total = performance.now() - started;
    const end = await ledger.read(campaignId);
    if (end.status !== 'completed' || end.counts.completed !== cells) throw new Error(`the bench campaign did not complete: ${JSON.stringify(end.counts)}`);
    const nothing = await throughLocalPool(jobs, 1, async () => undefined);
    return { cells, msPerRun: (total - nothing) / cells, events: end.revision + 1 };
  });
}

/** Runs per second through the in-process pool at `concurrency`. */
async function localThroughput(concurrency: number): Promise<number> {
  return withLedger(async ({ ledger, service }) => {
    const { campaignId, progress } = await service.schedule(plan(service, THROUGHPUT_JOBS, 'local'));
    const ms = await throughLocalPool(service.pendingJobs(progress), concurrency, ledgerSteps(ledger, STANDIN_MS));
    if ((await ledger.read(campaignId)).status !== 'completed') throw new Error('the bench campaign did not complete');
    return THROUGHPUT_JOBS / (ms / 1000);
  });
}

/** Runs per second through `workers` BullMQ workers (one slot each) on Redis, under a key prefix of its own. */
async function redisThroughput(workers: number): Promise<number> {
  const prefix = `a2rl-bench-${randomBytes(4).toString('hex')}`;
  return withLedger(async ({ ledger, service }) => {
    const { progress } = await service.schedule(plan(service, THROUGHPUT_JOBS, 'redis'));
    let finished = 0;
    const handler = ledgerSteps(ledger, STANDIN_MS, () => finished++);
    const running = await Promise.all(
      Array.from({ length: workers }, () => startRedisWorker({ url: REDIS_URL, prefix, slots: 1, gpus: [], handler, worker: workerInfo(), leaseMs: 30_000, log: () => undefined })),
    );
    const queue = await openRedisCampaignQueue(REDIS_URL, { prefix });
    try {
      const started = performance.now();
      await queue.enqueue(service.pendingJobs(progress));
      while (finished < THROUGHPUT_JOBS) await sleep(5);
      return THROUGHPUT_JOBS / ((performance.now() - started) / 1000);
    } finally {
      await queue.close();
      await Promise.all(running.map((w) => w.close()));
      await deleteKeys(prefix);
    }
  });
}

const deleteKeys = (prefix: string) => deleteRedisKeys(REDIS_URL, prefix);

const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

export async function campaignBench(): Promise<void> {
  const small = await schedulingOverhead(SMALL_CAMPAIGN);
  const paper = await schedulingOverhead(PAPER_CAMPAIGN);
  console.log(`scheduling overhead per run (plan + schedule + read/assign/finish per job, SQLite ledger, no run), goal ≤ ${GOAL_OVERHEAD_MS} ms:`);
  for (const o of [small, paper]) console.log(`  ${o.cells} cells (${o.events} campaign events): ${round(o.msPerRun)} ms per run`);

  const local1 = await localThroughput(1);
  const local4 = await localThroughput(4);
  console.log(`throughput, ${THROUGHPUT_JOBS} trivial runs (${STANDIN_MS} ms sleep + the ledger steps each), goal ≥ ${GOAL_RATIO}× with 4:`);
  console.log(`  in-process pool: ${round(local1)} runs/s at concurrency 1, ${round(local4)} at 4: ${round(local4 / local1)}×`);

  let redis: { one: number; four: number } | null = null;
  const redisUp = await checkQueue(REDIS_URL).then(
    () => true,
    (err: Error) => (console.log(`  BullMQ workers: skipped (${err.message})`), false),
  );
  if (redisUp) {
    redis = { one: await redisThroughput(1), four: await redisThroughput(4) };
    console.log(`  BullMQ workers on Redis: ${round(redis.one)} runs/s with 1 worker, ${round(redis.four)} with 4: ${round(redis.four / redis.one)}×`);
  }

  const throughputRatio = redis ? Math.min(local4 / local1, redis.four / redis.one) : local4 / local1;
  console.log(
    JSON.stringify({
      bench: 'campaign',
      scheduling_overhead_ms_per_run: round(paper.msPerRun),
      scheduling_overhead_ms_per_run_small: round(small.msPerRun),
      overhead_cells: paper.cells,
      overhead_cells_small: small.cells,
      goal_overhead_ms: GOAL_OVERHEAD_MS,
      overhead_ok: paper.msPerRun <= GOAL_OVERHEAD_MS,
      throughput_4_vs_1: round(throughputRatio),
      throughput_4_vs_1_local: round(local4 / local1),
      throughput_4_vs_1_redis: redis ? round(redis.four / redis.one) : null,
      runs_per_s_local_1: round(local1),
      runs_per_s_local_4: round(local4),
      runs_per_s_redis_1: redis ? round(redis.one) : null,
      runs_per_s_redis_4: redis ? round(redis.four) : null,
      goal_throughput_ratio: GOAL_RATIO,
      throughput_ok: throughputRatio >= GOAL_RATIO,
      standin_run_ms: STANDIN_MS,
      throughput_jobs: THROUGHPUT_JOBS,
      ledger: 'sqlite',
      cpus: os.cpus().length,
      load1: round(os.loadavg()[0]),
    }),
  );
}
