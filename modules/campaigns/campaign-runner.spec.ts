import { describe, expect, it } from '@jest/globals';
import { MemoryArtifactStore } from '../../infra/artifacts/memory-artifact-store.js';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import { LedgerService } from '../ledger/ledger.service.js';
import type { RunOutcome, RunRequest, RunService, RunSummary } from '../runs/run.service.js';
import { CampaignLedger } from './campaign-ledger.js';
import type { CampaignJob, JobContext } from './campaign-queue.port.js';
import { CampaignRunner } from './campaign-runner.js';
import { CampaignService } from './campaign.service.js';
import { LocalQueue } from './local-queue.js';

// The job runner over an in-memory ledger with a stand-in run service that records a real run
// stream (RunScheduled … RunCompleted) through the ledger: what a job does when it is delivered
// once, twice, after its worker died, when set-up fails, and when the campaign is cancelled.

type Behaviour = (request: RunRequest, runId: string) => Promise<{ best: number | null } | 'setup-fails'>;

function setup(behaviour: Behaviour, retries = 1, holderAlive?: (w: { id: string }) => Promise<boolean>) {
  const store = new MemoryEventStore();
  const clock = () => new Date('2026-11-24T10:00:00.000Z');
  const ledger = new CampaignLedger(store, clock);
  const runLedger = new LedgerService(store, clock);
  const service = new CampaignService(ledger, clock);
  let n = 0;
  const started: string[] = [];
  const runs = {
    async run(request: RunRequest): Promise<RunSummary> {
      const runId = `${request.task}-r${++n}`;
      started.push(runId);
      await runLedger.record(runId, 'RunScheduled', { task: request.task, agent: request.agent!, baseModel: 'base', budgetSeconds: request.budgetSeconds, seed: request.seed, mode: 'free', ...(request.campaign ? { campaign: request.campaign } : {}) });
      await request.onScheduled?.(runId);
      const result = await behaviour(request, runId);
      if (result === 'setup-fails') {
        await runLedger.record(runId, 'RunInterrupted', { reason: 'setup failed before the agent started: no dataset' });
        throw new Error('no dataset');
      }
      await runLedger.record(runId, 'BaselineEvaluated', { score: 10, cached: false, evaluatorVersion: '1' });
      await runLedger.record(runId, 'AgentStarted', { command: 'agent', pid: 42 });
      await runLedger.record(runId, 'AgentExited', { exitCode: 0, reason: 'completed' });
      await runLedger.record(runId, 'RunCompleted', { submissions: 0, ...(result.best !== null ? { best: result.best } : {}) });
      return { runId, task: request.task, agent: request.agent!, driver: null, baseline: 10, best: result.best, improvement: null, submissions: 0, state: 'completed', exitReason: 'completed', sandbox: 'none', workspace: '/tmp/x' };
    },
    stopped: [] as string[],
    async stop(runId: string) {
      this.stopped.push(runId);
      return true;
    },
    async settleRun(runId: string, reason: string): Promise<RunOutcome> {
      const events = [];
      for await (const e of runLedger.events(runId)) events.push(e);
      if (events.some((e) => e.type === 'RunCompleted')) return { state: 'completed', best: 12, baseline: 10, interruptedNow: false };
      await runLedger.record(runId, 'RunInterrupted', { reason });
      return { state: 'interrupted', best: null, baseline: null, interruptedNow: true };
    },
    resumed: [] as string[],
    /** As RunService: a run interrupted once its agent had started can be resumed. */
    async resumeRefusal(runId: string): Promise<string | null> {
      const types = [];
      for await (const e of runLedger.events(runId)) types.push(e.type);
      return types.includes('AgentStarted') && types.at(-1) === 'RunInterrupted' ? null : `run ${runId} cannot be resumed: it was interrupted before its baseline was graded`;
    },
    async resume(request: { runId: string }): Promise<RunSummary> {
      this.resumed.push(request.runId);
      const { runId } = request;
      await runLedger.record(runId, 'RunResumed', {});
      await runLedger.record(runId, 'AgentStarted', { command: 'agent', pid: 43 });
      await runLedger.record(runId, 'AgentExited', { exitCode: 0, reason: 'completed' });
      await runLedger.record(runId, 'RunCompleted', { submissions: 0 });
      return { runId, task: 'ref-arith', agent: 'faulty-crash', driver: null, baseline: 10, best: 30, improvement: 20, submissions: 1, state: 'completed', exitReason: 'completed', sandbox: 'none', workspace: '/tmp/x' };
    },
  };
  const enqueued: CampaignJob[] = [];
  const runner = new CampaignRunner({ ledger, runs: runs as unknown as RunService, runLedger, artifacts: new MemoryArtifactStore(), gradingBaseUrl: 'http://127.0.0.1:1', enqueue: async (jobs) => void enqueued.push(...jobs), holderAlive, holderPollMs: 5 });
  const worker = { id: 'w1', host: 'h', pid: 1, gpus: [] };
  const ctx = (signal = new AbortController().signal): JobContext => ({ worker, gpus: [], signal });
  const schedule = async (seeds = 1) => {
    const plan = service.plan({ tasks: ['ref-arith'], agents: ['faulty-crash'], drivers: [], seeds, budgetSeconds: 5, retries, queue: 'local' });
    return (await service.schedule(plan)).campaignId;
  };
  return { ledger, runLedger, service, runner, runs, started, enqueued, ctx, worker, schedule };
}

