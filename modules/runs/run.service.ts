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
import { settleAbandonedRun, storedOutcome } from './abandoned-run.js';
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
import type { RunOutcome, RunRequest, RunSummary } from './run.types.js';

export type { RunMode, RunOutcome, RunProgress, RunRequest, RunSummary } from './run.types.js';

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
   * Runs left open by a harness that died: record RunInterrupted (their events up to the crash are
   * all in the ledger) and kill whatever of their agents survived. Returns the interrupted run ids.
   */
  async recoverInterruptedRuns(): Promise<string[]> {
    const interrupted: string[] = [];
    for (const lock of this.deps.locks.list()) {
      if (lock.pid === process.pid || this.deps.launcher.alive(lock.pid)) continue;
      await settleAbandonedRun(this.deps, lock.runId, `the harness (pid ${lock.pid}) exited while the run was open`, lock);
      interrupted.push(lock.runId);
    }
    return interrupted;
  }
}
