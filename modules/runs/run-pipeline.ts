import { openSession, type RunDeps, type RunSession } from './run-session.js';
import type { RunRequest, RunSummary } from './run.types.js';
import { agentCommand } from './steps/agent-env.js';
import type { RecordedEvent } from '../ledger/event-store.port.js';
import { planResume } from './resume-plan.js';
import { resumedRequest, resumeNote, type ResumeRequest } from './resumed-request.js';
import { evaluationContext, gradeBaseline, type Baselined } from './steps/baseline.js';
import { reopen } from './steps/resume.js';
import { announceAgent, launchOptions, startAgent } from './steps/launch.js';
import { observe } from './steps/observe.js';
import { prepare, schedule, type Prepared } from './steps/prepare.js';
import { archiveHome, recordEnding, seal, watchHome, type Reached } from './steps/settle.js';
import { reportProgress, waitForExitOrBudget } from './steps/wait.js';

/** A run's outcome as far as the pipeline knows it: how far it got, its baseline, and the failure that stopped it. */
interface PipelineProgress {
  reached: Reached;
  baseline?: number;
  failure?: { error: unknown };
}

/**
 * One benchmark run end to end as a script of steps, each handing its product to the next — schedule,
 * prepare (the workspace), grade the baseline, observe (grading API, endpoints, observers), launch the
 * agent, wait for its exit or the budget — and one teardown for every outcome (completed, budget,
 * crash, operator interrupt, set-up failure): undo what was started (the session's disposal stack),
 * record how it ended (settle) and seal. `continueRun` is where a resumed run re-enters, after `prepare`.
 */
export class RunPipeline {
  constructor(private readonly deps: RunDeps) {}

  async run(request: RunRequest): Promise<RunSummary> {
    const s = openSession(this.deps, request);
    return this.drive(s, async (progress) => {
      await schedule(this.deps, s);
      await this.afterPrepare(s, await prepare(this.deps, s), progress);
    });
  }

  /**
   * Re-enters a run after `prepare`: a resumed run comes here with a session and a `Prepared` rebuilt
   * from its ledger (whoever rebuilds them pushes the disposers of what `prepare` would have started).
   */
  continueRun(s: RunSession, prepared: Prepared): Promise<RunSummary> {
    return this.drive(s, (progress) => this.afterPrepare(s, prepared, progress));
  }

  /**
   * Resumes a run whose harness was lost (docs/resume.md): its stored stream read and planned, a session
   * that continues it, the workspace and home found or rebuilt (RunResumed), then the agent launched
   * again with the budget left, its baseline the one recorded. The same teardown as a new run.
   */
  async resume(request: ResumeRequest): Promise<RunSummary> {
    const stored: RecordedEvent[] = [];
    for await (const recorded of this.deps.ledger.stored(request.runId)) stored.push(recorded);
    const plan = planResume(request.runId, stored.map((r) => r.event));
    const runRequest = resumedRequest(plan, stored, request);
    const segment = { number: plan.segment, budgetSeconds: plan.budgetSecondsLeft, usedSeconds: plan.agentSecondsUsed, resume: { note: resumeNote(plan), submissions: plan.submissionNumber, llmSpent: plan.llmSpent } };
    const s = openSession(this.deps, runRequest, { runId: plan.runId, resumeFrom: { stored, scores: plan.scores }, segment });
    return this.drive(s, async (progress) => {
      const prepared = await reopen(this.deps, s, plan);
      progress.baseline = plan.baseline;
      await this.launchAndWait(s, prepared, { score: plan.baseline, evaluation: evaluationContext(prepared) }, progress);
    });
  }

  /** Runs `steps`, then the one teardown whatever happened; the summary, or the failure that stopped the steps. */
  private async drive(s: RunSession, steps: (progress: PipelineProgress) => Promise<void>): Promise<RunSummary> {
    const progress: PipelineProgress = { reached: { stage: 'setup' } };
    try {
      await steps(progress);
    } catch (error) {
      progress.failure = { error };
    }
    await this.teardown(s, progress);
    if (progress.failure) throw progress.failure.error;
    return summarize(s, progress);
  }

  /** Baseline, observers, the agent launched and waited for: `progress` says how far it got. */
  private async afterPrepare(s: RunSession, prepared: Prepared, progress: PipelineProgress): Promise<void> {
    const baselined = await gradeBaseline(this.deps, s, prepared);
    progress.baseline = baselined.score;
    await this.launchAndWait(s, prepared, baselined, progress);
  }

  /** Observers, the agent launched and waited for: `progress` says how far it got. */
  private async launchAndWait(s: RunSession, prepared: Prepared, baselined: Baselined, progress: PipelineProgress): Promise<void> {
    const observed = await observe(this.deps, s, prepared, baselined);
    const command = await agentCommand(this.deps, s, prepared, observed);
    const options = launchOptions(s, prepared, observed, command);
    const agent = await startAgent(this.deps, s, options).catch((err: unknown) => {
      progress.reached = { stage: 'launch-failed' };
      throw err;
    });
    progress.reached = { stage: 'launched', prepared, agent };
    if (prepared.home) watchHome(this.deps, s, prepared.home);
    await announceAgent(this.deps, s, prepared, observed, command, agent);
    await waitForExitOrBudget(this.deps, s, agent, baselined.score);
  }

  /**
   * The one teardown: undo what the steps started (the agent stopped first, then the grading API,
   * endpoints, observers, cgroup), archive the agent's home, record how the run ended, and seal. A
   * ledger failure is thrown only when nothing failed before it; the first teardown failure likewise.
   */
  private async teardown(s: RunSession, progress: PipelineProgress): Promise<void> {
    const { reached, failure } = progress;
    let closeError: { error: unknown } | undefined;
    const keep = (error: unknown) => void (closeError ??= { error });
    await s.stack.dispose().catch(keep);
    if (reached.stage === 'launched' && reached.prepared.home) await archiveHome(this.deps, s, reached.prepared.home).catch(keep);
    try {
      await recordEnding(this.deps, s, reached, failure?.error, keep);
      await seal(this.deps, s);
    } catch (err) {
      // The ledger failed: the lock stays, so the next start records the run as interrupted.
      if (!failure) throw err;
    } finally {
      this.deps.control.forget(s.runId);
    }
    if (closeError && !failure) throw closeError.error;
    if (reached.stage === 'launched' && progress.baseline !== undefined) reportProgress(this.deps, s, reached.agent, progress.baseline);
  }
}

function summarize(s: RunSession, progress: PipelineProgress): RunSummary {
  const { reached, baseline } = progress;
  // A run that returns (no failure) launched its agent after grading the baseline.
  if (reached.stage !== 'launched' || baseline === undefined) throw new Error(`run ${s.runId} ended without its agent having run`);
  const { best } = s.tally;
  return {
    runId: s.runId,
    task: s.task.id,
    agent: s.spec.id,
    driver: s.driver,
    baseline,
    best,
    improvement: best === null ? null : round2(best - baseline),
    submissions: s.tally.submissions.size,
    state: s.guard.state.status,
    exitReason: reached.agent.exitReason,
    sandbox: reached.prepared.sandbox,
    workspace: reached.prepared.workspace.layout.root,
  };
}

const round2 = (n: number) => Math.round(n * 100) / 100;
