import { EvaluatorError, type OpenAiEndpoint } from '../../tasks/task-pack.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface GenerationOptions {
  /** Default 0: greedy decoding, so a checkpoint grades the same every time. */
  temperature?: number;
  maxTokens?: number;
  stop?: string[];
  /** Per request; default the client's. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface Generation {
  text: string;
  finishReason: string | null;
  promptTokens: number;
  completionTokens: number;
}

const DEFAULT_TIMEOUT_MS = 120_000;

/**
 * A minimal client for an OpenAI-compatible server (vLLM, a judge API). Every failure is an
 * EvaluatorError: a server that stops answering is the harness's problem, never the agent's.
 */
export class OpenAiClient {
  constructor(
    private readonly endpoint: OpenAiEndpoint,
    private readonly defaultTimeoutMs = DEFAULT_TIMEOUT_MS,
  ) {}

  async chat(messages: ChatMessage[], options: GenerationOptions = {}): Promise<Generation> {
    const body = await this.post('/v1/chat/completions', { messages, ...this.sampling(options) }, options);
    const choice = firstChoice(body, '/v1/chat/completions');
    const raw = (choice.message as { content?: unknown } | undefined)?.content;
    // Nothing generated (null content) is an empty answer, i.e. a wrong one, not a harness failure.
    const content = raw === null || raw === undefined ? '' : raw;
    if (typeof content !== 'string') throw new EvaluatorError(`${this.endpoint.baseUrl}/v1/chat/completions returned a choice without message.content`);
    return generation(content, choice, body);
  }

  async complete(prompt: string, options: GenerationOptions = {}): Promise<Generation> {
    const body = await this.post('/v1/completions', { prompt, ...this.sampling(options) }, options);
    const choice = firstChoice(body, '/v1/completions');
    if (typeof choice.text !== 'string') throw new EvaluatorError(`${this.endpoint.baseUrl}/v1/completions returned a choice without text`);
    return generation(choice.text, choice, body);
  }

  private sampling(options: GenerationOptions): Record<string, unknown> {
    return {
      model: this.endpoint.model,
      temperature: options.temperature ?? 0,
      ...(options.maxTokens === undefined ? {} : { max_tokens: options.maxTokens }),
      ...(options.stop?.length ? { stop: options.stop } : {}),
    };
  }

  private async post(route: string, payload: unknown, options: GenerationOptions): Promise<Record<string, unknown>> {
    const url = `${this.endpoint.baseUrl}${route}`;
    const timeoutMs = options.timeoutMs ?? this.defaultTimeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(this.endpoint.apiKey ? { authorization: `Bearer ${this.endpoint.apiKey}` } : {}) },
        body: JSON.stringify(payload),
        signal,
      });
      text = await response.text();
    } catch (err) {
      if (options.signal?.aborted) throw new EvaluatorError(`request to ${url} aborted: the evaluation was cancelled`);
      if (timeout.aborted) throw new EvaluatorError(`${url} did not answer within ${Math.round(timeoutMs / 1000)} s`);
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new EvaluatorError(`the inference server at ${this.endpoint.baseUrl} stopped answering (did it die mid-evaluation?): ${cause?.code ?? cause?.message ?? (err as Error).message}`);
    }
    if (!response.ok) throw new EvaluatorError(`${url} answered HTTP ${response.status}: ${text.slice(0, 500)}`);
    try {
      const body = JSON.parse(text) as unknown;
      if (body && typeof body === 'object' && !Array.isArray(body)) return body as Record<string, unknown>;
    } catch {
      // reported below
    }
    throw new EvaluatorError(`${url} answered something that is not a JSON object: ${text.slice(0, 200)}`);
  }
}

function firstChoice(body: Record<string, unknown>, route: string): Record<string, unknown> {
  const choice = Array.isArray(body.choices) ? (body.choices[0] as unknown) : undefined;
  if (!choice || typeof choice !== 'object') throw new EvaluatorError(`${route} returned no choices`);
  return choice as Record<string, unknown>;
}

function generation(text: string, choice: Record<string, unknown>, body: Record<string, unknown>): Generation {
  const usage = (body.usage ?? {}) as { prompt_tokens?: unknown; completion_tokens?: unknown };
  return {
    text,
    finishReason: typeof choice.finish_reason === 'string' ? choice.finish_reason : null,
    promptTokens: typeof usage.prompt_tokens === 'number' ? usage.prompt_tokens : 0,
    completionTokens: typeof usage.completion_tokens === 'number' ? usage.completion_tokens : 0,
  };
}
