import type { Interruptions } from './interruptions.js';
import type { UsageTotals } from '../transcript/transcript.js';
import type { RunState } from '../run-state.js';
import type { RepeatSeries } from './grading-repeats.js';
import type { EnvCopyFinding } from './env-copy.js';

/**
 * What the post-hoc analysis of one run derives from its events (pure; see docs/analysis.md).
 * Times are seconds from AgentStarted (or RunScheduled when the agent never started), computed from
 * the events' occurredAt strings — never from the wall clock.
 */
export type FailureClass =
  | 'success'
  | 'timeout_no_submission'
  | 'copy_model_fallback'
  | 'code_error_runtime'
  | 'rollout_logic_wrong'
  | 'training_diverged'
  | 'invalid_checkpoint'
  | 'no_improvement'
  | 'agent_crash'
  | 'infra_error'
  | 'infra_setup'
  | 'infra_llm_limit'
  | 'infra_model_unreachable'
  | 'cancelled';

export type Route = 'sft' | 'grpo' | 'ppo' | 'dpo' | 'online_rl_other' | 'none' | 'copy_model';

/** A reference to the event(s) behind a claim: every claim in a report cites seqs. */
export type Evidence = number[];

export interface SubmissionAnalysis {
  /** 1-based position in submission order. */
  index: number;
  submissionId: string;
  /** Seq of SubmissionReceived (or of SubmissionRejected when refused before archiving). */
  seq: number;
  atS: number;
  modelPath: string | null;
  /** sha256 of the checkpoint manifest blob (content identity), null when never archived. */
  checkpointSha256: string | null;
  status: 'graded' | 'rejected';
  /** Graded score; 0 for rejected submissions in the trajectory. */
  score: number;
  rejectedReason: string | null;
  valid: boolean;
  isCopyOfBase: boolean;
  duplicateOf: string | null;
  /**
   * code/ files changed since the previous submission (or since start), by the FileChanged events in
   * between; line counts from the one line diff (line-diff.ts) of each change's content before and after.
   */
  codeChanges: { path: string; op: string; linesAdded: number; linesRemoved: number; sha256: string | null; previousSha256: string | null; seq: number }[];
  /** Processes started since the previous submission. */
  processes: { pid: number; argv: string[]; kind: string; startSeq: number; exitSeq: number | null; exitCode: number | null; signal: string | null; durationS: number | null }[];
  rollouts: { episodes: number; steps: number; successRate: number; batches: number };
  route: { declared: Route; executed: Route; evidence: Evidence };
  evidence: Evidence;
}

export interface ProcessMetrics {
  valid_submission_rate: number | null;
  first_valid_idx: number | null;
  first_valid_delay: number | null;
  score_trajectory: number[];
  time_to_first_improvement: number | null;
  time_to_best: number | null;
  monotonic_ratio: number | null;
  copy_model_count: number;
  time_used_ratio: number | null;
  last_submit_gap: number | null;
  training_launches: number;
  total_training_time: number;
  rollout_episodes: number;
  code_revisions_between_submissions: number[];
}

/** Model calls of one model, or of the whole run (docs/analysis.md, "LLM usage"). */
export interface LlmStats extends UsageTotals {
  /** Every recorded call (token counts and listings included). */
  calls: number;
  /** Calls to an API where the model generates (not token counts or model listings). */
  billableCalls: number;
  /** Answered calls of the agent's tool loop (the transcript's turns). */
  turns: number;
  /** Calls per outcome other than `ok`. */
  errors: Record<string, number>;
  /** Medians (nearest rank) over the answered (`ok`) calls; null without one. */
  latencyP50Ms: number | null;
  ttftP50Ms: number | null;
}

export interface LlmModelUsage extends LlmStats {
  /** modelAnswered, else what the same requested name was answered as in this run, else modelRequested. */
  model: string;
  providers: string[];
  /** Seqs of the model's LlmCallRecorded events. */
  evidence: Evidence;
}

/** The run's model calls through its LLM gateway; null for a run without a gateway and without calls. */
export interface LlmAnalysis {
  /** AgentStarted.gateway: the agent is LLM-driven; null when calls were recorded without it. */
  gateway: { providers: string[]; url: string; evidence: Evidence } | null;
  /** Most-used first: by turns, then billable calls, then output tokens, then name. */
  models: LlmModelUsage[];
  totals: LlmStats;
  priceTables: string[];
  evidence: Evidence;
}

export interface RunAnalysis {
  runId: string;
  task: string | null;
  agent: string | null;
  /** The model the agent used most (LlmCallRecorded: `llm.models[0]`), else RunScheduled.driver. */
  driver: string | null;
  /** RunScheduled.driver (`--driver`), as declared. */
  declaredDriver: string | null;
  /** Both the declared and the used driver are known and name different models. */
  driverMismatch: boolean;
  baseModel: string | null;
  budgetSeconds: number | null;
  mode: string | null;
  /** The run-lifecycle state (null before any lifecycle event); see modules/ledger/run-lifecycle.ts. */
  state: RunState | null;
  scheduledAt: string | null;
  baseline: number | null;
  /**
   * BaselineEvaluated.cached of that baseline: false when it was graded afresh for this run (such
   * gradings make the scoreboard's noise floor), true when reused from the cache; null without one.
   */
  baselineCached: boolean | null;
  /** Repeated gradings (GradingRepeated) by series; absent when the run has none (grading-repeats.ts). */
  gradingRepeats?: RepeatSeries[];
  best: number | null;
  improvement: number | null;
  durationS: number | null;
  exitReason: string | null;
  sandbox: string | null;
  /** Host path of the run's workspace (WorkspacePrepared). */
  workspace: string | null;
  submissions: SubmissionAnalysis[];
  /** Submissions received but not yet graded or rejected (a live run); not in `submissions` or the metrics. */
  pendingSubmissions: number;
  metrics: ProcessMetrics;
  /**
   * The failure taxonomy's verdict on the events so far. Provisional while the run is open: readers
   * that list runs show it only once the run has ended (failureClassOf in analyze.ts).
   */
  failure: { class: FailureClass; rule: string; evidence: Evidence };
  route: { best: Route; declared: Route; evidence: Evidence };
  llm: LlmAnalysis | null;
  /** Signs the agent played an own copy of the interactive environment (unrecorded episodes); absent when none (env-copy.ts). */
  envCopy?: EnvCopyFinding;
  /** The run's harness was lost (and the run resumed): count, downtime, agent time the record cannot show; absent when never (interruptions.ts). */
  interruptions?: Interruptions;
  eventCount: number;
  lastSeq: number;
}
