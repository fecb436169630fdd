import { EvaluatorError, type EnvResetResult, type EnvServer, type EnvStepResult } from '../../tasks/task-pack.js';

/** The a2rl environment protocol version this client speaks (docs/paper-tasks.md). */
export const ENV_PROTOCOL = 1;
const DEFAULT_TIMEOUT_MS = 60_000;

export type EnvSplit = 'train' | 'eval';

export interface EnvHealth {
  protocol: number;
  env: string;
  /** How many games/sessions each split holds. */
  splits: Record<EnvSplit, number>;
}

/**
 * A client for an environment server (ALFWorld, WebShop) speaking the a2rl environment protocol:
 * `GET /health`, `POST /reset {split, index}`, `POST /step {session_id, action}`, `POST /close {session_id}`.
 * Every failure is an EvaluatorError naming the server: a broken environment is never the agent's fault.
 */
export class EnvClient {
  constructor(
    private readonly server: Pick<EnvServer, 'baseUrl' | 'token'>,
    private readonly timeoutMs = DEFAULT_TIMEOUT_MS,
  ) {}

  /** The server's health answer, or null while it does not answer (start-up). */
  async probe(signal?: AbortSignal): Promise<EnvHealth | null> {
    try {
      return await this.health(signal);
    } catch {
      return null;
    }
  }

  async health(signal?: AbortSignal): Promise<EnvHealth> {
    const body = await this.call('GET', '/health', undefined, signal);
    const splits = body.splits as Record<string, unknown> | undefined;
    if (body.protocol !== ENV_PROTOCOL || typeof body.env !== 'string' || !splits || !Number.isInteger(splits.train) || !Number.isInteger(splits.eval)) {
      throw new EvaluatorError(`${this.server.baseUrl}/health does not speak a2rl environment protocol ${ENV_PROTOCOL}: ${JSON.stringify(body).slice(0, 200)}`);
    }
    return { protocol: ENV_PROTOCOL, env: body.env, splits: { train: splits.train as number, eval: splits.eval as number } };
  }

  async reset(split: EnvSplit, index: number, signal?: AbortSignal): Promise<EnvResetResult & { sessionId: string }> {
    const body = await this.call('POST', '/reset', { split, index }, signal);
    if (typeof body.session_id !== 'string') throw this.malformed('/reset', 'session_id', body);
    return { sessionId: body.session_id, ...this.turn('/reset', body) };
  }

  async step(sessionId: string, action: string, signal?: AbortSignal): Promise<EnvStepResult> {
    const body = await this.call('POST', '/step', { session_id: sessionId, action }, signal);
    if (typeof body.reward !== 'number' || !Number.isFinite(body.reward)) throw this.malformed('/step', 'reward', body);
    if (typeof body.done !== 'boolean') throw this.malformed('/step', 'done', body);
    return { ...this.turn('/step', body), reward: body.reward, done: body.done };
  }

  async close(sessionId: string, signal?: AbortSignal): Promise<void> {
    await this.call('POST', '/close', { session_id: sessionId }, signal);
  }

  private turn(route: string, body: Record<string, unknown>): EnvResetResult {
    if (typeof body.observation !== 'string') throw this.malformed(route, 'observation', body);
    const actions = body.admissible_actions ?? [];
    if (!Array.isArray(actions) || !actions.every((a) => typeof a === 'string')) throw this.malformed(route, 'admissible_actions', body);
    const info = body.info ?? {};
    if (typeof info !== 'object' || info === null || Array.isArray(info)) throw this.malformed(route, 'info', body);
    return { observation: body.observation, admissibleActions: actions as string[], info: info as Record<string, unknown> };
  }

  private malformed(route: string, field: string, body: unknown): EvaluatorError {
    return new EvaluatorError(`${this.server.baseUrl}${route} answered without a valid "${field}": ${JSON.stringify(body).slice(0, 200)}`);
  }

  private async call(method: 'GET' | 'POST', route: string, payload: unknown, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const url = `${this.server.baseUrl}${route}`;
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, {
        method,
        headers: {
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
          ...(this.server.token ? { authorization: `Bearer ${this.server.token}` } : {}),
        },
        ...(payload === undefined ? {} : { body: JSON.stringify(payload) }),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      text = await response.text();
    } catch (err) {
      if (signal?.aborted) throw new EvaluatorError(`request to ${url} aborted: the evaluation was cancelled`);
      if (timeout.aborted) throw new EvaluatorError(`the environment server did not answer ${method} ${url} within ${Math.round(this.timeoutMs / 1000)} s`);
      throw new EvaluatorError(`the environment server is unreachable at ${url}: ${(err as Error).message}`);
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new EvaluatorError(`the environment server answered ${method} ${url} with HTTP ${response.status} and a body that is not JSON: ${text.slice(0, 200)}`);
    }
    if (!response.ok) {
      const message = (body as { error?: unknown })?.error;
      throw new EvaluatorError(`the environment server refused ${method} ${url} (HTTP ${response.status}): ${typeof message === 'string' ? message : text.slice(0, 200)}`);
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new EvaluatorError(`the environment server answered ${method} ${url} with ${text.slice(0, 200)}, not a JSON object`);
    return body as Record<string, unknown>;
  }
}
