import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { Recorder } from '../ledger/recorder.js';
import type { TaskPack } from '../../tasks/task-pack.js';
import type { RunLimits } from '../sandbox/limits.js';
import type { WorkspaceLayout } from '../workspace-fs/layout.js';

/** Everything a run's services need; built by the run orchestrator. */
export interface RunContext {
  runId: string;
  task: TaskPack;
  workspace: WorkspaceLayout;
  /** The task's held-out data: never inside the workspace, never mounted into the sandbox. */
  privateDir: string;
  /** Capability token of this run (travels in GRADING_SERVER_URL and as A2RL_RUN_TOKEN). */
  token: string;
  budgetSeconds: number;
  record: Recorder;
  artifacts: ArtifactStore;
  /** The run's limits (task pack defaults, overridden per run); absent: nothing is limited by the harness. */
  limits?: RunLimits;
  /** The GPU ids this run holds (a campaign worker's devices); absent: every GPU the grading server has. */
  gpus?: string[];
}
