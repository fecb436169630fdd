import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Redis } from 'ioredis';
import { jobId, type CampaignJob, type CampaignQueue, type JobContext } from '../../modules/campaigns/campaign-queue.port.js';
import type { WorkerInfo } from '../../modules/ledger/events/catalog.js';
import { openRedisCampaignQueue } from './bullmq-campaign-queue.js';
import { DevicePool } from './device-pool.js';
import { checkQueue } from './redis-connection.js';
import { deleteKeys as deleteRedisKeys } from './testing/redis-keys.js';
import { servedQueues, startRedisWorker, type RedisWorkerOptions, type RunningWorker } from './redis-worker.js';
import { until } from '../../test/testing/helpers.js';

// The BullMQ adapter against a real Redis (127.0.0.1:6379, each test under its own key prefix) with fake
// job handlers. Skipped, saying so, where no Redis answers.

const URL = process.env.A2RL_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const reachable = await checkQueue(URL).then(
  () => true,
  (err: Error) => {
    console.warn(`skipping the BullMQ adapter spec: ${err.message}`);
    return false;
  },
);
const describeRedis = reachable ? describe : describe.skip;

const worker = (id: string, gpus: string[] = []): WorkerInfo => ({ id, host: 'test-host', pid: process.pid, gpus });
const job = (campaignId: string, cell: number, gpus = 0, attempt = 1): CampaignJob => ({ campaignId, cell, attempt, gpus });

/** Polls until `check` holds; generous, since the queue's timing depends on the machine's load. */
/** A handler that records what it ran and holds each job until the test releases it. */
function gate() {
  const started: { job: CampaignJob; ctx: JobContext }[] = [];
  const releases = new Map<string, () => void>();
  let running = 0;
  let maxRunning = 0;
  return {
    started,
    get running() {
      return running;
    },
    get maxRunning() {
      return maxRunning;
    },
    handler: async (j: CampaignJob, ctx: JobContext) => {
      started.push({ job: j, ctx });
      running++;
      maxRunning = Math.max(maxRunning, running);
      try {
        await new Promise<void>((resolve) => {
          releases.set(jobId(j), resolve);
          ctx.signal.addEventListener('abort', () => resolve(), { once: true });
        });
      } finally {
        running--;
      }
    },
    release(j: CampaignJob) {
      releases.get(jobId(j))?.();
    },
    releaseAll() {
      for (const r of releases.values()) r();
    },
  };
}

