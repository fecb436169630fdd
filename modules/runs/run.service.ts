import { Inject, Injectable } from '@nestjs/common';
import type { AgentSpec } from '../agents/agent-registry.js';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { BaselineCache } from '../grading/baseline-cache.js';
import { GradingSockets } from '../grading/grading-sockets.js';
import { OPERATOR_TOKEN } from '../grading/grading.options.js';
import { RunRegistry } from '../grading/run-registry.js';
import { LedgerService } from '../ledger/ledger.service.js';
import { RUN_LOCKS, type RunLocks } from '../ledger/run-locks.port.js';
import { CLOCK, type Clock } from '../ledger/tokens.js';
import { SETTINGS, type Settings } from '../settings/settings.port.js';
import { resumesOf, settleAbandonedRun, storedOutcome } from './abandoned-run.js';
import { RunControl } from './run-control.js';
import { RunPipeline } from './run-pipeline.js';
import { resolveAgent, type RunDeps } from './run-session.js';
import {
  AGENT_LAUNCHER,
  DIAGNOSTICS,
  ENVIRONMENT,
  RUN_IDS,
  SANDBOX_PLANNER,
  TASK_CATALOG,
  type AgentLauncher,
  type Diagnostics,
  type Environment,
  type RunIds,
  type SandboxPlanner,
  type TaskCatalog,
} from './run.ports.js';
import { planResume, ResumeRefusedError } from './resume-plan.js';
import type { ResumeRequest } from './resumed-request.js';
import type { RunOutcome, RunRequest, RunSummary } from './run.types.js';

export type { RunMode, RunOutcome, RunProgress, RunRequest, RunSummary } from './run.types.js';
export type { ResumeRequest } from './resumed-request.js';
export { ResumeRefusedError } from './resume-plan.js';

/**
 * Benchmark runs, as the rest of the harness calls them: start one (the run pipeline, run-pipeline.ts),
 * stop agents (an operator interrupt, a campaign), and close runs whose harness is gone (one path,
 * abandoned-run.ts, for a campaign settling a lost run and for recovery at start).
 */
@Injectable()
export class RunService {
  private readonly deps: RunDeps;
  private readonly control = new RunControl();
  private readonly pipeline: RunPipeline;

  constructor(
    @Inject(SETTINGS) settings: Settings,
    ledger: LedgerService,
    @Inject(ARTIFACT_STORE) artifacts: ArtifactStore,
    registry: RunRegistry,
    baselines: BaselineCache,
    @Inject(CLOCK) clock: Clock,
    @Inject(RUN_IDS) ids: RunIds,
    @Inject(RUN_LOCKS) locks: RunLocks,
    @Inject(AGENT_LAUNCHER) launcher: AgentLauncher,
    @Inject(TASK_CATALOG) tasks: TaskCatalog,
    @Inject(SANDBOX_PLANNER) sandboxes: SandboxPlanner,
    gradingSockets: GradingSockets,
    @Inject(OPERATOR_TOKEN) operatorToken: string,
    @Inject(ENVIRONMENT) env: Environment,
    @Inject(DIAGNOSTICS) diagnostics: Diagnostics,
  ) {
    const control = this.control;
    this.deps = { settings, ledger, artifacts, registry, baselines, clock, ids, locks, launcher, tasks, sandboxes, gradingSockets, operatorToken, env, diagnostics, control };
    this.pipeline = new RunPipeline(this.deps);
  }

  /** Fails before anything is recorded when the task or agent is unknown or the agent cannot run here. */
  resolveAgent(request: Pick<RunRequest, 'agent' | 'agentCommand'>): AgentSpec {
    return resolveAgent(request);
  }

  /**
   * Operator interrupt (Ctrl-C): every running agent is stopped as at budget expiry (SIGTERM, grace,
   * SIGKILL; `AgentExited.reason` "killed") and its run then closes as usual: gradings in flight
   * finish, rollouts are flushed, environment servers stopped, the run sealed. No new run starts.
   */
  async interruptAll(): Promise<void> {
    await this.control.interruptAll();
  }

  /** Stops one run's agent for its campaign, as at budget expiry; the run then closes as usual (cancelled). False when it is not running here. */
  async stop(runId: string): Promise<boolean> {
    return this.control.stop(runId, 'campaign');
  }

