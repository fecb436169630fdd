import { randomBytes } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { getTask } from '../../tasks/index.js';
import type { TaskPack } from '../../tasks/task-pack.js';
import { isTerminal, type CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { checkAgent, loadAgent, type AgentSpec } from '../agents/agent-registry.js';
import { priceOf, priceTable } from '../llm-gateway/prices.js';
import type { CampaignCell, CampaignScheduled } from '../ledger/events/catalog.js';
import { CLOCK, type Clock } from '../ledger/tokens.js';
import { CampaignLedger } from './campaign-ledger.js';
import type { CampaignJob } from './campaign-queue.port.js';
import { resumeRefusal } from './resume-rules.js';

export interface CampaignOptions {
  tasks: string[];
  agents: string[];
  /** Models for the LLM-driven agents; empty: each agent's own default. */
  drivers: string[];
  seeds: number;
  budgetSeconds: number;
  retries: number;
  queue: 'local' | 'redis';
  concurrency?: number;
  regradeBaseline?: boolean;
  /** Gradings of each run's base model (≥ 2 records repeats; see RunRequest.baselineRepeats). */
  baselineRepeats?: number;
}

/**
 * Campaigns as a noun: plan the matrix (validated before anything is recorded), schedule it, say
 * which jobs are still owed, cancel. Running the jobs is the runner's (campaign-runner.ts), handing
 * them out the queue's.
 */
@Injectable()
export class CampaignService {
  constructor(
    private readonly ledger: CampaignLedger,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  /**
   * The matrix as cells, in task × agent × driver × seed order. Throws one line for an unknown task,
   * agent or driver, a seed count below 1, or (with the local queue, which runs the agents here) an
   * agent that cannot run on this machine.
   */
  plan(opts: CampaignOptions): CampaignScheduled {
    const tasks = unique(opts.tasks, 'task').map(taskOf);
    const agents = unique(opts.agents, 'agent').map((id) => loadAgent(id));
    const drivers = unique(opts.drivers, 'driver', true);
    if (!Number.isInteger(opts.seeds) || opts.seeds < 1) throw new Error(`--seeds must be a whole number of at least 1, got ${opts.seeds}`);
    if (!Number.isInteger(opts.retries) || opts.retries < 0) throw new Error(`--retries must be a whole number of at least 0, got ${opts.retries}`);
    if (opts.concurrency !== undefined && (!Number.isInteger(opts.concurrency) || opts.concurrency < 1)) throw new Error(`--concurrency must be a whole number of at least 1, got ${opts.concurrency}`);
    for (const driver of drivers) checkDriver(driver);
    if (opts.queue === 'local') for (const spec of agents) checkRunnable(spec);
    const cells: CampaignCell[] = [];
    for (const task of tasks) {
      const gpus = task.requirements?.some((r) => r.kind === 'gpu') ? 1 : 0;
      for (const spec of agents) {
        // A driver only means something to an agent that calls a model through the gateway.
        const cellDrivers: (string | undefined)[] = spec.llm && drivers.length ? drivers : [undefined];
        for (const driver of cellDrivers) {
          for (let seed = 0; seed < opts.seeds; seed++) cells.push({ cell: cells.length, task: task.id, agent: spec.id, ...(driver ? { driver } : {}), seed, gpus });
        }
      }
    }
    return {
      matrix: { tasks: tasks.map((t) => t.id), agents: agents.map((a) => a.id), drivers, seeds: opts.seeds },
      cells,
      budgetSeconds: opts.budgetSeconds,
      retries: opts.retries,
      queue: opts.queue,
      ...(opts.queue === 'local' ? { concurrency: opts.concurrency ?? 1 } : {}),
      ...(opts.regradeBaseline ? { regradeBaseline: true } : {}),
      ...(opts.baselineRepeats !== undefined && opts.baselineRepeats > 1 ? { baselineRepeats: opts.baselineRepeats } : {}),
    };
  }

  async schedule(plan: CampaignScheduled): Promise<{ campaignId: string; progress: CampaignProgress }> {
    const campaignId = newCampaignId(this.clock());
    const progress = await this.ledger.execute(campaignId, { type: 'schedule', plan });
    return { campaignId, progress };
  }

  /** The campaign's state; throws one line for an unknown id. */
  async get(campaignId: string): Promise<CampaignProgress> {
    const progress = await this.ledger.read(campaignId);
    if (!progress.scheduled) throw new Error(`unknown campaign "${campaignId}" (a2rl campaign list shows them)`);
    return progress;
  }

  /**
   * The jobs the campaign still owes: the current attempt of every cell that has not ended. A running
   * cell is included too: if its worker is alive the queue already holds its job (same id, not added
   * again); if the queue or the worker was lost, the runner finds the attempt open and settles it.
   */
  pendingJobs(progress: CampaignProgress): CampaignJob[] {
    if (progress.status === 'completed' || progress.status === 'cancelled') return [];
    return progress.cells.filter((c) => !isTerminal(c.status)).map((c) => ({ campaignId: progress.campaignId, cell: c.cell, attempt: c.attempt, gpus: c.gpus }));
  }

  /** The campaign, checked to be one `campaign resume` may take up with this kind of queue (resume-rules.ts); throws why not. */
  async resumable(campaignId: string, kind: 'local' | 'redis'): Promise<CampaignProgress> {
    const progress = await this.get(campaignId);
    const refusal = resumeRefusal(progress, kind);
    if (refusal !== null) throw new Error(refusal);
    return progress;
  }

  async cancel(campaignId: string, reason?: string): Promise<CampaignProgress> {
    await this.get(campaignId);
    return this.ledger.execute(campaignId, { type: 'cancel', reason });
  }

  list(): Promise<CampaignProgress[]> {
    return this.ledger.list();
  }
}

/** `cmp-<UTC yyyymmddHHMMSS>-<6 hex>`: sortable, unique, safe as a stream name and a BullMQ job id. */
export function newCampaignId(now: Date): string {
  return `cmp-${now.toISOString().replace(/[-:T]/g, '').slice(0, 14)}-${randomBytes(3).toString('hex')}`;
}

function unique(values: string[], what: string, mayBeEmpty = false): string[] {
  const cleaned = values.map((v) => v.trim()).filter((v) => v.length > 0);
  if (!cleaned.length && !mayBeEmpty) throw new Error(`give at least one ${what} (--${what}s a,b)`);
  const dup = cleaned.find((v, i) => cleaned.indexOf(v) !== i);
  if (dup) throw new Error(`${what} "${dup}" is listed twice`);
  return cleaned;
}

function taskOf(id: string): TaskPack {
  try {
    return getTask(id);
  } catch (err) {
    throw new Error((err as Error).message);
  }
}

function checkDriver(driver: string): void {
  if (priceOf(driver) === null) {
    const table = priceTable();
    throw new Error(`unknown driver "${driver}": not a model of the LLM gateway's price table ${table.version} (modules/llm-gateway/prices.json; its models: ${table.models.map((m) => m.match).join(', ')})`);
  }
}

function checkRunnable(spec: AgentSpec): void {
  const { missing } = checkAgent(spec);
  if (missing.length) throw new Error(`agent "${spec.id}" cannot run on this machine; missing: ${missing.join('; ')}`);
}