describeRedis('BullMQ campaign queue (real Redis)', () => {
  let prefix: string;
  const opened: { close(): Promise<void> }[] = [];
  const children: ChildProcess[] = [];
  const logs: string[] = [];

  const openQueue = async (): Promise<CampaignQueue> => {
    const q = await openRedisCampaignQueue(URL, { prefix });
    opened.push(q);
    return q;
  };
  const startWorker = async (o: Partial<RedisWorkerOptions> & Pick<RedisWorkerOptions, 'handler'>): Promise<RunningWorker> => {
    const w = await startRedisWorker({ url: URL, prefix, slots: 1, gpus: [], worker: worker('w1'), leaseMs: 30_000, log: (l) => logs.push(l), ...o });
    opened.push(w);
    return w;
  };

  beforeAll(() => {
    prefix = `a2rl-test-${process.pid}-${randomBytes(3).toString('hex')}`;
  });

  afterEach(async () => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
    await Promise.all(opened.splice(0).map((o) => o.close()));
    logs.length = 0;
    await deleteKeys(prefix);
    prefix = `a2rl-test-${process.pid}-${randomBytes(3).toString('hex')}`;
  });

  afterAll(async () => {
    await deleteKeys(prefix);
  });

  it('runs each enqueued job once on a worker, however often it is enqueued', async () => {
    const queue = await openQueue();
    const jobs = [job('c1', 0), job('c1', 1), job('c1', 2)];
    await queue.enqueue(jobs);
    await queue.enqueue(jobs); // still waiting: not added again
    const g = gate();
    await startWorker({ handler: g.handler, slots: 3 });
    await until('three jobs started', () => g.started.length === 3);
    await queue.enqueue(jobs); // running: not added again
    g.releaseAll();
    await until('three jobs finished', () => logs.filter((l) => l.includes('finished')).length === 3);
    expect(g.started.map((s) => s.job).sort((a, b) => a.cell - b.cell)).toEqual(jobs);
    expect(g.started[0].ctx).toMatchObject({ worker: { id: 'w1' }, gpus: [] });
    expect(logs.filter((l) => l.includes('started'))).toHaveLength(3);
  });

  it('runs at most --slots jobs at once on a worker', async () => {
    const queue = await openQueue();
    const jobs = [0, 1, 2, 3, 4].map((cell) => job('c2', cell));
    await queue.enqueue(jobs);
    const g = gate();
    await startWorker({ handler: g.handler, slots: 2 });
    await until('two jobs started', () => g.started.length === 2);
    for (const j of jobs) {
      await until(`cell ${j.cell} started`, () => g.started.some((s) => s.job.cell === j.cell));
      g.release(j);
    }
    await until('five jobs finished', () => logs.filter((l) => l.includes('finished')).length === 5);
    expect(g.maxRunning).toBe(2);
  });

  it('gives GPU jobs only to workers with enough GPUs, each job its own devices', async () => {
    const queue = await openQueue();
    const cpuOnly = gate();
    const held = new Set<string>();
    const ran: { job: CampaignJob; gpus: string[] }[] = [];
    let overlaps = 0;
    await startWorker({ handler: cpuOnly.handler, slots: 4, worker: worker('cpu-only') });
    await startWorker({
      slots: 0,
      gpus: ['0', '1'],
      worker: worker('two-gpus', ['0', '1']),
      handler: async (j, ctx) => {
        ran.push({ job: j, gpus: ctx.gpus });
        if (ctx.gpus.some((id) => held.has(id))) overlaps++;
        for (const id of ctx.gpus) held.add(id);
        await new Promise((r) => setTimeout(r, 100));
        for (const id of ctx.gpus) held.delete(id);
      },
    });
    await queue.enqueue([job('c3', 0, 1), job('c3', 1, 1), job('c3', 2, 1), job('c3', 3, 2), job('c3', 4, 3)]);
    await until('the four jobs that fit finished', () => logs.filter((l) => l.includes('finished')).length === 4);
    expect(overlaps).toBe(0);
    expect(ran.map((r) => r.job.cell).sort()).toEqual([0, 1, 2, 3]);
    for (const r of ran) expect(r.gpus).toHaveLength(r.job.gpus);
    expect(ran.find((r) => r.job.gpus === 2)!.gpus).toEqual(['0', '1']);
    await new Promise((r) => setTimeout(r, 300));
    expect(cpuOnly.started).toHaveLength(0); // nor the three-GPU job, which no worker here can run
    expect(ran).toHaveLength(4);
  });

  it('drops the waiting jobs of one campaign and leaves the others', async () => {
    const queue = await openQueue();
    await queue.enqueue([job('gone', 0), job('gone', 1, 1), job('kept', 0)]);
    await queue.drop('gone');
    const g = gate();
    await startWorker({ handler: g.handler, slots: 2, gpus: ['0'] });
    await until('the kept job started', () => g.started.length === 1);
    g.releaseAll();
    await until('the kept job finished', () => logs.some((l) => l.includes('finished')));
    await new Promise((r) => setTimeout(r, 300)); // nothing else turns up
    expect(g.started.map((s) => s.job.campaignId)).toEqual(['kept']);
  });

  it('survives a handler that throws: one line, and the next job runs', async () => {
    const queue = await openQueue();
    const ran: number[] = [];
    await startWorker({
      handler: async (j) => {
        ran.push(j.cell);
        if (j.cell === 0) throw new Error('ledger unreachable\nsecond line');
      },
    });
    await queue.enqueue([job('c5', 0), job('c5', 1)]);
    await until('the second job ran', () => ran.includes(1));
    const failed = logs.filter((l) => l.includes('failed'));
    expect(failed).toEqual([`job c5.0.1: failed: ledger unreachable (the queue tries it again, 2 more times)`]);
  });

  it('stops on close: aborts the running jobs\' signals and waits for their handlers', async () => {
    const queue = await openQueue();
    let aborted = false;
    let returned = false;
    const w = await startWorker({
      handler: async (_j, ctx) => {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
        aborted = true;
        await new Promise((r) => setTimeout(r, 200)); // recording the outcome
        returned = true;
      },
    });
    await queue.enqueue([job('c6', 0)]);
    await until('the job started', () => logs.some((l) => l.includes('started')));
    await w.close();
    expect({ aborted, returned }).toEqual({ aborted: true, returned: true });
  });

  it('puts the job of a worker that died back on the queue once its lease runs out, for another worker', async () => {
    const queue = await openQueue();
    const dying = spawnWorker(prefix, 1000);
    children.push(dying.child);
    await queue.enqueue([job('c7', 0)]);
    await until('the first worker took the job', () => dying.stdout().includes('started c7.0.1'));
    dying.child.kill('SIGKILL');
    const g = gate();
    await startWorker({ handler: g.handler, leaseMs: 1000, worker: worker('survivor') });
    await until('the job taken again by the survivor', () => g.started.length === 1);
    expect(g.started[0].job).toEqual(job('c7', 0));
    g.releaseAll();
    await until('the job finished', () => logs.some((l) => l.includes('finished')));
  });

  it('fails fast, in one line, where nothing answers', async () => {
    const closedPort = 'redis://127.0.0.1:1';
    await expect(openRedisCampaignQueue(closedPort, { prefix })).rejects.toThrow(
      /^cannot reach the queue at redis:\/\/127\.0\.0\.1:1 \(ECONNREFUSED\): start Redis or fix --queue$/,
    );
    await expect(startRedisWorker({ url: closedPort, prefix, slots: 1, gpus: [], handler: async () => {}, worker: worker('w'), leaseMs: 1000, log: () => {} })).rejects.toThrow(/^cannot reach the queue at/);
    await expect(openRedisCampaignQueue('http://127.0.0.1:6379')).rejects.toThrow('--queue must be a redis:// or rediss:// URL, got "http://127.0.0.1:6379"');
    await expect(openRedisCampaignQueue('redis://:secret@127.0.0.1:1')).rejects.toThrow('cannot reach the queue at redis://:***@127.0.0.1:1 (ECONNREFUSED)');
    await expect(openRedisCampaignQueue(URL, { prefix: 'a b' })).rejects.toThrow(/queue prefix must be/);
  });
});

