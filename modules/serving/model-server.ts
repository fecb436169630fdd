import { randomUUID } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { EvaluatorError, InvalidCheckpointError, type EvaluationContext, type OpenAiEndpoint, type ServedModel } from '../../tasks/task-pack.js';
import { agentDirectoryHash, directoryHash } from '../workspace-fs/content-hash.js';
import { startEnvServer } from './env-server.js';
import { confineServer, type ServerIsolation } from './confinement.js';
import { refuseMissingCommand, ServerProcess, type StartTimings } from './server-process.js';
import { INFERENCE_URL_REFUSAL, renderCommand, type ServingConfig } from './serving.config.js';

/** Name the started server serves the checkpoint under (`--served-model-name {name}`, or the LoRA module's name). */
export const SERVED_MODEL_NAME = 'a2rl-checkpoint';
/** Name of the base model when a started server applies a LoRA adapter to it. */
export const BASE_SERVED_NAME = 'a2rl-base';
/** `--max-lora-rank` values vLLM accepts; an adapter's rank is rounded up to one of them. */
const LORA_RANKS = [8, 16, 32, 64, 128, 256, 320, 512];

export type ServeTimings = StartTimings;

const DEFAULT_TIMINGS: ServeTimings = { stopGraceMs: 10_000, pollMs: 250 };
const PROBE_TIMEOUT_MS = 5_000;
/** Loading an adapter reads its weights onto the GPU: seconds, not minutes. */
const LORA_TIMEOUT_MS = 120_000;

export interface EvaluationContextOptions {
  /**
   * The task's base model as given to the agent (the run's `models/<base>`): what a LoRA adapter is
   * applied to, and what an external endpoint must be serving to grade the unchanged base model.
   */
  baseModelDir?: string;
}

/**
 * The context lent to an evaluator grading on `device` ('cpu' or a GPU index); environment servers
 * per `config.envServers`. `serve` grades exactly the submitted checkpoint: full weights are served
 * by a started server; a LoRA adapter is applied to the base model (started server:
 * `--enable-lora --lora-modules`; external vLLM: its runtime `/v1/load_lora_adapter`).
 */
export function createEvaluationContext(config: ServingConfig, device: string, timings: Partial<ServeTimings> = {}, options: EvaluationContextOptions = {}): ServingContext {
  const t = { ...DEFAULT_TIMINGS, ...timings };
  const servers: ServerIsolation[] = [];
  return {
    device,
    judge: config.judge,
    servers,
    envServer: (name, signal) => startEnvServer(config, name, t, signal, servers),
    serve: async (checkpointDir, signal) => {
      const checkpoint = await inspectCheckpoint(checkpointDir);
      if (config.inferenceUrl) return useExternalEndpoint(config, checkpoint, options.baseModelDir, signal);
      if (checkpoint.kind === 'full') return startServer(config, device, checkpointDir, t, servers, signal);
      if (!options.baseModelDir) throw new EvaluatorError('a LoRA adapter was submitted but the harness gave no base model to apply it to');
      return startServer(config, device, options.baseModelDir, t, servers, signal, checkpoint);
    },
  };
}

/** The context, with how each server it started was confined (in start order), for the grading's record. */
export interface ServingContext extends EvaluationContext {
  readonly servers: readonly ServerIsolation[];
}

/** Full weights a server may load: never a pickle (see PICKLES). */
const WEIGHTS = /\.(safetensors|gguf)$/;
/**
 * Files torch.load would unpickle, i.e. run code from: never served. The default serve command reads
 * safetensors only (`--load-format safetensors`), so such files beside safetensors weights (an
 * optimizer state, training_args.bin) are left alone; a checkpoint whose weights are only pickles is
 * refused as the agent's mistake, before any server starts.
 */
const PICKLES = /\.(bin|pt|pth|ckpt|pkl|pickle)$/;

type Checkpoint = { kind: 'full'; dir: string } | { kind: 'adapter'; dir: string; rank: number };

/**
 * Full weights, or a LoRA adapter (adapter_config.json and adapter_model.safetensors, no full
 * weights). A missing directory, pickle-only weights or an adapter that cannot be read is the agent's
 * mistake, said before any server starts.
 */