  /**
   * How a stored run ended. A run left open by a harness that is gone (a worker that died; the caller
   * knows it is gone) is recorded interrupted and sealed first. Its lock, if on this machine, is removed.
   */
  async settleRun(runId: string, reason: string): Promise<RunOutcome> {
    const { state, best, baseline } = await storedOutcome(this.deps, runId);
    if (state !== null) return { state, best, baseline, interruptedNow: false };
    const lock = this.deps.locks.list().find((l) => l.runId === runId);
    await settleAbandonedRun(this.deps, runId, reason, lock);
    return { state: 'interrupted', best, baseline, interruptedNow: true };
  }

  async run(request: RunRequest): Promise<RunSummary> {
    if (this.control.interrupted) throw new Error('interrupted by the operator: no new run is started');
    return this.pipeline.run(request);
  }

  /**
   * Resumes a run whose harness was lost (docs/resume.md). A run still open is first settled as
   * abandoned when its harness is known gone: its lock here names a dead process, or the operator says
   * so (`harnessGone`: its machine died). A run whose harness still runs, and one that is completed,
   * cancelled, failed at set-up or unknown, is refused in one line (ResumeRefusedError), nothing recorded.
   */
  async resume(request: ResumeRequest, opts: { harnessGone?: boolean } = {}): Promise<RunSummary> {
    if (this.control.interrupted) throw new Error('interrupted by the operator: no run is resumed');
    const { state } = await storedOutcome(this.deps, request.runId);
    if (state === null) await this.settleOpenRun(request.runId, opts.harnessGone === true);
    return this.pipeline.resume(request);
  }

  /** Why the stored run cannot be resumed (one line), or null when it can be (docs/resume.md). */
  async resumeRefusal(runId: string): Promise<string | null> {
    const events = [];
    for await (const event of this.deps.ledger.events(runId)) events.push(event);
    try {
      planResume(runId, events);
      return null;
    } catch (error) {
      if (error instanceof ResumeRefusedError) return error.message;
      throw error;
    }
  }

  /** An open run to be resumed: settled when its harness is known gone, else refused. */
  private async settleOpenRun(runId: string, harnessGone: boolean): Promise<void> {
    const lock = this.deps.locks.list().find((l) => l.runId === runId);
    if (lock && (lock.pid === process.pid || this.deps.launcher.alive(lock.pid))) {
      throw new ResumeRefusedError(`run ${runId} cannot be resumed: it is still running (harness pid ${lock.pid} on this machine)`);
    }
    if (!lock && !harnessGone) {
      const events = this.deps.ledger.events(runId)[Symbol.asyncIterator]();
      if ((await events.next()).done) throw new ResumeRefusedError(`run ${runId} is not in this ledger`);
      throw new ResumeRefusedError(`run ${runId} cannot be resumed: it is open and its harness is not on this machine; if that harness is gone for good (its machine died), add --harness-gone`);
    }
    const reason = lock ? `the harness (pid ${lock.pid}) exited while the run was open` : 'the operator declared its harness gone (a2rl run --resume --harness-gone)';
    await settleAbandonedRun(this.deps, runId, reason, lock);
  }

  /**
   * Runs left open by a harness that died: record RunInterrupted (their events up to the crash are
   * all in the ledger) and kill whatever of their agents survived. Returns the interrupted run ids.
   */
  async recoverInterruptedRuns(): Promise<string[]> {
    const interrupted: string[] = [];
    for (const lock of this.deps.locks.list()) {
      if (lock.pid === process.pid || this.deps.launcher.alive(lock.pid)) continue;
      if ((await storedOutcome(this.deps, lock.runId)).state !== null || (await resumesOf(this.deps, lock.runId)) >= (lock.segment ?? 1)) {
        // Closed, or resumed, meanwhile elsewhere (another machine took the run over): only what is left here goes.
        if (lock.pidFile) await this.deps.launcher.killLeftovers(lock.pidFile).catch(() => 0);
        this.deps.locks.remove(lock.runId);
        continue;
      }
      await settleAbandonedRun(this.deps, lock.runId, `the harness (pid ${lock.pid}) exited while the run was open`, lock);
      interrupted.push(lock.runId);
    }
    return interrupted;
  }
}
