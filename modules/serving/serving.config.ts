import { ConfigError } from '../../src/config/config.js';
import { parseDuration } from '../../src/duration.js';
import type { OpenAiEndpoint } from '../../tasks/task-pack.js';

/**
 * How submitted checkpoints are served for evaluation (paper tasks), read from the environment:
 *
 * - `A2RL_SERVE_COMMAND`: the server's command line as a template with the placeholders
 *   `{model_path}`, `{port}` and `{name}`. It is never given to a shell: it is split into words
 *   first (see splitCommand), then the placeholders are replaced inside each word, so a path with
 *   spaces stays one argument.
 * - `A2RL_INFERENCE_URL`: an OpenAI-compatible server that is already running (base URL, with or
 *   without the trailing `/v1`); no server is started and the served model is its first listed model.
 * - `A2RL_SERVE_READY_TIMEOUT`: how long a started server may take to answer `GET /v1/models`
 *   (a duration such as `600s`, `10m`).
 * - `A2RL_JUDGE_URL`, `A2RL_JUDGE_MODEL`, `A2RL_JUDGE_API_KEY`: the judge for judge-based tasks.
 */
export interface ServingConfig {
  /** The split template; placeholders are still in place. */
  serveCommand: string[];
  inferenceUrl: string | null;
  readyTimeoutMs: number;
  judge: OpenAiEndpoint | null;
}

export const DEFAULT_SERVE_COMMAND =
  'vllm serve {model_path} --host 127.0.0.1 --port {port} --served-model-name {name} --seed 0 --gpu-memory-utilization 0.85';
export const DEFAULT_READY_TIMEOUT = '600s';

const PLACEHOLDERS = ['model_path', 'port', 'name'] as const;
export type ServePlaceholder = (typeof PLACEHOLDERS)[number];

export function loadServingConfig(env: NodeJS.ProcessEnv = process.env): ServingConfig {
  const template = env.A2RL_SERVE_COMMAND?.trim() || DEFAULT_SERVE_COMMAND;
  let serveCommand: string[];
  try {
    serveCommand = splitCommand(template);
  } catch (err) {
    throw new ConfigError('A2RL_SERVE_COMMAND', (err as Error).message);
  }
  const words = serveCommand.join(' ');
  for (const unknown of words.matchAll(/\{([a-z_]+)\}/g)) {
    if (!(PLACEHOLDERS as readonly string[]).includes(unknown[1])) {
      throw new ConfigError('A2RL_SERVE_COMMAND', `unknown placeholder {${unknown[1]}} (allowed: ${PLACEHOLDERS.map((p) => `{${p}}`).join(' ')})`);
    }
  }
  for (const required of ['{model_path}', '{port}']) {
    if (!words.includes(required)) throw new ConfigError('A2RL_SERVE_COMMAND', `the template must contain ${required}: "${template}"`);
  }

  let readySeconds: number;
  try {
    readySeconds = parseDuration(env.A2RL_SERVE_READY_TIMEOUT?.trim() || DEFAULT_READY_TIMEOUT);
  } catch (err) {
    throw new ConfigError('A2RL_SERVE_READY_TIMEOUT', (err as Error).message);
  }

  const inferenceUrl = env.A2RL_INFERENCE_URL?.trim() ? baseUrl('A2RL_INFERENCE_URL', env.A2RL_INFERENCE_URL.trim()) : null;

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

  return { serveCommand, inferenceUrl, readyTimeoutMs: readySeconds * 1000, judge };
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
export function renderCommand(template: readonly string[], values: Record<ServePlaceholder, string>): string[] {
  return template.map((word) => word.replace(/\{(model_path|port|name)\}/g, (_, key: ServePlaceholder) => values[key]));
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
