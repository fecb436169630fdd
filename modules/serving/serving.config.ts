import os from 'node:os';
import path from 'node:path';
import { parseLimitOverrides } from '../sandbox/limits.js';
import { parseDuration } from '../settings/duration.js';
import { packageRoot } from '../settings/package-root.js';
import { installedAgentPython } from '../agents/agent-python-env.js';
import { probeHostGpus } from '../sandbox/gpu-binding.js';
import { ConfigError } from '../settings/settings.port.js';
import type { OpenAiEndpoint } from '../../tasks/task-pack.js';
import type { ServerConfinementConfig } from './confinement.js';
import { passableName, resolveExecutable } from './server-view.js';

/**
 * How submitted checkpoints are served for evaluation (paper tasks), read from the environment:
 *
 * - `A2RL_SERVE_COMMAND`: the server's command line as a template with the placeholders
 *   `{model_path}`, `{port}` and `{name}`. It is never given to a shell: it is split into words
 *   first (see splitCommand), then the placeholders are replaced inside each word, so a path with
 *   spaces stays one argument.
 * - `A2RL_INFERENCE_URL`: an OpenAI-compatible server that is already running (base URL, with or
 *   without the trailing `/v1`). It can grade only what it can load: it needs
 *   `A2RL_INFERENCE_LORA=runtime` (vLLM started with `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True` on the
 *   task's base model, reading this machine's files), and then grades LoRA-adapter checkpoints
 *   through `/v1/load_lora_adapter` and the unchanged base model itself; anything else is refused
 *   (it never grades whatever model it happens to list).
 * - `A2RL_SERVE_READY_TIMEOUT`: how long a started server may take to answer `GET /v1/models`
 *   (a duration such as `600s`, `10m`).
 * - `A2RL_JUDGE_URL`, `A2RL_JUDGE_MODEL`, `A2RL_JUDGE_API_KEY`: the judge for judge-based tasks.
 * - `A2RL_ENV_<NAME>_COMMAND` / `A2RL_ENV_<NAME>_URL` (`<NAME>`: ALFWORLD, WEBSHOP): how the
 *   interactive tasks' environment server is started (a template with `{port}`; default: the
 *   bundled Python server with that task's backend) or where one already runs;
 *   `A2RL_ENV_READY_TIMEOUT` bounds its start-up (default 600s: WebShop indexes its products first).
 * - Servers a2rl starts run confined (confinement.ts; docs/security.md "What each server can reach"):
 *   `A2RL_SERVER_MEMORY` (a size such as `48G`, or `none`; default three quarters of this machine's
 *   memory) and `A2RL_SERVER_MAX_PROCESSES` (default 4096, threads included) limit each one;
 *   `A2RL_SERVER_ENV` names further harness variables they get (never credentials or A2RL_*), and
 *   `A2RL_SERVER_BINDS` (`:`-separated absolute paths) further host paths they see read-only,
 *   `A2RL_SERVER_WRITABLE` (same form) directories they may write (a cache; writable for their uids).
 *   The serve command may never carry `--trust-remote-code`.
 */
export interface ServingConfig {
  /** The split template; placeholders are still in place. */
  serveCommand: string[];
  /** What serves checkpoints a2rl starts: vLLM, the CPU engine (transformers) or the operator's A2RL_SERVE_COMMAND. */
  engine: ServeEngine;
  /** Why that engine (one line, for doctor). */
  engineReason: string;
  inferenceUrl: string | null;
  /** The endpoint at inferenceUrl loads LoRA adapters at runtime (A2RL_INFERENCE_LORA=runtime); always true when inferenceUrl is set. */
  inferenceLora: boolean;
  readyTimeoutMs: number;
  judge: OpenAiEndpoint | null;
  /** Environment servers of the interactive paper tasks, by name (`alfworld`, `webshop`). */
  envServers: Record<string, EnvServerConfig>;
  envReadyTimeoutMs: number;
  /** How started servers are confined. */
  server: ServerConfinementConfig;
}

/** Either a command to start (template words, `{port}` still in place) or the URL of a running server. */
export type EnvServerConfig =
  | { kind: 'command'; command: string[]; variable: string; passEnv: string[] }
  | { kind: 'url'; baseUrl: string; token: string | null; variable: string };

/** The environment servers a2rl knows; each task's Python backend lives at `tasks/<name>/env_backend.py`. */
export const ENV_SERVER_NAMES = ['alfworld', 'webshop'] as const;
/** The harness variables an environment server of that name is given (paths they name are bound read-only). */
const ENV_SERVER_VARIABLES: Record<string, string[]> = { alfworld: ['ALFWORLD_DATA'], webshop: [] };
export const DEFAULT_ENV_READY_TIMEOUT = '600s';

