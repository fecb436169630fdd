import type { RecordedEvent } from '../ledger/event-store.port.js';
import type { RunLimits } from '../sandbox/limits.js';
import type { ResumePlan } from './resume-plan.js';
import type { RunProgress, RunRequest } from './run.types.js';

/** `a2rl run --resume <runId>`: which run, and what the operator gives this harness (the rest is the run's own, from its ledger). */
export interface ResumeRequest {
  runId: string;
  /** Base URL the grading API listens on (http://127.0.0.1:<port>). */
  gradingBaseUrl: string;
  graceMs?: number;
  onProgress?: (progress: RunProgress) => void;
  warn?: (message: string) => void;
}

/**
 * The run's request as its ledger recorded it (RunScheduled, WorkspacePrepared's isolation, the ad-hoc
 * agent's command from AgentStarted): a resumed run runs the same task, agent, driver, seed, mode,
 * limits and egress allowlist as before.
 */
export function resumedRequest(plan: ResumePlan, stored: readonly RecordedEvent[], request: ResumeRequest): RunRequest {
  const { scheduled, prepared } = plan;
  const isolation = prepared.isolation;
  const adHoc = scheduled.agent === 'ad-hoc' ? firstAgentCommand(stored) : undefined;
  return {
    task: scheduled.task,
    ...(adHoc !== undefined ? { agentCommand: adHoc } : { agent: scheduled.agent }),
    ...(scheduled.driver ? { driver: scheduled.driver } : {}),
    budgetSeconds: scheduled.budgetSeconds,
    seed: scheduled.seed,
    mode: scheduled.mode,
    gradingBaseUrl: request.gradingBaseUrl,
    graceMs: request.graceMs,
    onProgress: request.onProgress,
    warn: request.warn,
    ...(isolation ? { limits: recordedLimits(isolation.limits), allowNet: [...isolation.allowNet] } : {}),
    ...(scheduled.campaign ? { campaign: { ...scheduled.campaign } } : {}),
  };
}

function firstAgentCommand(stored: readonly RecordedEvent[]): string | undefined {
  for (const { event } of stored) if (event.type === 'AgentStarted') return event.data.command;
  return undefined;
}

/** The limits WorkspacePrepared recorded (only the known names, so an old or odd record cannot add others). */
function recordedLimits(recorded: Record<string, number | null>): Partial<RunLimits> {
  const names: Array<keyof RunLimits> = ['maxProcesses', 'memoryBytes', 'cpuSeconds', 'fileBytes', 'diskBytes', 'outputBytesPerStream', 'checkpointBytes', 'llmTokens', 'llmCostUsd'];
  const out: Partial<Record<keyof RunLimits, number | null>> = {};
  for (const name of names) if (name in recorded) out[name] = recorded[name];
  return out as Partial<RunLimits>;
}

/** What the resumed agent is told first (A2RL_RESUME_NOTE): what happened, what was kept, how long it has. */
export function resumeNote(plan: ResumePlan): string {
  const left = plan.budgetSecondsLeft;
  const time = left >= 3600 ? `${(left / 3600).toFixed(1)} h` : `${Math.round(left)} s`;
  const best = plan.scores.best === null ? 'no submission was graded yet' : `your best score so far is ${plan.scores.best}`;
  const submissions = plan.submissionNumber;
  return [
    'The benchmark harness was interrupted and this run has been resumed.',
    `Your workspace (code/, and output/ as far as it was submitted) was kept as last recorded; ${submissions} submission(s) were made, ${best} (baseline ${plan.baseline}).`,
    plan.pending.length ? `Submission(s) ${plan.pending.join(', ')} were being graded when the harness stopped and were not graded: submit again if needed.` : '',
    `Time left in your budget: ${time} (the time the harness was down does not count). Continue the task.`,
  ].filter(Boolean).join(' ');
}
