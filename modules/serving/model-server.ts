import { readdir, stat } from 'node:fs/promises';
import { EvaluatorError, InvalidCheckpointError, type EvaluationContext, type OpenAiEndpoint, type ServedModel } from '../../tasks/task-pack.js';
import { startEnvServer } from './env-server.js';
import { freePort, ServerProcess, type StartTimings } from './server-process.js';
import { renderCommand, type ServingConfig } from './serving.config.js';

/** Name the started server serves the checkpoint under (`--served-model-name {name}`). */
export const SERVED_MODEL_NAME = 'a2rl-checkpoint';

export type ServeTimings = StartTimings;

const DEFAULT_TIMINGS: ServeTimings = { stopGraceMs: 10_000, pollMs: 250 };
const PROBE_TIMEOUT_MS = 5_000;

/** The context lent to an evaluator grading on `device` ('cpu' or a GPU index); environment servers per `config.envServers`. */
export function createEvaluationContext(config: ServingConfig, device: string, timings: Partial<ServeTimings> = {}): EvaluationContext {
  const t = { ...DEFAULT_TIMINGS, ...timings };
  return {
    device,
    judge: config.judge,
    envServer: (name, signal) => startEnvServer(config, name, t, signal),
    serve: async (checkpointDir, signal) => {
      await refuseUnservable(checkpointDir);
      if (config.inferenceUrl) return useExistingEndpoint(config.inferenceUrl, signal);
      return startServer(config, device, checkpointDir, t, signal);
    },
  };
}

const WEIGHTS = /\.(safetensors|bin|pt|pth|gguf)$/;

/** A missing directory or an unmerged LoRA adapter is the agent's mistake, said so before any server starts. */
async function refuseUnservable(dir: string): Promise<void> {
  let names: string[];
  try {
    if (!(await stat(dir)).isDirectory()) throw new InvalidCheckpointError(`${dir} is not a directory`);
    names = await readdir(dir);
  } catch (err) {
    if (err instanceof InvalidCheckpointError) throw err;
    throw new InvalidCheckpointError(`cannot read the checkpoint directory ${dir}: ${(err as Error).message}`);
  }
  const fullWeights = names.some((n) => WEIGHTS.test(n) && !n.startsWith('adapter'));
  if (names.includes('adapter_config.json') && !fullWeights) {
    throw new InvalidCheckpointError(
      'the checkpoint holds only a LoRA adapter (adapter_config.json without full model weights); merge the adapter into the base model before saving (e.g. peft: model.merge_and_unload().save_pretrained(dir), plus the tokenizer)',
    );
  }
}

async function useExistingEndpoint(baseUrl: string, signal?: AbortSignal): Promise<ServedModel> {
  const models = await listModels(baseUrl, signal);
  if (models === null) throw new EvaluatorError(`A2RL_INFERENCE_URL ${baseUrl} does not answer GET /v1/models`);
  if (!models.length) throw new EvaluatorError(`A2RL_INFERENCE_URL ${baseUrl} serves no model (GET /v1/models is empty)`);
  const endpoint: OpenAiEndpoint = { baseUrl, model: models[0] };
  // Someone else's server: never ours to stop.
  return { ...endpoint, stop: async () => undefined };
}

/** The model ids the server lists, or null while it does not answer. */
async function listModels(baseUrl: string, signal?: AbortSignal): Promise<string[] | null> {
  try {
    const timeout = AbortSignal.timeout(PROBE_TIMEOUT_MS);
    const response = await fetch(`${baseUrl}/v1/models`, { signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
    if (!response.ok) return null;
    const body = (await response.json()) as { data?: { id?: unknown }[] };
    return (body.data ?? []).map((m) => m.id).filter((id): id is string => typeof id === 'string');
  } catch {
    return null;
  }
}

async function startServer(config: ServingConfig, device: string, checkpointDir: string, t: ServeTimings, signal?: AbortSignal): Promise<ServedModel> {
  if (signal?.aborted) throw new EvaluatorError('the evaluation was cancelled before the model server started');
  const port = await freePort();
  const argv = renderCommand(config.serveCommand, { model_path: checkpointDir, port: String(port), name: SERVED_MODEL_NAME });
  const env = { ...process.env, ...(device === 'cpu' ? {} : { CUDA_VISIBLE_DEVICES: device }) };
  const server = new ServerProcess(argv, env, t.stopGraceMs, 'the model server', 'A2RL_SERVE_COMMAND');
  await server.started;
  const baseUrl = `http://127.0.0.1:${port}`;
  const onAbort = () => void server.stop();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await server.waitUntilReady(async () => (await listModels(baseUrl, signal)) !== null, config.readyTimeoutMs, t.pollMs, 'A2RL_SERVE_READY_TIMEOUT', signal);
  } catch (err) {
    signal?.removeEventListener('abort', onAbort);
    throw err;
  }
  const stop = async () => {
    signal?.removeEventListener('abort', onAbort);
    await server.stop();
  };
  return { baseUrl, model: SERVED_MODEL_NAME, stop };
}
