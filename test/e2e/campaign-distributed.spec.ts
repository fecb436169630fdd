import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Queue } from 'bullmq';
import { PostgresEventStore } from '../../infra/eventstore/postgres-event-store.js';
import { checkQueue, CPU_QUEUE, ledgerQueuePrefix } from '../../infra/queue/redis-connection.js';
import { JOB_LEFT_QUEUE } from '../../modules/campaigns/stranded-cells.js';
import { deleteKeys as deleteRedisKeys } from '../../infra/queue/testing/redis-keys.js';
import { A2RL_BIN, runA2rl, type CliResult } from './a2rl-cli.js';
import type { CampaignJson, Ev } from './campaign-json.js';
import { until } from '../testing/helpers.js';

// Distributed campaigns end to end through the built `a2rl` binary: `a2rl worker` processes, each with
// its own A2RL_HOME (one "machine" each), sharing a PostgreSQL ledger, a filesystem artifact store and a
// Redis queue. A worker SIGKILLed while its run is going loses its lease: the other worker takes the job,
// records the dead worker's run interrupted and runs the cell again. A worker stopped by SIGTERM closes
// its run and hands the cell back. Skipped, saying why, where Redis or PostgreSQL does not answer.

const REDIS = process.env.A2RL_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PG = process.env.A2RL_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

const missing = await servicesMissing();
const describeServices = missing ? describe.skip : describe;
if (missing) console.warn(`skipping the distributed campaign spec: ${missing}`);