/** The bundled server: `python3 tasks/paper-common/env_server.py --backend tasks/<name>/env_backend.py --port {port}`. */
export function defaultEnvCommand(name: string): string[] {
  const root = packageRoot();
  return ['python3', path.join(root, 'tasks', 'paper-common', 'env_server.py'), '--backend', path.join(root, 'tasks', name, 'env_backend.py'), '--port', '{port}'];
}

/** Weights are read from safetensors only: vLLM never unpickles a `.bin`/`.pt` file the agent left beside them. */
export const DEFAULT_SERVE_COMMAND =
  'vllm serve {model_path} --host 127.0.0.1 --port {port} --served-model-name {name} --seed 0 --gpu-memory-utilization 0.85 --load-format safetensors';
export const DEFAULT_SERVER_MAX_PROCESSES = 4096;
export const DEFAULT_READY_TIMEOUT = '600s';

export type ServeEngine = 'vllm' | 'transformers' | 'custom';

/** What the engine choice looks at on this machine. */
export interface EngineProbe {
  /** An NVIDIA GPU's device node exists. */
  gpu(): boolean;
  /** `vllm` is on PATH. */
  vllm(env: NodeJS.ProcessEnv): boolean;
  /** The interpreter of the Python the CPU engine runs on, or null when there is none. */
  python(env: NodeJS.ProcessEnv): string | null;
}

export const hostEngineProbe: EngineProbe = {
  gpu: () => probeHostGpus().devices.some((d) => /\/nvidia\d+$/.test(d)),
  vllm: (env) => resolveExecutable('vllm', env.PATH ?? '') !== null,
  python: (env) => {
    const own = env.A2RL_SERVE_PYTHON?.trim();
    if (own) return own;
    const managed = installedAgentPython(env);
    return managed ? path.join(managed, 'bin', 'python') : null;
  },
};

/** The CPU engine: modules/serving/python/transformers_server.py on `python`, with vLLM's arguments. */
export function transformersServeCommand(python: string): string {
  const script = path.join(packageRoot(), 'modules', 'serving', 'python', 'transformers_server.py');
  return `${quoteWord(python)} ${quoteWord(script)} {model_path} --host 127.0.0.1 --port {port} --served-model-name {name} --seed 0`;
}

const quoteWord = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;

/**
 * The engine that serves checkpoints: the operator's A2RL_SERVE_COMMAND; else A2RL_SERVE_ENGINE
 * (`vllm` | `transformers`); else vLLM where a GPU and `vllm` are present, the CPU engine where the
 * agents' Python (or A2RL_SERVE_PYTHON) is, and vLLM otherwise (doctor then says what is missing).
 */
export function chooseServeEngine(env: NodeJS.ProcessEnv, machine: EngineProbe): { engine: ServeEngine; template: string; reason: string } {
  const custom = env.A2RL_SERVE_COMMAND?.trim();
  if (custom) return { engine: 'custom', template: custom, reason: 'A2RL_SERVE_COMMAND' };
  const wanted = env.A2RL_SERVE_ENGINE?.trim();
  if (wanted && wanted !== 'vllm' && wanted !== 'transformers') throw new ConfigError('A2RL_SERVE_ENGINE', `unknown engine "${wanted}" (vllm or transformers)`);
  const python = machine.python(env);
  if (wanted === 'transformers' || (!wanted && !(machine.gpu() && machine.vllm(env)) && python)) {
    if (!python) throw new ConfigError('A2RL_SERVE_ENGINE', 'the transformers engine needs the agents\' Python (a2rl agents python install) or A2RL_SERVE_PYTHON');
    return { engine: 'transformers', template: transformersServeCommand(python), reason: wanted ? 'A2RL_SERVE_ENGINE=transformers' : 'no GPU with vLLM here: the CPU engine on the agents\' Python' };
  }
  return { engine: 'vllm', template: DEFAULT_SERVE_COMMAND, reason: wanted ? 'A2RL_SERVE_ENGINE=vllm' : machine.gpu() ? 'a GPU with vLLM' : 'the default (no CPU engine installed: a2rl agents python install)' };
}

const PLACEHOLDERS = ['model_path', 'port', 'name'] as const;
export type ServePlaceholder = (typeof PLACEHOLDERS)[number];