export async function inspectCheckpoint(dir: string): Promise<Checkpoint> {
  let names: string[];
  try {
    if (!(await stat(dir)).isDirectory()) throw new InvalidCheckpointError(`${dir} is not a directory`);
    names = await readdir(dir);
  } catch (err) {
    if (err instanceof InvalidCheckpointError) throw err;
    throw new InvalidCheckpointError(`cannot read the checkpoint directory ${dir}: ${(err as Error).message}`);
  }
  refusePickleWeights(names);
  const fullWeights = names.some((n) => WEIGHTS.test(n) && !n.startsWith('adapter'));
  if (!names.includes('adapter_config.json') || fullWeights) return { kind: 'full', dir };
  if (!names.includes('adapter_model.safetensors')) {
    throw new InvalidCheckpointError('the checkpoint has adapter_config.json but neither adapter weights (adapter_model.safetensors) nor full model weights');
  }
  return { kind: 'adapter', dir, rank: await adapterRank(dir) };
}

function refusePickleWeights(names: readonly string[]): void {
  const pickles = names.filter((n) => PICKLES.test(n)).sort();
  if (pickles.length === 0 || names.some((n) => n.endsWith('.safetensors'))) return;
  throw new InvalidCheckpointError(
    `the checkpoint's weights are pickle files (${pickles.slice(0, 3).join(', ')}${pickles.length > 3 ? ', …' : ''}), which a2rl never loads (unpickling runs code): save them as safetensors (save_pretrained(dir, safe_serialization=True))`,
  );
}

async function adapterRank(dir: string): Promise<number> {
  let config: { r?: unknown };
  try {
    config = JSON.parse(await readFile(path.join(dir, 'adapter_config.json'), 'utf8')) as { r?: unknown };
  } catch (err) {
    throw new InvalidCheckpointError(`adapter_config.json is not readable JSON: ${(err as Error).message}`);
  }
  const r = config?.r ?? 8;
  if (typeof r !== 'number' || !Number.isInteger(r) || r < 1) throw new InvalidCheckpointError(`adapter_config.json has no valid LoRA rank "r" (${JSON.stringify(r)})`);
  const rank = LORA_RANKS.find((x) => x >= r);
  if (rank === undefined) throw new InvalidCheckpointError(`the adapter's LoRA rank ${r} is above ${LORA_RANKS.at(-1)}, the largest vLLM serves; merge it into the base model instead`);
  return rank;
}

/**
 * A server someone else runs (A2RL_INFERENCE_URL) grades only what it provably serves: a LoRA
 * adapter loaded into it for this grading (and unloaded after), or, when the submitted directory
 * has exactly the base model's content, its base model (the listed model that is no adapter).
 */
async function useExternalEndpoint(config: ServingConfig, checkpoint: Checkpoint, baseModelDir: string | undefined, signal?: AbortSignal): Promise<ServedModel> {
  const baseUrl = config.inferenceUrl!;
  if (!config.inferenceLora) throw new EvaluatorError(`A2RL_INFERENCE_URL: ${INFERENCE_URL_REFUSAL}`);
  const models = await listModelEntries(baseUrl, signal);
  if (models === null) throw new EvaluatorError(`A2RL_INFERENCE_URL ${baseUrl} does not answer GET /v1/models`);
  if (checkpoint.kind === 'adapter') return loadRuntimeAdapter(baseUrl, checkpoint.dir, signal);
  const isBase = baseModelDir !== undefined && (await directoryHash(checkpoint.dir)) === (await agentDirectoryHash(baseModelDir));
  if (!isBase) {
    throw new EvaluatorError(
      `A2RL_INFERENCE_URL ${baseUrl} loads LoRA adapters only and cannot grade a full-weights checkpoint; unset A2RL_INFERENCE_URL so a2rl starts vLLM on it, or have agents submit unmerged LoRA adapters`,
    );
  }
  const base = models.find((m) => m.parent === null);
  if (!base) throw new EvaluatorError(`A2RL_INFERENCE_URL ${baseUrl} lists no base model (GET /v1/models)`);
  // Someone else's server: never ours to stop.
  return { baseUrl, model: base.id, stop: async () => undefined };
}

/** vLLM's runtime LoRA API (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True): load under a fresh name, unload on stop(). */
async function loadRuntimeAdapter(baseUrl: string, dir: string, signal?: AbortSignal): Promise<ServedModel> {
  const name = `a2rl-${randomUUID()}`;
  const load = await postJson(`${baseUrl}/v1/load_lora_adapter`, { lora_name: name, lora_path: path.resolve(dir) }, signal);
  if (!load.ok) {
    const hint = load.status === 404 && /not found/i.test(load.text) && !/adapter/i.test(load.text) ? ' (is the server started with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True?)' : '';
    throw new EvaluatorError(`A2RL_INFERENCE_URL ${baseUrl} could not load the submitted LoRA adapter: HTTP ${load.status}${hint}: ${oneLine(load.text)}`);
  }
  let unloaded: Promise<void> | null = null;
  const stop = () =>
    (unloaded ??= postJson(`${baseUrl}/v1/unload_lora_adapter`, { lora_name: name }).then(
      () => undefined,
      () => undefined,
    ));
  return { baseUrl, model: name, stop };
}

