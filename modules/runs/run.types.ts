import type { RunState } from '../ledger/run-lifecycle.js';
import type { RunLimits } from '../sandbox/limits.js';
import type { SandboxKind } from '../sandbox/sandbox.js';
import type { RunMode } from './instructions.js';

export type { RunMode } from './instructions.js';

export interface RunRequest {
  task: string;
  /** An agent folder under modules/agents/ … */
  agent?: string;
  /** … or an ad-hoc shell command run with `bash -c` in the workspace. */
  agentCommand?: string;
  driver?: string;
  budgetSeconds: number;
  seed: number;
  mode?: RunMode;
  /** Base URL the grading API listens on (http://127.0.0.1:<port>). */
  gradingBaseUrl: string;
  /** SIGTERM → SIGKILL grace at budget expiry. */
  graceMs?: number;
  onProgress?: (progress: RunProgress) => void;
  /** Overrides of the task's resource limits (`a2rl run --limit name=value`). */
  limits?: Partial<RunLimits>;
  /** Hosts the agent may reach through the egress proxy (`--allow-net`); default none. */
  allowNet?: string[];
  /** Where to say the run is unsandboxed; defaults to the DIAGNOSTICS port (stderr). */
  warn?: (message: string) => void;
  /** The campaign job this run is an attempt of (recorded in RunScheduled). */
  campaign?: { id: string; cell: number; attempt: number };
  /** Called once RunScheduled is recorded, before anything else; a throw fails the run's set-up. */
  onScheduled?: (runId: string) => Promise<void>;
  /** Grade the baseline afresh instead of taking it from the cache (a campaign measuring the noise floor). */
  freshBaseline?: boolean;
  /** Grade the base model this many times in all (≥ 2: the extra gradings are GradingRepeated events, the task's noise floor). */
  baselineRepeats?: number;
  /** GPU ids this run holds on its worker: the agent's CUDA_VISIBLE_DEVICES. */
  gpus?: string[];
}

/** How a run stored in the ledger ended, as a campaign needs it (see RunService.settleRun). */
export interface RunOutcome {
  state: 'completed' | 'interrupted';
  best: number | null;
  baseline: number | null;
  /** Whether this call recorded the RunInterrupted (the run had been left open). */
  interruptedNow: boolean;
}

export interface RunProgress {
  runId: string;
  task: string;
  elapsedS: number;
  remainingS: number;
  submissions: number;
  best: number | null;
  baseline: number;
}

export interface RunSummary {
  runId: string;
  task: string;
  agent: string;
  driver: string | null;
  baseline: number;
  best: number | null;
  improvement: number | null;
  submissions: number;
  /** How the run ended, as its events say (run-lifecycle): completed, or cancelled when the operator or a campaign stopped the agent. */
  state: RunState | null;
  exitReason: string;
  sandbox: SandboxKind;
  workspace: string;
}
