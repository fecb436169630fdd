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
import type { RunLimits } from '../modules/sandbox/limits.js';
import type { EvalProtocol } from './eval-protocol.js';

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
  /**
   * What the evaluator saw and decided for each graded item (the model's raw completion, the
   * prediction taken from it, the verdict), JSON-serialisable; stored as an NDJSON blob that
   * SubmissionGraded.items references, so the grade can be re-checked item by item.
   */
  items?: readonly GradedItem[];
}

/** One graded item of the private set: `index` is its row in the private file, the rest is the evaluator's own. */
export interface GradedItem {
  index: number;
  [field: string]: unknown;
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

type Awaitable<T> = T | Promise<T>;

/** One episode of an interactive (L3) environment; in-process games answer synchronously, environment servers asynchronously. */
export interface EnvSession {
  reset(): Awaitable<EnvResetResult>;
  step(action: string): Awaitable<EnvStepResult>;
  /** Releases what the session holds (an environment server's session); optional. */
  close?(): Awaitable<void>;
}

/** The training environment of one run: opened on the run's first `/env/reset`, closed when the run ends. */
export interface TrainingEnvironment {
  /** A new session on a training layout/game/session (never a held-out one); `seed` picks it. */
  createSession(seed: number): Awaitable<EnvSession>;
  close?(): Awaitable<void>;
}

export interface InteractiveEnvironment {
  /** Name recorded in RolloutBatchRecorded.env. */
  readonly name: string;
  /** Maximum steps per episode; a step past it ends the episode with done = true. */
  readonly maxSteps: number;
  /** Opens the training environment for one run (e.g. starts its environment server). */
  open(ctx: EnvironmentContext, signal?: AbortSignal): Awaitable<TrainingEnvironment>;
}

/** An environment server speaking the a2rl environment protocol (docs/paper-tasks.md); `stop()` ends its process tree. */
export interface EnvServer {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  baseUrl: string;
  /** Bearer token the server requires on every request but `/health`; null for servers a user runs (configured URL). */
  token: string | null;
  stop(): Promise<void>;
}

/** What the harness lends interactive tasks: environment servers started from configured commands. */
export interface EnvironmentContext {
  /** Starts (or connects to the configured URL of) the environment server `name` (`alfworld`, `webshop`). */
  envServer(name: string, signal?: AbortSignal): Promise<EnvServer>;
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

/** What the harness lends an evaluator that needs model serving, a judge or an environment server (paper tasks). */
export interface EvaluationContext extends EnvironmentContext {
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
  /** An environment server (`name` as in EnvironmentContext.envServer) and the Python module its default backend imports. */
  | { kind: 'env-server'; name: string; pythonModule: string; hint: string }
  /** An environment variable naming a directory (e.g. ALFWORLD_DATA). */
  | { kind: 'env-var'; name: string; hint: string };

export interface TaskPack {
  readonly id: string;
  readonly level: TaskLevel;
  readonly title: string;
  /** Directory name of the base checkpoint under `models/`. */
  readonly baseModel: string;
  /** Bump when the evaluator or the private set changes: invalidates cached baselines. */
  readonly evaluatorVersion: string;
  /**
   * The paper tasks' evaluation protocol (`tasks/<task>/protocol.json`, checked at load): split,
   * prompt, request settings, post-processing and named deviations. Its hash is part of the cache key.
   */
  readonly protocol?: EvalProtocol;
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
  /** Resource limits of its runs (default: REFERENCE_LIMITS for reference packs, PAPER_LIMITS otherwise). */
  readonly limits?: Partial<RunLimits>;
}
