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
  evaluate(checkpointDir: string, privateDir: string, signal?: AbortSignal): Promise<EvaluationResult>;
  /** Present for interactive (L3) tasks. */
  readonly environment?: InteractiveEnvironment;
}