interface ModelEntry {
  id: string;
  /** The base model of a LoRA adapter entry (vLLM lists adapters with their parent); null for a base model. */
  parent: string | null;
}

async function listModelEntries(baseUrl: string, signal?: AbortSignal): Promise<ModelEntry[] | null> {
  try {
    const timeout = AbortSignal.timeout(PROBE_TIMEOUT_MS);
    const response = await fetch(`${baseUrl}/v1/models`, { signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
    if (!response.ok) return null;
    const body = (await response.json()) as { data?: { id?: unknown; parent?: unknown }[] };
    return (body.data ?? []).flatMap((m) => (typeof m.id === 'string' ? [{ id: m.id, parent: typeof m.parent === 'string' ? m.parent : null }] : []));
  } catch {
    return null;
  }
}

const ENGINE_FIELDS = ['engine', 'transformers', 'torch', 'device', 'owned_by', 'version'];

/** What the server says of itself on its served model's entry of GET /v1/models (strings only, bounded). */
async function engineReport(baseUrl: string, signal?: AbortSignal): Promise<Record<string, string> | null> {
  try {
    const timeout = AbortSignal.timeout(PROBE_TIMEOUT_MS);
    const response = await fetch(`${baseUrl}/v1/models`, { signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
    const body = (await response.json()) as { data?: Record<string, unknown>[] };
    const entry = body.data?.find((m) => m.id === SERVED_MODEL_NAME) ?? body.data?.[0];
    const fields = ENGINE_FIELDS.flatMap((k) => (typeof entry?.[k] === 'string' ? [[k, (entry[k] as string).slice(0, 100)]] : []));
    return fields.length ? Object.fromEntries(fields) : null;
  } catch {
    return null;
  }
}

/** The model ids the server lists, or null while it does not answer. */
async function listModels(baseUrl: string, signal?: AbortSignal): Promise<string[] | null> {
  return (await listModelEntries(baseUrl, signal))?.map((m) => m.id) ?? null;
}

async function postJson(url: string, body: unknown, signal?: AbortSignal): Promise<{ ok: boolean; status: number; text: string }> {
  const timeout = AbortSignal.timeout(LORA_TIMEOUT_MS);
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    return { ok: response.ok, status: response.status, text: await response.text() };
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code;
    throw new EvaluatorError(`${url} did not answer: ${cause ?? (err as Error).message}`);
  }
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim().slice(0, 300);

async function startServer(
  config: ServingConfig,
  device: string,
  modelDir: string,
  t: ServeTimings,
  started: ServerIsolation[],
  signal?: AbortSignal,
  adapter?: Extract<Checkpoint, { kind: 'adapter' }>,
): Promise<ServedModel> {
  if (signal?.aborted) throw new EvaluatorError('the evaluation was cancelled before the model server started');
  refuseMissingCommand(config.serveCommand[0]!, 'the model server', 'A2RL_SERVE_COMMAND');
  const launch = await confineServer({
    what: 'the model server',
    command: (port) => [
      ...renderCommand(config.serveCommand, { model_path: modelDir, port: String(port), name: adapter ? BASE_SERVED_NAME : SERVED_MODEL_NAME }),
      ...(adapter ? ['--enable-lora', '--lora-modules', `${SERVED_MODEL_NAME}=${adapter.dir}`, '--max-lora-rank', String(adapter.rank)] : []),
    ],
    checkpoints: [modelDir, ...(adapter ? [adapter.dir] : [])],
    device,
    config: config.server,
  });
  started.push(launch.isolation);
  const server = new ServerProcess(launch, t.stopGraceMs, 'the model server', 'A2RL_SERVE_COMMAND');
  await server.started;
  const baseUrl = `http://127.0.0.1:${launch.port}`;
  const onAbort = () => void server.stop();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await server.waitUntilReady(async () => (await listModels(baseUrl, signal)) !== null, config.readyTimeoutMs, t.pollMs, 'A2RL_SERVE_READY_TIMEOUT', signal);
    launch.isolation.engine = { kind: config.engine, device, reported: await engineReport(baseUrl, signal) };
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
