import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { EventData, EventType } from '../ledger/events/catalog.js';
import type { TaskPack } from '../../tasks/task-pack.js';
import type { RunLimits } from './sandbox/limits.js';

/** Records one event of the current run (validated, numbered and made durable by the LedgerService). */
export type Recorder = <T extends EventType>(type: T, data: EventData<T>) => Promise<unknown>;

/** Paths of a run's workspace, laid out as in the paper. */
export interface WorkspaceLayout {
  /** `<workspacesRoot>/<runId>`: the agent's cwd and `WORKSPACE`. */
  root: string;
  codeDir: string; // <root>/code
  dataDir: string; // <root>/data (read-only to the agent)
  modelsDir: string; // <root>/models
  baseModelDir: string; // <root>/models/<baseModel> (read-only to the agent)
  outputDir: string; // <root>/output
  descriptionFile: string; // <root>/description.md
  instructionsFile: string; // <root>/instructions.md
  runMetaFile: string; // <root>/run_meta.json
}

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