/** Splits a command template and checks its placeholders: only `allowed` ones, every `required` one. */
function commandTemplate(variable: string, template: string, allowed: readonly string[], required: readonly string[]): string[] {
  let words: string[];
  try {
    words = splitCommand(template);
  } catch (err) {
    throw new ConfigError(variable, (err as Error).message);
  }
  const joined = words.join(' ');
  for (const unknown of joined.matchAll(/\{([a-z_]+)\}/g)) {
    if (!allowed.includes(unknown[1]!)) {
      throw new ConfigError(variable, `unknown placeholder {${unknown[1]}} (allowed: ${allowed.map((p) => `{${p}}`).join(' ')})`);
    }
  }
  for (const name of required) {
    if (!joined.includes(`{${name}}`)) throw new ConfigError(variable, `the template must contain {${name}}: "${template}"`);
  }
  return words;
}

function durationMs(variable: string, value: string | undefined, fallback: string): number {
  try {
    return parseDuration(value?.trim() || fallback) * 1000;
  } catch (err) {
    throw new ConfigError(variable, (err as Error).message);
  }
}

function envServerConfig(name: string, env: NodeJS.ProcessEnv): EnvServerConfig {
  const prefix = `A2RL_ENV_${name.toUpperCase()}`;
  const url = env[`${prefix}_URL`]?.trim();
  const command = env[`${prefix}_COMMAND`]?.trim();
  if (url && command) throw new ConfigError(`${prefix}_URL`, `set either ${prefix}_URL (a running server) or ${prefix}_COMMAND (one to start), not both`);
  if (url) return { kind: 'url', baseUrl: baseUrl(`${prefix}_URL`, url), token: env[`${prefix}_TOKEN`]?.trim() || null, variable: `${prefix}_URL` };
  const passEnv = ENV_SERVER_VARIABLES[name] ?? [];
  if (command) return { kind: 'command', command: commandTemplate(`${prefix}_COMMAND`, command, ['port'], ['port']), variable: `${prefix}_COMMAND`, passEnv };
  return { kind: 'command', command: defaultEnvCommand(name), variable: `${prefix}_COMMAND`, passEnv };
}

export function loadServingConfig(env: NodeJS.ProcessEnv = process.env, machine: EngineProbe = hostEngineProbe): ServingConfig {
  const engine = chooseServeEngine(env, machine);
  const serveCommand = commandTemplate('A2RL_SERVE_COMMAND', engine.template, PLACEHOLDERS, ['model_path', 'port']);
  refuseRemoteCode(serveCommand);
  const readyTimeoutMs = durationMs('A2RL_SERVE_READY_TIMEOUT', env.A2RL_SERVE_READY_TIMEOUT, DEFAULT_READY_TIMEOUT);

  const inferenceUrl = env.A2RL_INFERENCE_URL?.trim() ? baseUrl('A2RL_INFERENCE_URL', env.A2RL_INFERENCE_URL.trim()) : null;
  const inferenceLora = inferenceLoraMode(env, inferenceUrl);

  const judgeUrl = env.A2RL_JUDGE_URL?.trim();
  const judgeModel = env.A2RL_JUDGE_MODEL?.trim();
  const judgeKey = env.A2RL_JUDGE_API_KEY?.trim();
  let judge: OpenAiEndpoint | null = null;
  if (judgeUrl) {
    if (!judgeModel) throw new ConfigError('A2RL_JUDGE_MODEL', 'A2RL_JUDGE_URL is set but no judge model is named (e.g. gpt-4-1106-preview)');
    judge = { baseUrl: baseUrl('A2RL_JUDGE_URL', judgeUrl), model: judgeModel, ...(judgeKey ? { apiKey: judgeKey } : {}) };
  } else if (judgeModel || judgeKey) {
    throw new ConfigError('A2RL_JUDGE_URL', 'a judge model or API key is set but no judge endpoint (e.g. https://api.openai.com)');
  }

  const envServers = Object.fromEntries(ENV_SERVER_NAMES.map((name) => [name, envServerConfig(name, env)]));
  const envReadyTimeoutMs = durationMs('A2RL_ENV_READY_TIMEOUT', env.A2RL_ENV_READY_TIMEOUT, DEFAULT_ENV_READY_TIMEOUT);
  return { serveCommand, engine: engine.engine, engineReason: engine.reason, inferenceUrl, inferenceLora, readyTimeoutMs, judge, envServers, envReadyTimeoutMs, server: serverConfinement(env) };
}

/** A checkpoint's own Python (`auto_map` in config.json) must never run: vLLM and transformers run it only when asked to trust it. */
function refuseRemoteCode(words: readonly string[]): void {
  if (words.some((w) => /trust[-_]remote[-_]code/i.test(w))) {
    throw new ConfigError('A2RL_SERVE_COMMAND', 'must not enable trust_remote_code: a submitted checkpoint\'s Python code would run in the model server');
  }
}