describe('servedQueues', () => {
  it('takes CPU jobs in --slots and, with k GPUs, k/n jobs needing n', () => {
    expect(servedQueues(2, 0)).toEqual([{ queue: 'campaign-cpu', concurrency: 2 }]);
    expect(servedQueues(0, 4)).toEqual([
      { queue: 'campaign-gpu-1', concurrency: 4 },
      { queue: 'campaign-gpu-2', concurrency: 2 },
      { queue: 'campaign-gpu-3', concurrency: 1 },
      { queue: 'campaign-gpu-4', concurrency: 1 },
    ]);
  });
});

describe('DevicePool', () => {
  it('hands out free ids in order, first come first served, and gives up waiting on abort', async () => {
    const pool = new DevicePool(['0', '1', '2']);
    const never = new AbortController().signal;
    expect(await pool.acquire(2, never)).toEqual(['0', '1']);
    const big = pool.acquire(2, never);
    const stop = new AbortController();
    const small = pool.acquire(1, stop.signal); // does not overtake the waiting two-device job
    expect(pool.available).toBe(1);
    pool.release(['0']);
    expect(await big).toEqual(['0', '2']);
    stop.abort(new Error('stopping'));
    await expect(small).rejects.toThrow('stopping');
    await expect(pool.acquire(4, never)).rejects.toThrow('a job needs 4 GPUs; this worker has 3');
  });
});

/** A worker in a child process whose handler never returns (to be SIGKILLed while it holds a job). */
function spawnWorker(prefix: string, leaseMs: number): { child: ChildProcess; stdout: () => string } {
  const script = `
    const { startRedisWorker } = await import(${JSON.stringify(path.resolve('infra/queue/redis-worker.ts'))});
    await startRedisWorker({
      url: ${JSON.stringify(URL)}, prefix: ${JSON.stringify(prefix)}, slots: 1, gpus: [], leaseMs: ${leaseMs},
      worker: { id: 'doomed', host: 'test-host', pid: process.pid, gpus: [] }, log: () => {},
      handler: (job) => { process.stdout.write('started ' + job.campaignId + '.' + job.cell + '.' + job.attempt + '\\n'); return new Promise(() => {}); },
    });`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  return { child, stdout: () => out };
}

async function deleteKeys(prefix: string): Promise<void> {
  if (reachable) await deleteRedisKeys(URL, prefix).then(() => undefined);
}
