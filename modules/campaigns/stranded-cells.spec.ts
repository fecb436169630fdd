import { describe, expect, it } from '@jest/globals';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import { until } from '../../test/testing/helpers.js';
import { CampaignLedger } from './campaign-ledger.js';
import { ForeignJobError, jobId, type CampaignJob, type CampaignQueue } from './campaign-queue.port.js';
import { CampaignRunner } from './campaign-runner.js';
import { CampaignService } from './campaign.service.js';
import type { RunService } from '../runs/run.service.js';
import type { LedgerService } from '../ledger/ledger.service.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { JOB_LEFT_QUEUE, watchStrandedCells } from './stranded-cells.js';

// A campaign followed on a shared queue whose jobs vanish (dropped, attempts run out): the follower
// records the lost attempt and retries it within --retries, puts back an assigned attempt's job, and
// leaves alone the cells whose job the queue still holds.

/** A queue that holds what is enqueued until the test "loses" a job. */
class FakeQueue implements CampaignQueue {
  readonly kind = 'redis' as const;
  readonly held = new Map<string, CampaignJob>();
  readonly enqueued: CampaignJob[] = [];
  async enqueue(jobs: readonly CampaignJob[]): Promise<void> {
    for (const job of jobs) {
      this.enqueued.push(job);
      this.held.set(jobId(job), job);
    }
  }
  async drop(): Promise<void> {}
  async holds(job: CampaignJob): Promise<boolean> {
    return this.held.has(jobId(job));
  }
  lose(job: Pick<CampaignJob, 'campaignId' | 'cell' | 'attempt'>): void {
    this.held.delete(jobId(job));
  }
  async close(): Promise<void> {}
}

async function setup(retries: number, seeds = 2) {
  const clock = () => new Date('2026-11-28T10:00:00.000Z');
  const ledger = new CampaignLedger(new MemoryEventStore(), clock);
  const service = new CampaignService(ledger, clock);
  const plan = service.plan({ tasks: ['ref-arith'], agents: ['faulty-crash'], drivers: [], seeds, budgetSeconds: 5, retries, queue: 'redis' });
  const { campaignId } = await service.schedule(plan);
  const queue = new FakeQueue();
  await queue.enqueue(service.pendingJobs(await ledger.read(campaignId)));
  const lines: string[] = [];
  const stop = new AbortController();
  const watching = watchStrandedCells(campaignId, { ledger, queue, intervalMs: 5, log: (l) => lines.push(l), signal: stop.signal });
  const finish = async () => {
    stop.abort();
    await watching;
  };
  return { ledger, queue, campaignId, lines, finish };
}

describe('watchStrandedCells', () => {
  it('records a pending attempt whose job left the queue as lost and retries it as the next attempt', async () => {
    const h = await setup(1);
    h.queue.lose({ campaignId: h.campaignId, cell: 1, attempt: 1 });
    const p = await until('cell 1 retried', async () => {
      const s = await h.ledger.read(h.campaignId);
      return s.cells[1].attempt === 2 ? s : null;
    });
    expect(p.cells[1]).toMatchObject({ status: 'pending', attempt: 2, retriesUsed: 1, reason: JOB_LEFT_QUEUE });
    expect(p.cells[0]).toMatchObject({ status: 'pending', attempt: 1, retriesUsed: 0 }); // its job is still held
    expect(await h.queue.holds({ campaignId: h.campaignId, cell: 1, attempt: 2, gpus: 0 })).toBe(true);
    expect(h.lines).toEqual([`[${h.campaignId}] cell 1: attempt 1 was lost: ${JOB_LEFT_QUEUE}; retrying as attempt 2`]);
    await h.finish();
  });

  it('fails the cell when its retries are used up, and the campaign ends', async () => {
    const h = await setup(0, 1);
    h.queue.lose({ campaignId: h.campaignId, cell: 0, attempt: 1 });
    const p = await until('the campaign ended', async () => {
      const s = await h.ledger.read(h.campaignId);
      return s.status === 'completed' ? s : null;
    });
    expect(p.cells[0]).toMatchObject({ status: 'failed', attempt: 1 });
    expect(p.counts).toMatchObject({ failed: 1, completed: 0 });
    await h.finish();
  });

  it('puts back the job of an assigned attempt that no queue holds, for a worker to settle', async () => {
    const h = await setup(1, 1);
    const worker = { id: 'w-gone', host: 'elsewhere', pid: 1, gpus: [] };
    await h.ledger.execute(h.campaignId, { type: 'assign', cell: 0, attempt: 1, runId: 'run-a', worker, gpus: [] });
    const before = h.queue.enqueued.length;
    h.queue.lose({ campaignId: h.campaignId, cell: 0, attempt: 1 });
    await until('the job put back', async () => h.queue.enqueued.length > before || null);
    expect(h.queue.enqueued.at(-1)).toEqual({ campaignId: h.campaignId, cell: 0, attempt: 1, gpus: 0 });
    expect((await h.ledger.read(h.campaignId)).cells[0]).toMatchObject({ status: 'running', attempt: 1 }); // settling is the worker's
    expect(h.lines[0]).toContain('attempt 1 is assigned but no queue holds its job: put back on the queue to be settled');
    await h.finish();
  });

  it('leaves a campaign alone while the queue holds every job', async () => {
    const h = await setup(1);
    await new Promise((r) => setTimeout(r, 60)); // many looks
    await h.finish();
    expect(h.lines).toEqual([]);
    expect((await h.ledger.events(h.campaignId)).map((e) => e.type)).toEqual(['CampaignScheduled', 'RunRequested', 'RunRequested']);
  });
});

describe('CampaignRunner and a job of a campaign its ledger does not hold', () => {
  it('refuses it as a foreign job (the queue hands it back untouched) instead of dropping it', async () => {
    const clock = () => new Date('2026-11-28T10:00:00.000Z');
    const ledger = new CampaignLedger(new MemoryEventStore(), clock);
    const runner = new CampaignRunner({ ledger, runs: {} as RunService, runLedger: {} as LedgerService, artifacts: {} as ArtifactStore, gradingBaseUrl: 'http://127.0.0.1:1', enqueue: async () => undefined });
    const worker = { id: 'w1', host: 'h', pid: 1, gpus: [] };
    const handled = runner.handle({ campaignId: 'elsewhere-1', cell: 0, attempt: 1, gpus: 0 }, { worker, gpus: [], signal: new AbortController().signal });
    await expect(handled).rejects.toThrow(ForeignJobError);
    await expect(handled).rejects.toThrow("campaign elsewhere-1 is not in this worker's ledger");
    expect(await ledger.events('elsewhere-1')).toEqual([]);
  });
});
