import { OpenAiClient, type ChatMessage } from '../../modules/serving/openai-client.js';
import type { RequestSettings } from './protocol.js';
import { EvaluatorError, type EvaluationContext, type OpenAiEndpoint, type ServedModel, type TaskRequirement } from '../task-pack.js';

export type { ChatMessage };

/** What every task that serves its checkpoint needs first (`a2rl doctor`): a GPU and vLLM, unless A2RL_INFERENCE_URL is set. */
export const SERVING_REQUIREMENTS: readonly TaskRequirement[] = [
  { kind: 'gpu' },
  { kind: 'command', name: 'vllm', hint: 'pip install vllm (or set A2RL_INFERENCE_URL to an endpoint you serve yourself)' },
];

/** What one request sends: chat messages (rendered by the server's chat template) or a raw text prompt. */
export type GenerationInput = { messages: readonly ChatMessage[] } | { prompt: string };

/**
 * One generation exactly as the protocol's `request` says: `/v1/chat/completions` or
 * `/v1/completions`, its max tokens, stop sequences and temperature. The input must match the API.
 */
export async function generate(endpoint: OpenAiEndpoint, request: RequestSettings, input: GenerationInput, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<string> {
  const client = new OpenAiClient(endpoint, opts.timeoutMs ?? 300_000);
  const sampling = { maxTokens: request.maxTokens, stop: request.stop, temperature: request.temperature, signal: opts.signal };
  if (request.api === 'chat') {
    if (!('messages' in input)) throw new EvaluatorError('the protocol asks for chat completions but the task built a text prompt');
    return (await client.chat([...input.messages], sampling)).text;
  }
  if (!('prompt' in input)) throw new EvaluatorError('the protocol asks for text completions but the task built chat messages');
  return (await client.complete(input.prompt, sampling)).text;
}

/** Serves the checkpoint for the duration of `use` and always stops the server afterwards. */
export async function withServedModel<T>(
  taskId: string,
  ctx: EvaluationContext | undefined,
  checkpointDir: string,
  signal: AbortSignal | undefined,
  use: (model: ServedModel) => Promise<T>,
): Promise<T> {
  if (!ctx) throw new EvaluatorError(`${taskId} evaluates by serving the checkpoint, but the harness passed no evaluation context`);
  const model = await ctx.serve(checkpointDir, signal);
  try {
    return await use(model);
  } finally {
    await model.stop();
  }
}

/** Maps with at most `limit` calls in flight, results in input order; the first failure rejects. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (!failed && next < items.length) {
      const i = next++;
      try {
        results[i] = await fn(items[i]!, i);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