interface Background {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

describeServices('distributed campaigns: `a2rl worker`s on a Redis queue with a shared PostgreSQL ledger', () => {
  const schema = `a2rl_distributed_${process.pid}_${Date.now()}`;
  const prefix = `a2rl-test-distributed-${process.pid}-${randomBytes(3).toString('hex')}`;
  const dirs: string[] = [];
  const started: Background[] = [];
  let artifacts: string;
  let env: Record<string, string>;

  const campaignEvents = (campaignId: string) => streamEvents(schema, `campaign-${campaignId}`);
  const runEvents = (runId: string) => streamEvents(schema, `run-${runId}`);
  const dir = (name: string) => {
    const d = mkdtempSync(path.join(os.tmpdir(), `a2rl-distributed-${name}-`));
    dirs.push(d);
    return d;
  };
  const a2rl = (home: string, args: string[], extra: Record<string, string> = {}) => runA2rl(args, { env: { ...process.env, ...env, A2RL_HOME: home, ...extra } });
  const start = (home: string, args: string[], extra: Record<string, string> = {}): Background => {
    const child = spawn(process.execPath, [A2RL_BIN, ...args], { env: { ...process.env, ...env, A2RL_HOME: home, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal === 'SIGKILL' ? 137 : null))));
    const bg = { child, stdout: () => out, stderr: () => err, exited };
    started.push(bg);
    return bg;
  };
  const startWorker = async (): Promise<Background & { id: string }> => {
    const w = start(dir('worker'), ['worker', '--queue', REDIS, '--slots', '1']);
    await until('the worker to start', () => /worker (\S+): taking jobs from/.test(w.stderr()) || w.child.exitCode !== null, 60_000);
    const id = /worker (\S+): taking jobs from/.exec(w.stderr())?.[1];
    if (!id) throw new Error(`the worker did not start: ${w.stderr()}`);
    return { ...w, id };
  };

  beforeAll(() => {
    artifacts = dir('artifacts');
    env = {
      A2RL_LEDGER_URL: `${PG}?schema=${schema}`,
      A2RL_ARTIFACTS_URL: `file://${artifacts}`,
      A2RL_QUEUE_PREFIX: prefix,
      A2RL_WORKER_LEASE_MS: '3000',
    };
  });

  afterAll(async () => {
    for (const bg of started) if (bg.child.exitCode === null && bg.child.signalCode === null) bg.child.kill('SIGKILL');
    await Promise.all(started.map((bg) => bg.exited));
    await dropSchema(schema);
    await deleteKeys(prefix);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it('completes with one completed run per cell × seed; the killed worker\'s run is recorded interrupted and resumed on the other worker, the same run and attempt', async () => {
    const workers = [await startWorker(), await startWorker()];
    const campaign = start(dir('scheduler'), ['campaign', 'run', '--queue', REDIS, '--tasks', 'ref-arith', '--agents', 'faulty-idle', '--seeds', '2', '--budget', '6s', '--json']);

    // The victim: the first worker whose run is recorded as assigned (the runner logs it after RunAssigned).
    const startedRun = /cell (\d+): started run (\S+)/;
    await until('a worker to start a run', () => workers.some((w) => startedRun.test(w.stderr())), 90_000);
    const victim = workers.find((w) => startedRun.test(w.stderr()))!;
    const survivor = workers.find((w) => w !== victim)!;
    const [, killedCell, killedRun] = startedRun.exec(victim.stderr())!;
    // Killed once its agent runs: from then on the run can be resumed (docs/resume.md).
    await until('the victim\'s agent to start', async () => (await runEvents(killedRun)).some((e) => e.type === 'AgentStarted'), 90_000);
    victim.child.kill('SIGKILL');
    expect(await victim.exited).toBe(137);

    const code = await Promise.race([campaign.exited, timeout(240_000, 'the campaign to complete')]);
    expect({ code, stderr: code === 0 ? '' : campaign.stderr() }).toEqual({ code: 0, stderr: '' });
    const result = JSON.parse(campaign.stdout().trim().split('\n').pop()!) as CampaignJson;

    // Exactly one completed run per cell × seed, the killed one among them: resumed, not run again.
    expect(result).toMatchObject({ completed: 2, failed: 0 });
    expect(result.runs.map((r) => [r.seed, r.state]).sort()).toEqual([
      [0, 'completed'],
      [1, 'completed'],
    ]);
    expect(new Set(result.runs.map((r) => r.runId)).size).toBe(2);
    expect(result.runs.map((r) => r.runId)).toContain(killedRun);

    // The killed run: interrupted, resumed and completed in its own stream, its seqs dense.
    const killedEvents = await runEvents(killedRun);
    const types = killedEvents.map((e) => e.type);
    expect(types.indexOf('RunInterrupted')).toBeLessThan(types.indexOf('RunResumed'));
    expect(types.at(-2)).toBe('RunCompleted');
    expect(killedEvents.map((e) => (e as Ev & { seq: number }).seq)).toEqual(killedEvents.map((_, i) => i));

    // The campaign's stream: the attempt resumed by the survivor (RunAssigned resumed), finished once, no retry used.
    const stream = await campaignEvents(result.campaignId);
    const cell = Number(killedCell);
    const ofCell = (type: string) => stream.filter((e) => e.type === type && e.data.cell === cell);
    expect(ofCell('RunFinished').map((e) => e.data)).toEqual([expect.objectContaining({ attempt: 1, runId: killedRun, outcome: 'completed' })]);
    expect(ofCell('RunRetried')).toEqual([]);
    const assigned = ofCell('RunAssigned').map((e) => e.data as { attempt: number; runId: string; worker: { id: string }; resumed?: true });
    expect(assigned.map((a) => [a.attempt, a.runId, a.worker.id, a.resumed ?? false])).toEqual([
      [1, killedRun, victim.id, false],
      [1, killedRun, survivor.id, true],
    ]);
    for (const c of [0, 1]) {
      expect(stream.filter((e) => e.type === 'RunFinished' && e.data.cell === c && e.data.outcome === 'completed')).toHaveLength(1);
    }
    expect(stream.at(-1)).toMatchObject({ type: 'CampaignCompleted', data: { completed: 2, failed: 0 } });

    // SIGTERM on an idle worker: it stops and exits 143.
    survivor.child.kill('SIGTERM');
    expect(await Promise.race([survivor.exited, timeout(60_000, 'the worker to exit')])).toBe(143);
    expect(survivor.stderr()).toMatch(/worker \S+: stopped/);
  }, 360_000);

  it('hands a running job back on SIGTERM: the run is closed, the worker exits 143, another worker runs the cell', async () => {
    const first = await startWorker();
    const campaign = start(dir('scheduler'), ['campaign', 'run', '--queue', REDIS, '--tasks', 'ref-arith', '--agents', 'faulty-idle', '--seeds', '1', '--budget', '20s', '--json']);
    const startedRun = /cell 0: started run (\S+)/;
    await until('the worker to start the run', () => startedRun.test(first.stderr()), 90_000);
    const [, stoppedRun] = startedRun.exec(first.stderr())!;
    first.child.kill('SIGTERM');
    expect(await Promise.race([first.exited, timeout(90_000, 'the worker to exit')])).toBe(143);
    expect(first.stderr()).toMatch(/SIGTERM: taking no new jobs/);

    const second = await startWorker();
    const code = await Promise.race([campaign.exited, timeout(120_000, 'the campaign to complete')]);
    expect({ code, stderr: code === 0 ? '' : campaign.stderr() }).toEqual({ code: 0, stderr: '' });
    const result = JSON.parse(campaign.stdout().trim().split('\n').pop()!) as CampaignJson;
    expect(result).toMatchObject({ completed: 1, failed: 0 });
    expect(result.runs[0].runId).not.toBe(stoppedRun);

    // The stopped run was closed and sealed by its own worker, not left open.
    const closed = (await runEvents(stoppedRun)).map((e) => e.type);
    expect(closed.at(-1)).toBe('TreeHeadSigned');
    expect(closed.some((t) => t === 'RunCompleted' || t === 'RunInterrupted')).toBe(true);
    const stream = await campaignEvents(result.campaignId);
    expect(stream.filter((e) => e.type === 'RunFinished').map((e) => e.data)).toEqual([
      expect.objectContaining({ attempt: 1, runId: stoppedRun, outcome: 'infra_failed' }),
      expect.objectContaining({ attempt: 2, outcome: 'completed' }),
    ]);
    const assigned = stream.filter((e) => e.type === 'RunAssigned').map((e) => e.data as { attempt: number; worker: { id: string } });
    expect(assigned.map((a) => [a.attempt, a.worker.id])).toEqual([
      [1, first.id],
      [2, second.id],
    ]);
    second.child.kill('SIGTERM');
    expect(await Promise.race([second.exited, timeout(60_000, 'the worker to exit')])).toBe(143);
  }, 360_000);

  it("a worker of another ledger never takes the campaign's jobs; a job that leaves the queue is recorded lost and retried", async () => {
    const otherSchema = `${schema}_other`;
    const stranger = start(dir('stranger'), ['worker', '--queue', REDIS, '--slots', '1'], { A2RL_LEDGER_URL: `${PG}?schema=${otherSchema}` });
    try {
      await until('the other ledger\'s worker to start', () => /taking jobs from/.test(stranger.stderr()) || stranger.child.exitCode !== null, 60_000);
      const earlier = new Set(await campaignIds(schema));
      const campaign = start(dir('scheduler'), ['campaign', 'run', '--queue', REDIS, '--tasks', 'ref-arith', '--agents', 'faulty-idle', '--seeds', '1', '--budget', '6s', '--retries', '1', '--json']);
      const campaignId = await until(() => `the campaign to be scheduled (${campaign.stderr()})`, async () => (await campaignIds(schema)).find((id) => !earlier.has(id)), 60_000);

      // The job waits on this ledger's queue; the stranger, on the same Redis with the same prefix, never sees it.
      const queuePrefix = ledgerQueuePrefix(prefix, await ledgerIdentity(schema));
      const queue = new Queue(CPU_QUEUE, { connection: { url: REDIS }, prefix: queuePrefix });
      try {
        await until('the job on the queue', async () => (await queue.getJob(`${campaignId}.0.1`)) ?? null, 30_000);
        await new Promise((r) => setTimeout(r, 4000)); // more than a lease
        expect(await queue.getJobState(`${campaignId}.0.1`)).toBe('waiting');
        // The job vanishes without an outcome (as when its queue attempts run out): the scheduler notices within a lease.
        await queue.remove(`${campaignId}.0.1`);
        await until(() => `attempt 2 to be requested (${campaign.stderr()})`, async () => (await campaignEvents(campaignId)).some((e) => e.type === 'RunRequested' && e.data.attempt === 2), 60_000);
      } finally {
        await queue.close();
      }

      const worker = await startWorker();
      const code = await Promise.race([campaign.exited, timeout(120_000, 'the campaign to complete')]);
      expect({ code, stderr: code === 0 ? '' : campaign.stderr() }).toEqual({ code: 0, stderr: '' });
      const stream = await campaignEvents(campaignId);
      expect(stream.filter((e) => e.type === 'RunFinished').map((e) => e.data)).toEqual([
        { cell: 0, attempt: 1, outcome: 'lost', reason: JOB_LEFT_QUEUE },
        expect.objectContaining({ cell: 0, attempt: 2, outcome: 'completed' }),
      ]);
      expect(stream.filter((e) => e.type === 'RunAssigned').map((e) => (e.data as { worker: { id: string } }).worker.id)).toEqual([worker.id]);
      expect(campaign.stderr()).toContain(`cell 0: attempt 1 was lost: ${JOB_LEFT_QUEUE}; retrying as attempt 2`);
      expect(stranger.stderr()).not.toMatch(/job \S+: (started|NOT TAKEN)/);
      worker.child.kill('SIGTERM');
      expect(await Promise.race([worker.exited, timeout(60_000, 'the worker to exit')])).toBe(143);
    } finally {
      stranger.child.kill('SIGKILL');
      await stranger.exited;
      await dropSchema(otherSchema);
    }
  }, 360_000);

  it('refuses a worker whose ledger is embedded SQLite, in one line, before it takes a job', async () => {
    const r = await a2rl(dir('sqlite-worker'), ['worker', '--queue', REDIS], { A2RL_LEDGER_URL: '' });
    expect(r.code).toBe(1);
    expect(lines(r)).toEqual([expect.stringMatching(/^a2rl: workers record into one ledger they all share: set A2RL_LEDGER_URL=postgres:\/\/… or kurrentdb:\/\/… \(this one is embedded SQLite, sqlite:\/\/.*ledger\.db\)$/)]);
  }, 60_000);

  it('fails `campaign run --queue` at a queue that does not answer, in one line, and records nothing', async () => {
    const home = dir('unreachable');
    const empty = `${schema}_empty`;
    const ledger = { A2RL_LEDGER_URL: `${PG}?schema=${empty}` };
    try {
      const r = await a2rl(home, ['campaign', 'run', '--queue', 'redis://127.0.0.1:1', '--tasks', 'ref-arith', '--agents', 'faulty-idle', '--budget', '6s'], ledger);
      expect(r.code).toBe(2);
      expect(lines(r)).toEqual(['a2rl: cannot reach the queue at redis://127.0.0.1:1 (ECONNREFUSED): start Redis or fix --queue']);
      const w = await a2rl(home, ['worker', '--queue', 'redis://127.0.0.1:1'], ledger);
      expect(w.code).toBe(2);
      expect(lines(w)).toEqual(['a2rl: cannot reach the queue at redis://127.0.0.1:1 (ECONNREFUSED): start Redis or fix --queue']);
      const list = await a2rl(home, ['campaign', 'list', '--json'], ledger);
      expect(list).toMatchObject({ code: 0, stdout: '[]\n' });
    } finally {
      await dropSchema(empty);
    }
  }, 60_000);
});

/** stderr's lines, less the filesystem-artifacts warning (which the worker gives before its checks). */
function lines(r: CliResult): string[] {
  return r.stderr
    .trim()
    .split('\n')
    .filter((l) => l && !l.includes('warning: artifacts are on a filesystem path'));
}

function timeout(ms: number, what: string): Promise<never> {
  return new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms).unref());
}