const job = (campaignId: string, cell = 0, attempt = 1): CampaignJob => ({ campaignId, cell, attempt, gpus: 0 });

describe('CampaignRunner', () => {
  it('runs a cell once: a second delivery of the same job does nothing', async () => {
    const h = setup(async () => ({ best: 15 }));
    const id = await h.schedule();
    await h.runner.handle(job(id), h.ctx());
    await h.runner.handle(job(id), h.ctx());
    const p = await h.ledger.read(id);
    expect(h.started).toHaveLength(1);
    expect(p.status).toBe('completed');
    expect(p.cells[0]).toMatchObject({ status: 'completed', best: 15, baseline: 10, runId: h.started[0] });
    const types = (await h.ledger.events(id)).map((e) => e.type);
    expect(types).toEqual(['CampaignScheduled', 'RunRequested', 'RunAssigned', 'RunFinished', 'CampaignCompleted']);
  });

  it('retries a set-up failure on the queue and stops after the retries', async () => {
    const h = setup(async () => 'setup-fails', 1);
    const id = await h.schedule();
    await h.runner.handle(job(id), h.ctx());
    expect(h.enqueued).toEqual([job(id, 0, 2)]);
    await h.runner.handle(h.enqueued[0], h.ctx());
    const p = await h.ledger.read(id);
    expect(p.cells[0]).toMatchObject({ status: 'failed', attempt: 2, retriesUsed: 1 });
    expect(p.cells[0].runs).toHaveLength(2);
    expect(p.status).toBe('completed');
    expect(h.enqueued).toHaveLength(1);
  });

  it('settles an attempt whose worker died: the open run is recorded interrupted and the cell retried', async () => {
    const h = setup(async () => ({ best: 20 }));
    const id = await h.schedule();
    // A worker took the job, scheduled its run and died.
    await h.runLedger.record('ref-arith-dead', 'RunScheduled', { task: 'ref-arith', agent: 'faulty-crash', baseModel: 'base', budgetSeconds: 5, seed: 0, mode: 'free' });
    await h.ledger.execute(id, { type: 'assign', cell: 0, attempt: 1, runId: 'ref-arith-dead', worker: { id: 'w0', host: 'gone', pid: 9, gpus: [] }, gpus: [] });
    await h.runner.handle(job(id), h.ctx()); // the queue hands the job to another worker
    const dead = [];
    for await (const e of h.runLedger.events('ref-arith-dead')) dead.push(e.type);
    expect(dead).toContain('RunInterrupted');
    expect(h.enqueued).toEqual([job(id, 0, 2)]);
    await h.runner.handle(h.enqueued[0], h.ctx());
    const p = await h.ledger.read(id);
    expect(p.cells[0]).toMatchObject({ status: 'completed', attempt: 2, best: 20 });
    expect(p.cells[0].runs).toEqual(['ref-arith-dead', h.started[0]]);
  });

  it('resumes the open run of an attempt whose worker died once its agent had started: the same run, the same attempt, no retry used', async () => {
    const h = setup(async () => ({ best: 20 }));
    const id = await h.schedule();
    await h.runLedger.record('ref-arith-lost', 'RunScheduled', { task: 'ref-arith', agent: 'faulty-crash', baseModel: 'base', budgetSeconds: 5, seed: 0, mode: 'free' });
    await h.runLedger.record('ref-arith-lost', 'BaselineEvaluated', { score: 10, cached: false, evaluatorVersion: '1' });
    await h.runLedger.record('ref-arith-lost', 'AgentStarted', { command: 'agent', pid: 41 });
    await h.ledger.execute(id, { type: 'assign', cell: 0, attempt: 1, runId: 'ref-arith-lost', worker: { id: 'w0', host: 'gone', pid: 9, gpus: [] }, gpus: [] });
    await h.runner.handle(job(id), h.ctx());
    expect(h.runs.resumed).toEqual(['ref-arith-lost']);
    expect(h.started).toEqual([]);
    expect(h.enqueued).toEqual([]);
    const p = await h.ledger.read(id);
    expect(p.cells[0]).toMatchObject({ status: 'completed', attempt: 1, runId: 'ref-arith-lost', runs: ['ref-arith-lost'], worker: { id: 'w1' }, retriesUsed: 0 });
    const assigned = (await h.ledger.events(id)).filter((e) => e.type === 'RunAssigned').map((e) => (e.data as { resumed?: true }).resumed ?? false);
    expect(assigned).toEqual([false, true]);
  });

  it('leaves an attempt to its holder while the holder is alive (a flushed queue handed the job out again)', async () => {
    let h!: ReturnType<typeof setup>;
    let checks = 0;
    h = setup(async () => ({ best: 1 }), 1, async () => {
      if (++checks === 2) await h.ledger.execute(id, { type: 'finish', result: { cell: 0, attempt: 1, runId: 'ref-arith-live', outcome: 'completed', best: 7 }, retryable: false });
      return true;
    });
    const id = await h.schedule();
    await h.runLedger.record('ref-arith-live', 'RunScheduled', { task: 'ref-arith', agent: 'faulty-crash', baseModel: 'base', budgetSeconds: 5, seed: 0, mode: 'free' });
    await h.ledger.execute(id, { type: 'assign', cell: 0, attempt: 1, runId: 'ref-arith-live', worker: { id: 'w-live', host: 'elsewhere', pid: 9, gpus: [] }, gpus: [] });
    await h.runner.handle(job(id), h.ctx());
    const live = [];
    for await (const e of h.runLedger.events('ref-arith-live')) live.push(e.type);
    expect(live).toEqual(['RunScheduled']); // not interrupted by the second taker
    expect(h.started).toEqual([]);
    expect((await h.ledger.read(id)).cells[0]).toMatchObject({ status: 'completed', best: 7 });
  });

  it('takes a run that completed before its worker died as the result (never runs it again)', async () => {
    const h = setup(async () => ({ best: 1 }));
    const id = await h.schedule();
    await h.runLedger.record('ref-arith-done', 'RunScheduled', { task: 'ref-arith', agent: 'faulty-crash', baseModel: 'base', budgetSeconds: 5, seed: 0, mode: 'free' });
    await h.runLedger.record('ref-arith-done', 'BaselineEvaluated', { score: 10, cached: true, evaluatorVersion: '1' });
    await h.runLedger.record('ref-arith-done', 'AgentStarted', { command: 'agent', pid: 42 });
    await h.runLedger.record('ref-arith-done', 'AgentExited', { exitCode: 0, reason: 'completed' });
    await h.runLedger.record('ref-arith-done', 'RunCompleted', { submissions: 0 });
    await h.ledger.execute(id, { type: 'assign', cell: 0, attempt: 1, runId: 'ref-arith-done', worker: h.worker, gpus: [] });
    await h.runner.handle(job(id), h.ctx());
    const p = await h.ledger.read(id);
    expect(h.started).toEqual([]);
    expect(p.cells[0]).toMatchObject({ status: 'completed', runId: 'ref-arith-done' });
  });

  it('a stopping worker hands its job back without using up a retry', async () => {
    const stop = new AbortController();
    const h = setup(async () => {
      stop.abort();
      return { best: null };
    }, 0);
    const id = await h.schedule();
    await h.runner.handle(job(id), h.ctx(stop.signal));
    const p = await h.ledger.read(id);
    expect(p.cells[0]).toMatchObject({ status: 'pending', attempt: 2, retriesUsed: 0 });
    expect(h.runs.stopped).toEqual([h.started[0]]);
  });

  it('skips the jobs of a cancelled campaign', async () => {
    const h = setup(async () => ({ best: 1 }));
    const id = await h.schedule(2);
    await h.service.cancel(id, 'operator');
    await h.runner.handle(job(id, 0), h.ctx());
    expect(h.started).toEqual([]);
    expect((await h.ledger.read(id)).counts.cancelled).toBe(2);
  });

  it('the in-process pool runs every cell at the given concurrency, each once', async () => {
    let running = 0;
    let peak = 0;
    const h = setup(async () => {
      peak = Math.max(peak, ++running);
      await new Promise((r) => setTimeout(r, 20));
      running--;
      return { best: 3 };
    });
    const id = await h.schedule(4);
    const queue = new LocalQueue({ concurrency: 2, handler: h.runner.handle, worker: h.worker });
    const progress = await h.ledger.read(id);
    await queue.enqueue(h.service.pendingJobs(progress));
    await queue.enqueue(h.service.pendingJobs(progress)); // idempotent
    await queue.idle();
    const p = await h.ledger.read(id);
    expect(p.counts.completed).toBe(4);
    expect(h.started).toHaveLength(4);
    expect(peak).toBe(2);
  });
});
