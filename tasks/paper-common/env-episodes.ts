import { EnvClient, type EnvHealth } from '../../modules/serving/env-client.js';
import {
  EvaluatorError,
  type EnvironmentContext,
  type EnvResetResult,
  type EnvSession,
  type EnvStepResult,
  type EvaluationContext,
  type OpenAiEndpoint,
  type TrainingEnvironment,
} from '../task-pack.js';
import type { RequestSettings } from './protocol.js';
import { generate, mapLimit, withServedModel, type GenerationInput } from './served-chat.js';

/**
 * The L3 tasks served by an environment server (ALFWorld, WebShop): the training environment an
 * agent rolls out in through `/env/*`, and the evaluation loop that plays every private episode
 * with the served checkpoint.
 */

/** Opens the run's training environment: starts the server, serves only its `train` split. */
export async function openServerTraining(envName: string, maxSteps: number, ctx: EnvironmentContext, signal?: AbortSignal): Promise<TrainingEnvironment> {
  const server = await ctx.envServer(envName, signal);
  try {
    const client = new EnvClient(server);
    const { splits } = await client.health(signal);
    if (splits.train < 1) throw new EvaluatorError(`the ${envName} environment server has an empty train split`);
    return {
      // Any non-negative seed picks a training game: seed modulo the split size.
      createSession: (seed) => new ServerSession(client, splits.train, seed, maxSteps),
      close: () => server.stop(),
    };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

/** One training episode on the server; ends (done) at `maxSteps` whatever the server says. */
class ServerSession implements EnvSession {
  private id: string | null = null;
  private steps = 0;

  constructor(
    private readonly client: EnvClient,
    private readonly trainSize: number,
    private readonly seed: number,
    private readonly maxSteps: number,
  ) {
    if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`seed must be a non-negative integer; got ${seed}`);
  }

  async reset(): Promise<EnvResetResult> {
    const first = await this.client.reset('train', this.seed % this.trainSize);
    this.id = first.sessionId;
    return { observation: first.observation, admissibleActions: first.admissibleActions, info: first.info };
  }

  async step(action: string): Promise<EnvStepResult> {
    if (this.id === null) throw new Error('step before reset');
    const result = await this.client.step(this.id, action);
    this.steps++;
    if (result.done) {
      this.id = null;
      return result;
    }
    if (this.steps < this.maxSteps) return result;
    await this.close();
    return { ...result, done: true, admissibleActions: [], info: { ...result.info, truncated: true } };
  }

  async close(): Promise<void> {
    const id = this.id;
    this.id = null;
    if (id !== null) await this.client.close(id).catch(() => undefined);
  }
}

/**
 * How a task plays one evaluation episode through the served model, as its protocol says: what each
 * request sends (a growing text prompt, or chat messages rebuilt from a history window), which action
 * a reply takes, and how the environment's answer enters the next request.
 */
export interface EpisodePolicy {
  /** The protocol's request settings (API, max tokens, stop, temperature). */
  request: RequestSettings;
  /** Model replies per episode, thinking included. */
  maxSteps: number;
  /** A fresh transcript for one episode, from its first observation. */
  start(reset: EnvResetResult): EpisodeTranscript;
}

export interface EpisodeTranscript {
  /** What the next request sends. */
  input(): GenerationInput;
  /** The action a reply takes, or `think` for a reasoning step (answered without touching the environment). */
  parseReply(reply: string): { think: true } | { action: string };
  /** Adds the step to the transcript: the action taken (or the think) and what the environment answered (null for a think). */
  record(reply: string, action: string | null, result: EnvStepResult | null): void;
}

export interface EpisodeOutcome {
  index: number;
  /** Last reward the environment gave (the final reward for sparse-reward environments). */
  reward: number;
  done: boolean;
  /** Model replies made. */
  steps: number;
  thinks: number;
  /** The reset's info (game, task type, session…). */
  info: Record<string, unknown>;
  /** The last step's info (won…). */
  lastInfo: Record<string, unknown>;
}

export const THINK_OBSERVATION = 'OK.';

/** Plays one private episode: one action per reply, until done or out of replies. */
export async function playEpisode(model: OpenAiEndpoint, env: EnvClient, index: number, policy: EpisodePolicy, signal?: AbortSignal): Promise<EpisodeOutcome> {
  const first = await env.reset('eval', index, signal);
  const transcript = policy.start(first);
  const outcome: EpisodeOutcome = { index, reward: 0, done: false, steps: 0, thinks: 0, info: first.info, lastInfo: {} };
  try {
    while (!outcome.done && outcome.steps < policy.maxSteps) {
      outcome.steps++;
      const reply = await generate(model, policy.request, transcript.input(), { signal });
      const parsed = transcript.parseReply(reply);
      if ('think' in parsed) {
        outcome.thinks++;
        transcript.record(reply, null, null);
        continue;
      }
      const result = await env.step(first.sessionId, parsed.action, signal);
      Object.assign(outcome, { reward: result.reward, done: result.done, lastInfo: result.info });
      transcript.record(reply, parsed.action, result);
    }
  } finally {
    if (!outcome.done) await env.close(first.sessionId).catch(() => undefined);
  }
  return outcome;
}

/**
 * Plays every episode of the server's `eval` split with the served checkpoint (`concurrency` at a
 * time) and returns the outcomes in split order, with the server's health (split sizes) for the report.
 * Both servers are stopped whatever happens.
 */
export async function evaluateOnEnvServer(
  taskId: string,
  envName: string,
  ctx: EvaluationContext | undefined,
  checkpointDir: string,
  policy: EpisodePolicy,
  opts: { concurrency: number; signal?: AbortSignal },
): Promise<{ outcomes: EpisodeOutcome[]; health: EnvHealth }> {
  if (!ctx) throw new EvaluatorError(`${taskId} evaluates with an environment server, but the harness passed no evaluation context`);
  const server = await ctx.envServer(envName, opts.signal);
  try {
    const env = new EnvClient(server);
    const health = await env.health(opts.signal);
    if (health.splits.eval < 1) throw new EvaluatorError(`the ${envName} environment server has an empty eval split`);
    const indexes = Array.from({ length: health.splits.eval }, (_, i) => i);
    const outcomes = await withServedModel(taskId, ctx, checkpointDir, opts.signal, (model) =>
      mapLimit(indexes, opts.concurrency, (index) => playEpisode(model, env, index, policy, opts.signal)),
    );
    return { outcomes, health };
  } finally {
    await server.stop();
  }
}

export const round4 = (x: number): number => Math.round(x * 10_000) / 10_000;