async function servicesMissing(): Promise<string | null> {
  try {
    await checkQueue(REDIS);
  } catch (err) {
    return (err as Error).message;
  }
  const client = new pg.Client({ connectionString: PG, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    return null;
  } catch (err) {
    return `PostgreSQL at ${PG} does not answer (${(err as Error).message})`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function withPg<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: PG });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Events of a stream straight from the shared ledger's table (canonical JSON envelopes). */
async function streamEvents(schema: string, stream: string): Promise<Ev[]> {
  return withPg(async (client) => {
    const { rows } = await client.query<{ data: Buffer }>(`SELECT data FROM "${schema}".events WHERE stream = $1 ORDER BY revision`, [stream]);
    return rows.map((r) => JSON.parse(r.data.toString('utf8')) as Ev);
  });
}

/** The campaigns of the shared ledger, by their streams. */
async function campaignIds(schema: string): Promise<string[]> {
  return withPg(async (client) => {
    const { rows } = await client.query<{ stream: string }>(`SELECT DISTINCT stream FROM "${schema}".events WHERE stream LIKE 'campaign-%'`);
    return rows.map((r) => r.stream.slice('campaign-'.length));
  }).catch(() => []);
}

/** The shared ledger's identity, as its workers and scheduler compute it. */
async function ledgerIdentity(schema: string): Promise<string> {
  const store = await PostgresEventStore.open(`${PG}?schema=${schema}`);
  try {
    return await store.identity();
  } finally {
    await store.close();
  }
}

async function dropSchema(schema: string): Promise<void> {
  await withPg((client) => client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)).catch(() => undefined);
}

const deleteKeys = (prefix: string) => deleteRedisKeys(REDIS, prefix);
