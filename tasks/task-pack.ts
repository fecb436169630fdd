/**
 * A benchmark task pack: what the agent sees (description, training data, a base checkpoint) and
 * what it never sees (the private held-out set and the evaluator). Packs are deterministic: the same
 * pack version always materialises byte-identical files, so baselines can be cached per
 * (task, base model, evaluator version).
 *
 * A checkpoint is a directory holding `manifest.json` (`{"format": "<pack format id>", ...}`) and the
 * weights the pack's evaluator loads (for the reference packs, small JSON files). Agents write
 * checkpoints under `output/` and submit their path to the grading API.
 */
export type TaskLevel = 1 | 2 | 3;

export interface TaskPaths {
  /** Files fetched by `a2rl data fetch <task>` (paper tasks); absent for generated reference packs. */
  datasetDir?: string;
  /** Agent-visible training data (mounted read-only at `<workspace>/data`). */
  dataDir: string;
  /** The base checkpoint (mounted read-only at `<workspace>/models/<baseModel>`). */
  modelDir: string;
  /** Held-out evaluation data: outside every workspace, never mounted into a sandbox. */
  privateDir: string;
}

export interface EvaluationResult {
  /** 0–100. */
  score: number;
  /** Evaluator specifics (accuracy, win rates, per-type success…); small, JSON-serialisable. */
  details: Record<string, unknown>;
}

/** The submitted checkpoint cannot be loaded (missing/garbled manifest or weights): the agent's fault. */
export class InvalidCheckpointError extends Error {
  override readonly name = 'InvalidCheckpointError';
}

/** The evaluator itself failed (bug, resource): never blamed on the agent, never cached. */
export class EvaluatorError extends Error {
  override readonly name = 'EvaluatorError';
}

export interface EnvStepResult {
  observation: string;
  reward: number;
  done: boolean;
  admissibleActions: string[];
  info: Record<string, unknown>;
}

export interface EnvResetResult {
  observation: string;
  admissibleActions: string[];
  info: Record<string, unknown>;
}

/** A training-time interactive environment session (L3), driven through the grading API. */
export interface EnvSession {
  reset(): EnvResetResult;
  step(action: string): EnvStepResult;
}

export interface InteractiveEnvironment {
  /** Name recorded in RolloutBatchRecorded.env. */
  readonly name: string;
  /** Maximum steps per episode; a step past it ends the episode with done = true. */
  readonly maxSteps: number;
  /** A new session on a training layout (never a held-out one); `seed` picks the layout. */
  createSession(seed: number): EnvSession;
}

/** An OpenAI-compatible endpoint (base URL ends before `/v1`). */
export interface OpenAiEndpoint {
  baseUrl: string;
  model: string;
  apiKey?: string;
}

/** A checkpoint being served for one evaluation; `stop()` ends the server's whole process tree. */
export interface ServedModel extends OpenAiEndpoint {
  stop(): Promise<void>;
}

/** What the harness lends an evaluator that needs model serving or a judge (paper tasks). */
export interface EvaluationContext {
  /** Serves the checkpoint behind an OpenAI-compatible API (vLLM by default) until `stop()`. */
  serve(checkpointDir: string, signal?: AbortSignal): Promise<ServedModel>;
  /** 'cpu' or a GPU index; gradings on one device are serialised by the caller. */
  device: string;
  /** The configured judge for judge-based tasks, null when none is configured. */
  judge: OpenAiEndpoint | null;
}

/** Something a task needs on the machine; `a2rl doctor` checks these. */
export type TaskRequirement =
  | { kind: 'gpu' }
  | { kind: 'command'; name: string; hint: string }
  | { kind: 'dataset' }
  | { kind: 'judge' }
  | { kind: 'search' }
  | { kind: 'env-server'; name: string; hint: string };

export interface TaskPack {
  readonly id: string;
  readonly level: TaskLevel;
  readonly title: string;
  /** Directory name of the base checkpoint under `models/`. */
  readonly baseModel: string;
  /** Bump when the evaluator or the private set changes: invalidates cached baselines. */
  readonly evaluatorVersion: string;
  /** Markdown shown to the agent as `description.md`. */
  readonly description: string;
  /** Writes the training data, base checkpoint and private set (deterministic). */
  materialize(paths: TaskPaths): Promise<void>;
  /** Scores a checkpoint directory on the private set. Throws InvalidCheckpointError or EvaluatorError. */
  evaluate(checkpointDir: string, privateDir: string, signal?: AbortSignal, ctx?: EvaluationContext): Promise<EvaluationResult>;
  /** Reference packs run by `a2rl demo` (CPU, seconds); paper tasks are not. */
  readonly reference?: boolean;
  /** What the machine needs for this task (checked by `a2rl doctor`); none for reference packs. */
  readonly requirements?: readonly TaskRequirement[];
  /** Present for interactive (L3) tasks. */
  readonly environment?: InteractiveEnvironment;
}
