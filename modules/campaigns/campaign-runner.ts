import { setTimeout as sleep } from 'node:timers/promises';
import type { CellProgress, CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { isTerminal } from '../../projections/campaign-progress/campaign-progress.js';
import { analyzeRun } from '../../projections/run-analysis/analyze.js';
import type { FailureClass } from '../../projections/run-analysis/analysis.types.js';
import { artifactBlobReader } from '../../projections/blob-reader.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { A2rlEvent, RunFinished, WorkerInfo } from '../ledger/events/catalog.js';
import type { LedgerService } from '../ledger/ledger.service.js';
import type { RunService, RunSummary } from '../runs/run.service.js';
import { CampaignRuleError } from './campaign.js';
import type { CampaignLedger } from './campaign-ledger.js';
import { ForeignJobError, type CampaignJob, type JobContext } from './campaign-queue.port.js';
import { onThisMachine, processAlive } from './worker-info.js';

/**
 * Failure classes that say the infrastructure, not the agent, failed the run: another attempt is owed.
 * A run stopped by the operator or a campaign is not the agent's result either.
 */
const INFRA_CLASSES: ReadonlySet<FailureClass> = new Set(['infra_error', 'infra_setup', 'infra_model_unreachable', 'cancelled']);
/** How often a running job checks whether its campaign was cancelled. */
const CANCEL_POLL_MS = 5000;
const HOLDER_POLL_MS = 5000;

/** A worker of this machine whose process still exists; a worker elsewhere is not known to be alive. */
const processOfThisMachine = async (worker: WorkerInfo): Promise<boolean> => onThisMachine(worker) && processAlive(worker.pid);

export interface CampaignRunnerOptions {
  ledger: CampaignLedger;
  runs: RunService;
  /** The run ledger (to classify a finished run from its events). */
  runLedger: LedgerService;
  artifacts: ArtifactStore;
  gradingBaseUrl: string;
  /** Puts a retry's job on the queue (the scheduler's or the worker's queue). */
  enqueue: (jobs: CampaignJob[]) => Promise<void>;
  /**
   * Whether the worker an attempt is assigned to is still alive (default: a process of this machine
   * that still exists; a worker elsewhere counts as gone — the distributed worker asks its heartbeats).
   */
  holderAlive?: (worker: WorkerInfo) => Promise<boolean>;
  /** How often a job waits on a live holder before looking again (default 5 s). */
  holderPollMs?: number;
  log?: (line: string) => void;
}

type Outcome = { result: RunFinished; retryable: boolean | 'always' };

/**
 * Executes one campaign job on whichever worker took it: a short script of named steps judged
 * against the campaign's stream, so a job delivered twice, late or after its worker died does the
 * right thing — skip an ended or superseded attempt, settle an attempt whose worker is gone, else run
 * the run and record how it ended (an infrastructure failure is retried; the agent's own is a result).
 */
export class CampaignRunner {
  constructor(private readonly o: CampaignRunnerOptions) {}

  readonly handle = async (job: CampaignJob, ctx: JobContext): Promise<void> => {
    const state = await this.o.ledger.read(job.campaignId);
    const cell = state.cells[job.cell];
    if (!state.scheduled) throw new ForeignJobError(`campaign ${job.campaignId} is not in this worker's ledger`);
    if (!cell) return this.log(job, 'skipped: no such campaign cell');
    if (state.status === 'cancelled' || isTerminal(cell.status) || cell.attempt !== job.attempt) return; // ended or superseded
    if (cell.status === 'running') return this.settleLost(state, cell, job, ctx);
    await this.runAttempt(state, cell, job, ctx);
  };

  /**
   * The attempt was assigned and never finished: its worker died (its lease expired and the queue
   * handed the job on) or the scheduling process was killed. A run that got to its end counts as is;
   * one left open is recorded interrupted and resumed here (docs/resume.md), or, where it cannot be
   * resumed (it never got past its set-up), the cell retried.
   */
  private async settleLost(state: CampaignProgress, cell: CellProgress, job: CampaignJob, ctx: JobContext): Promise<void> {
    if (await this.holderFinishes(state.campaignId, cell)) return;
    const who = cell.worker ? `worker ${cell.worker.id} on ${cell.worker.host}` : 'its worker';
    const runId = cell.runId!;
    const settled = await this.o.runs.settleRun(runId, `${who} was lost while the run was open (campaign ${state.campaignId})`);
    if (settled.state === 'interrupted' && (await this.o.runs.resumeRefusal(runId)) === null) return this.resumeAttempt(cell, job, ctx, runId, who);
    const base = { cell: cell.cell, attempt: cell.attempt, runId };
    const outcome: Outcome =
      settled.state === 'completed'
        ? await this.classify(runId, { ...base, outcome: 'completed', ...scores(settled) })
        : { result: { ...base, outcome: 'lost', reason: `${who} was lost; the run was recorded interrupted` }, retryable: true };
    await this.finish(state.campaignId, outcome);
  }

  /**
   * Waits while the attempt's holder is alive (the queue lost the job, not the worker); true when the
   * holder recorded the attempt's end meanwhile, false when the holder is gone and the attempt still open.
   */
  private async holderFinishes(campaignId: string, cell: CellProgress): Promise<boolean> {
    const alive = this.o.holderAlive ?? processOfThisMachine;
    let waited = false;
    while (cell.worker && (await alive(cell.worker))) {
      if (!waited) this.log({ campaignId, cell: cell.cell }, `its attempt ${cell.attempt} is still held by ${cell.worker.id} on ${cell.worker.host}: waiting for it`);
      waited = true;
      await sleep(this.o.holderPollMs ?? HOLDER_POLL_MS);
      const now = (await this.o.ledger.read(campaignId)).cells[cell.cell];
      if (now.status !== 'running' || now.attempt !== cell.attempt) return true;
    }
    return false;
  }

  private async runAttempt(state: CampaignProgress, cell: CellProgress, job: CampaignJob, ctx: JobContext): Promise<void> {
    const plan = state.scheduled!;
    await this.execute(job, cell, ctx, (track) =>
      this.o.runs.run({
        task: cell.task,
        agent: cell.agent,
        driver: cell.driver,
        budgetSeconds: plan.budgetSeconds,
        seed: cell.seed,
        gradingBaseUrl: this.o.gradingBaseUrl,
        campaign: { id: job.campaignId, cell: cell.cell, attempt: cell.attempt },
        freshBaseline: plan.regradeBaseline === true,
        ...(plan.baselineRepeats ? { baselineRepeats: plan.baselineRepeats } : {}),
        // A worker that hands GPUs out gives the run exactly the ones it holds (none for a CPU job); the
        // in-process pool holds none, and its runs see the host's GPUs.
        gpus: ctx.worker.gpus.length ? ctx.gpus : undefined,
        warn: (m) => this.o.log?.(m),
        onScheduled: async (id) => {
          track(id);
          await this.o.ledger.execute(job.campaignId, { type: 'assign', cell: cell.cell, attempt: cell.attempt, runId: id, worker: ctx.worker, gpus: ctx.gpus });
          this.log(job, `started run ${id} (${describe(cell)}) on ${ctx.worker.id}`);
        },
      }),
    );
  }

  /** The lost holder's run continues on this worker, as the same attempt (RunAssigned resumed); a resume that fails is an infrastructure failure, retried. */
  private async resumeAttempt(cell: CellProgress, job: CampaignJob, ctx: JobContext, runId: string, who: string): Promise<void> {
    try {
      await this.o.ledger.execute(job.campaignId, { type: 'resume', cell: cell.cell, attempt: cell.attempt, runId, worker: ctx.worker, gpus: ctx.gpus });
    } catch (err) {
      if (err instanceof CampaignRuleError) return this.log(job, `skipped: ${err.message}`); // another worker took it up
      throw err;
    }
    this.log(job, `resuming run ${runId} (${describe(cell)}) on ${ctx.worker.id}: ${who} was lost`);
    await this.execute(job, cell, ctx, (track) => {
      track(runId);
      return this.o.runs.resume({ runId, gradingBaseUrl: this.o.gradingBaseUrl, warn: (m) => this.o.log?.(m) });
    });
  }

  /** Runs the attempt's run (`start` names it through `track` as soon as it has an id) and records how it ended. */
  private async execute(job: CampaignJob, cell: CellProgress, ctx: JobContext, start: (track: (runId: string) => void) => Promise<RunSummary>): Promise<void> {
    let runId: string | undefined;
    let cancelled = false;
    const stop = () => void (runId && this.o.runs.stop(runId));
    ctx.signal.addEventListener('abort', stop);
    const watch = setInterval(() => {
      void this.o.ledger.read(job.campaignId).then((s) => {
        if (s.status === 'cancelled') (cancelled = true), stop();
      }, () => undefined);
    }, CANCEL_POLL_MS);
    let outcome: Outcome;
    try {
      const summary = await start((id) => void (runId = id));
      const base = { cell: cell.cell, attempt: cell.attempt, runId: summary.runId };
      if (cancelled) outcome = { result: { ...base, outcome: 'cancelled', reason: 'the campaign was cancelled while the run was going' }, retryable: false };
      else if (ctx.signal.aborted) outcome = { result: { ...base, outcome: 'infra_failed', reason: 'the worker was stopped (SIGTERM/SIGINT); the run was stopped and the job handed back' }, retryable: 'always' };
      else outcome = await this.classify(summary.runId, { ...base, outcome: 'completed', ...scores({ best: summary.best, baseline: summary.baseline }) });
    } catch (err) {
      if (err instanceof CampaignRuleError) return this.log(job, `skipped: ${err.message}`); // another worker took this attempt
      const reason = `set-up failed: ${err instanceof Error ? err.message : String(err)}`.slice(0, 4000);
      outcome = { result: { cell: cell.cell, attempt: cell.attempt, ...(runId ? { runId } : {}), outcome: 'infra_failed', reason }, retryable: ctx.signal.aborted ? 'always' : true };
    } finally {
      clearInterval(watch);
      ctx.signal.removeEventListener('abort', stop);
    }
    await this.finish(job.campaignId, outcome);
  }

  /** A run that completed is the cell's result, unless its failure class says the infrastructure failed it. */
  private async classify(runId: string, result: RunFinished): Promise<Outcome> {
    const events: A2rlEvent[] = [];
    for await (const e of this.o.runLedger.events(runId)) events.push(e);
    const { failure } = await analyzeRun(events, artifactBlobReader(this.o.artifacts));
    if (!INFRA_CLASSES.has(failure.class)) return { result, retryable: false };
    return { result: { ...result, outcome: 'infra_failed', reason: `the run ended in ${failure.class} (${failure.rule})`.slice(0, 4000) }, retryable: true };
  }

  /** Records how the attempt ended; a retry's job goes on the queue. */
  private async finish(campaignId: string, { result, retryable }: Outcome): Promise<void> {
    let state: CampaignProgress;
    try {
      state = await this.o.ledger.execute(campaignId, { type: 'finish', result, retryable });
    } catch (err) {
      if (err instanceof CampaignRuleError) return this.log({ campaignId, cell: result.cell }, `not recorded: ${err.message}`);
      throw err;
    }
    const cell = state.cells[result.cell];
    this.log({ campaignId, cell: result.cell }, `${result.outcome}${result.best !== undefined ? ` best ${result.best}` : ''}${result.reason ? ` (${result.reason})` : ''}${cell.status === 'pending' ? `; retrying as attempt ${cell.attempt}` : ''}`);
    if (cell.status === 'pending' && state.status !== 'cancelled') await this.o.enqueue([{ campaignId, cell: cell.cell, attempt: cell.attempt, gpus: cell.gpus }]);
  }

  private log(job: Pick<CampaignJob, 'campaignId' | 'cell'>, line: string): void {
    this.o.log?.(`[${job.campaignId}] cell ${job.cell}: ${line}`);
  }
}

const describe = (c: CellProgress) => `${c.task} × ${c.agent}${c.driver ? ` × ${c.driver}` : ''} seed ${c.seed}`;

const scores = (s: { best: number | null; baseline: number | null }) => ({
  ...(s.best !== null ? { best: s.best } : {}),
  ...(s.baseline !== null ? { baseline: s.baseline } : {}),
});