function serverConfinement(env: NodeJS.ProcessEnv): ServerConfinementConfig {
  const limit = (variable: string, name: 'memoryBytes' | 'maxProcesses', value: string) => {
    try {
      return parseLimitOverrides([`${name}=${value}`])[name];
    } catch (err) {
      throw new ConfigError(variable, (err as Error).message.replace(/^--limit \w+: /, ''));
    }
  };
  const memory = env.A2RL_SERVER_MEMORY?.trim();
  const processes = env.A2RL_SERVER_MAX_PROCESSES?.trim();
  const passEnv = (env.A2RL_SERVER_ENV ?? '').split(/[\s,]+/).filter(Boolean);
  for (const name of passEnv) {
    if (!passableName(name)) throw new ConfigError('A2RL_SERVER_ENV', `${name} cannot be given to servers (a2rl's own variables and credentials never are)`);
  }
  const paths = (variable: string) => {
    const list = (env[variable] ?? '').split(':').map((p) => p.trim()).filter(Boolean);
    for (const p of list) if (!path.isAbsolute(p)) throw new ConfigError(variable, `${p} is not an absolute path`);
    return list;
  };
  return {
    memoryBytes: memory ? (limit('A2RL_SERVER_MEMORY', 'memoryBytes', memory) ?? null) : Math.floor((os.totalmem() * 3) / 4),
    maxProcesses: processes ? (limit('A2RL_SERVER_MAX_PROCESSES', 'maxProcesses', processes) ?? DEFAULT_SERVER_MAX_PROCESSES) : DEFAULT_SERVER_MAX_PROCESSES,
    passEnv,
    binds: paths('A2RL_SERVER_BINDS'),
    writable: paths('A2RL_SERVER_WRITABLE'),
  };
}

/** Why an external endpoint alone cannot grade submissions (one line, for config errors, doctor and gradings). */
export const INFERENCE_URL_REFUSAL =
  'an external endpoint cannot load submitted checkpoints: unset it so a2rl starts vLLM on each checkpoint (A2RL_SERVE_COMMAND), or set A2RL_INFERENCE_LORA=runtime if it is vLLM serving the task\'s base model with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and reading this machine\'s files (judges: A2RL_JUDGE_URL)';

function inferenceLoraMode(env: NodeJS.ProcessEnv, inferenceUrl: string | null): boolean {
  const mode = env.A2RL_INFERENCE_LORA?.trim();
  if (mode && mode !== 'runtime') throw new ConfigError('A2RL_INFERENCE_LORA', `unknown mode "${mode}" (the only one is "runtime")`);
  if (mode && !inferenceUrl) throw new ConfigError('A2RL_INFERENCE_LORA', 'set without A2RL_INFERENCE_URL (the endpoint that loads the adapters)');
  if (inferenceUrl && !mode) throw new ConfigError('A2RL_INFERENCE_URL', INFERENCE_URL_REFUSAL);
  return mode === 'runtime';
}

/**
 * Splits a command line into words without a shell. Rules: unquoted whitespace separates words;
 * '…' keeps everything literally; "…" keeps everything except that \" and \\ stand for " and \;
 * outside quotes a backslash makes the next character literal. No variables, globs, pipes or
 * redirections: such characters are ordinary text.
 */
export function splitCommand(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unterminated ' quote in "${line}"`);
      word += line.slice(i + 1, end);
      i = end;
      inWord = true;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === '\\' && (line[j + 1] === '"' || line[j + 1] === '\\')) j++;
        word += line[j];
      }
      if (j >= line.length) throw new Error(`unterminated " quote in "${line}"`);
      i = j;
      inWord = true;
    } else if (c === '\\') {
      if (i + 1 >= line.length) throw new Error(`trailing backslash in "${line}"`);
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  if (!words.length) throw new Error('the command is empty');
  return words;
}

/** The template's words with every placeholder replaced. */
export function renderCommand(template: readonly string[], values: Partial<Record<ServePlaceholder, string>>): string[] {
  return template.map((word) => word.replace(/\{(model_path|port|name)\}/g, (whole, key: ServePlaceholder) => values[key] ?? whole));
}

/** An http(s) base URL without a trailing `/v1` or slash (clients append `/v1/...`). */
function baseUrl(variable: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(variable, `not a URL: "${value}" (expected e.g. http://127.0.0.1:8000)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(variable, `unsupported scheme "${url.protocol}" in "${value}" (expected http:// or https://)`);
  if (url.search || url.hash) throw new ConfigError(variable, `"${value}" must not carry a query or fragment`);
  return `${url.origin}${url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '')}`;
}
