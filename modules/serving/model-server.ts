import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, stat } from 'node:fs/promises';
import net from 'node:net';
import { EvaluatorError, InvalidCheckpointError, type EvaluationContext, type OpenAiEndpoint, type ServedModel } from '../../tasks/task-pack.js';
import { renderCommand, type ServingConfig } from './serving.config.js';

/** Name the started server serves the checkpoint under (`--served-model-name {name}`). */
export const SERVED_MODEL_NAME = 'a2rl-checkpoint';

export interface ServeTimings {
  /** SIGTERM → SIGKILL grace in stop(). */
  stopGraceMs: number;
  /** Between readiness probes. */
  pollMs: number;
}

const DEFAULT_TIMINGS: ServeTimings = { stopGraceMs: 10_000, pollMs: 250 };
const PROBE_TIMEOUT_MS = 5_000;
const LOG_TAIL_LINES = 20;

/** The context lent to an evaluator grading on `device` ('cpu' or a GPU index). */
export function createEvaluationContext(config: ServingConfig, device: string, timings: Partial<ServeTimings> = {}): EvaluationContext {
  const t = { ...DEFAULT_TIMINGS, ...timings };
  return {
    device,
    judge: config.judge,
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
  const server = new ServerProcess(argv, device, t.stopGraceMs);
  await server.started;
  const baseUrl = `http://127.0.0.1:${port}`;
  const onAbort = () => void server.stop();
  signal?.addEventListener('abort', onAbort, { once: true });
  const stop = async () => {
    signal?.removeEventListener('abort', onAbort);
    await server.stop();
  };
  try {
    const deadline = Date.now() + config.readyTimeoutMs;
    for (;;) {
      if (signal?.aborted) throw new EvaluatorError('the evaluation was cancelled while the model server was starting');
      if (server.exit) throw new EvaluatorError(`the model server exited before becoming ready (${server.exit}): ${argv.join(' ')}${server.tail()}`);
      if ((await listModels(baseUrl, signal)) !== null) break;
      if (Date.now() >= deadline) {
        throw new EvaluatorError(`the model server did not become ready within ${Math.round(config.readyTimeoutMs / 1000)} s (A2RL_SERVE_READY_TIMEOUT): ${argv.join(' ')}${server.tail()}`);
      }
      await server.exitedOr(t.pollMs);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { baseUrl, model: SERVED_MODEL_NAME, stop };
}

/** Pids of started servers' process groups, killed if the harness exits with them still running. */
const live = new Set<number>();
process.on('exit', () => {
  for (const pgid of live) killGroup(pgid, 'SIGKILL');
});

/** One started server in its own process group, with the tail of its output kept for error messages. */
class ServerProcess {
  readonly started: Promise<void>;
  exit: string | null = null;
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;
  private readonly lines: string[] = [];
  private stopping: Promise<void> | null = null;

  constructor(argv: string[], device: string, private readonly graceMs: number) {
    const env = { ...process.env, ...(device === 'cpu' ? {} : { CUDA_VISIBLE_DEVICES: device }) };
    this.child = spawn(argv[0], argv.slice(1), { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env });
    for (const stream of [this.child.stdout!, this.child.stderr!]) {
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => this.keep(chunk));
    }
    this.started = new Promise((resolve, reject) => {
      this.child.once('spawn', () => {
        live.add(this.child.pid!);
        resolve();
      });
      this.child.once('error', (err) => reject(new EvaluatorError(`cannot start the model server "${argv[0]}" (A2RL_SERVE_COMMAND): ${err.message}`)));
    });
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, sig) => {
        this.exit = sig ? `killed by ${sig}` : `exit code ${code}`;
        resolve();
      });
    });
  }

  /** Waits `ms` or until the server exits, whichever is first. */
  async exitedOr(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.exited, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }

  tail(): string {
    return this.lines.length ? `\nlast output of the server:\n${this.lines.join('\n')}` : '';
  }

  /**
   * SIGTERM to the whole group, up to the grace for the leader to exit, then SIGKILL to the group
   * anyway: workers the leader left behind (or a leader ignoring SIGTERM) must not outlive grading.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const pgid = this.child.pid;
      if (pgid === undefined) return;
      killGroup(pgid, 'SIGTERM');
      await this.exitedOr(this.graceMs);
      killGroup(pgid, 'SIGKILL');
      await this.exitedOr(this.graceMs);
      live.delete(pgid);
      this.child.stdout?.destroy();
      this.child.stderr?.destroy();
    })();
    return this.stopping;
  }

  private keep(chunk: string): void {
    const lines = chunk.split('\n').filter((l) => l.trim());
    this.lines.push(...lines.map((l) => l.slice(0, 500)));
    this.lines.splice(0, Math.max(0, this.lines.length - LOG_TAIL_LINES));
  }
}

function killGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // ESRCH: the group is already gone
  }
}

/** A port free right now on 127.0.0.1 (the server binds it moments later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
