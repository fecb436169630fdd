import { accessSync, constants, existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../settings/package-root.js';
import { AGENT_SESSION_KINDS, type AgentSessionKind } from './agent-session.js';
import { pythonAgentBinDirs, pythonAgentCommandBinds } from './python-agent-systems.js';

/**
 * Agents are configuration plus a start script, one folder each under modules/agents/. The harness
 * runs `bash <agent>/start.sh` inside the sandbox with the workspace environment; what an agent
 * needs to run (commands on PATH, API keys) is declared in its agent.json and checked here.
 */
export interface AgentSpec {
  id: string;
  title: string;
  kind: 'reference' | 'external' | 'test' | 'ad-hoc';
  /** Driver LLM the agent uses when none is given or detected ('none' for rule-based agents). */
  driver?: string;
  requires: { commands?: string[]; env?: string[]; anyEnv?: string[] };
  /** How an LLM-driven agent reaches its model through the run's gateway (absent: no model). */
  llm?: AgentLlm;
  /** Folder holding start.sh (absent for ad-hoc commands). */
  dir?: string;
  /**
   * Hold each program this many ms at its exec (a stop its parent cannot see) instead of stopping it
   * with SIGSTOP until it is captured: for agents that run commands in an interactive shell with job
   * control, which takes that SIGSTOP for its job being suspended (docs/runs.md, exec-time capture).
   */
  execHoldMs?: number;
  /**
   * What a resumed run's agent does (docs/agents.md, "Resuming a run"): `resumable` continues its own
   * session (its CLI finds it in the agent home by A2RL_SESSION_ID or as its latest) with the
   * harness's note as the next user message; `restart` starts afresh with the prompt plus the note.
   * Absent: restart.
   */
  session?: AgentSessionKind;
}

/**
 * What an agent CLI needs to use the run's LLM gateway, declared in its agent.json and written by the
 * harness: environment variables and files of its home (paths relative to HOME). Values may use
 * `{gateway}` (the gateway's base URL as the agent sees it), `{token}` (the run's gateway token, the
 * only credential the agent holds), `{model}` (the driver), `{home}` and `{workspace}`.
 */
export interface AgentLlm {
  providers: Array<'anthropic' | 'openai' | 'gemini'>;
  /** The model `{model}` stands for when the operator gives no --driver. */
  defaultModel: string;
  env?: Record<string, string>;
  files?: Record<string, string>;
}

export interface AgentLlmValues {
  gateway: string;
  token: string;
  model: string;
  home: string;
  workspace: string;
}

export interface AgentAvailability {
  spec: AgentSpec;
  missing: string[];
}

export function agentsRoot(): string {
  return path.join(packageRoot(), 'modules', 'agents');
}

export function listAgents(root = agentsRoot()): AgentSpec[] {
  return readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(path.join(root, d.name, 'agent.json')))
    .map((d) => loadAgent(d.name, root))
    .sort((a, b) => a.id.localeCompare(b.id));
}

export function loadAgent(id: string, root = agentsRoot()): AgentSpec {
  const file = path.join(root, id, 'agent.json');
  if (!/^[a-z0-9][a-z0-9-]*$/.test(id) || !existsSync(file)) {
    const known = listAgents(root).map((a) => a.id);
    throw new Error(`unknown agent "${id}" (available: ${known.join(', ')}; or use --agent-command '<shell command>')`);
  }
  const spec = JSON.parse(readFileSync(file, 'utf8')) as AgentSpec;
  if (spec.id !== id) throw new Error(`${file}: id "${spec.id}" does not match its folder "${id}"`);
  if (spec.llm) checkLlmSection(file, spec.llm);
  if (spec.execHoldMs !== undefined && !(Number.isInteger(spec.execHoldMs) && spec.execHoldMs >= 1 && spec.execHoldMs <= 10_000)) throw new Error(`${file}: execHoldMs must be a whole number of milliseconds from 1 to 10000`);
  if (spec.session !== undefined && !AGENT_SESSION_KINDS.includes(spec.session)) throw new Error(`${file}: session must be one of ${AGENT_SESSION_KINDS.join(', ')}`);
  return { ...spec, requires: spec.requires ?? {}, dir: path.join(root, id) };
}

const PROVIDER_NAMES = ['anthropic', 'openai', 'gemini'];

/** An adapter's `llm` section is configuration the harness writes into the sandbox: refuse anything odd. */
function checkLlmSection(file: string, llm: AgentLlm): void {
  const bad = (what: string) => new Error(`${file}: llm.${what}`);
  if (!Array.isArray(llm.providers) || llm.providers.length === 0 || llm.providers.some((p) => !PROVIDER_NAMES.includes(p))) throw bad(`providers must list some of ${PROVIDER_NAMES.join(', ')}`);
  if (typeof llm.defaultModel !== 'string' || !llm.defaultModel) throw bad('defaultModel must be a model name');
  for (const [name, value] of Object.entries(llm.env ?? {})) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || typeof value !== 'string') throw bad(`env: "${name}" must be a variable name with a string value`);
  }
  for (const [rel, content] of Object.entries(llm.files ?? {})) {
    const normal = path.posix.normalize(rel);
    if (path.posix.isAbsolute(rel) || normal.startsWith('..') || normal !== rel || typeof content !== 'string') throw bad(`files: "${rel}" must be a relative path inside the home with a string content`);
  }
}

/** Whether the agent continues its own session on resume (agent.json `session`; restart when absent). */
export function agentSessionKind(spec: AgentSpec): AgentSessionKind {
  return spec.session ?? 'restart';
}

/** An agent given as a shell command (`--agent-command`), run with `bash -c` in the workspace. */
export function adHocAgent(command: string): AgentSpec {
  return { id: 'ad-hoc', title: command, kind: 'ad-hoc', requires: {} };
}

/** Where `npm test` and `a2rl agents install` put the agent CLIs at the versions a2rl is tested with. */
export function projectCliBin(): string {
  return path.join(packageRoot(), 'infra', 'agent-clis', 'node_modules', '.bin');
}

/** A command of the agent as found on this machine, and what the sandbox must bind for it to run there. */
export interface ResolvedCommand {
  name: string;
  /** The file found (a link, for npm installs). */
  file: string;
  /** The directory to put on the agent's PATH. */
  binDir: string;
  /** Host directories the command needs, bound read-only at the same path (the sandbox skips ones it already shows). */
  binds: string[];
}

/**
 * Finds a command in the project's pinned CLIs first, then in the pinned Python agent systems, then on
 * `env.PATH`. An npm-installed CLI needs its whole `node_modules` (platform packages, dependencies) and
 * is bound as such; a Python system's command its venv and its interpreter's root; anything else the
 * directories of the file found and of its real target.
 */
export function resolveCommand(name: string, env: NodeJS.ProcessEnv = process.env): ResolvedCommand | null {
  if (!/^[A-Za-z0-9._+-]+$/.test(name)) return null;
  const dirs = [projectCliBin(), ...pythonAgentBinDirs(env), ...(env.PATH ?? '').split(':').filter((d) => path.isAbsolute(d))];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    let real: string;
    try {
      real = realpathSync(file);
      accessSync(real, constants.X_OK);
    } catch {
      continue;
    }
    const python = pythonAgentCommandBinds(dir, env);
    if (python) return { name, file, binDir: dir, binds: python };
    const modules = outermostNodeModules(real);
    const binds = modules ? [modules] : [...new Set([realpathSync(dir), path.dirname(real)])];
    if (modules && !isWithin(realpathSync(dir), modules)) binds.push(realpathSync(dir));
    return { name, file, binDir: realpathSync(dir), binds };
  }
  return null;
}

function outermostNodeModules(file: string): string | null {
  const at = file.indexOf(`${path.sep}node_modules${path.sep}`);
  return at < 0 ? null : file.slice(0, at + '/node_modules'.length);
}

function isWithin(p: string, dir: string): boolean {
  return p === dir || p.startsWith(`${dir}/`);
}

/** The upstream of each provider the agent needs: `A2RL_LLM_<PROVIDER>_KEY` must be set. */
export function upstreamKeyVariable(provider: AgentLlm['providers'][number]): string {
  return `A2RL_LLM_${provider.toUpperCase()}_KEY`;
}

/** What is missing on this machine to run the agent: commands, unset variables, the model upstream's key. */
export function checkAgent(spec: AgentSpec, env: NodeJS.ProcessEnv = process.env): AgentAvailability {
  const missing: string[] = [];
  for (const command of spec.requires.commands ?? []) {
    if (!resolveCommand(command, env)) missing.push(`command "${command}" (neither on PATH nor among the pinned CLIs and Python agent systems that \`a2rl agents install\` provides)`);
  }
  for (const name of spec.requires.env ?? []) if (!env[name]) missing.push(`environment variable ${name}`);
  const any = spec.requires.anyEnv ?? [];
  if (any.length && !any.some((name) => env[name])) missing.push(`one of ${any.join(', ')}`);
  for (const provider of spec.llm?.providers ?? []) {
    const key = upstreamKeyVariable(provider);
    if (!env[key]) missing.push(`${key} (the ${provider} key the LLM gateway calls with; A2RL_LLM_${provider.toUpperCase()}_URL for another endpoint)`);
  }
  return { spec, missing };
}

/** An agent.json `llm` value with its placeholders filled in. */
export function fillLlmTemplate(template: string, values: AgentLlmValues): string {
  return template.replace(/\{(gateway|token|model|home|workspace)\}/g, (_, name: keyof AgentLlmValues) => values[name]);
}

/** The environment and home files an LLM agent's CLI gets, its placeholders filled in. */
export function agentLlmSetup(llm: AgentLlm, values: AgentLlmValues): { env: Record<string, string>; files: Record<string, string> } {
  const fill = (entries: Record<string, string> = {}) => Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, fillLlmTemplate(v, values)]));
  return { env: fill(llm.env), files: fill(llm.files) };
}

/** Driver attribution as in the paper: explicit flag, else the agent's environment, else the agent's own. */
export function detectDriver(explicit: string | undefined, spec: AgentSpec, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return explicit || env.LLM_MODEL || env.CHAT_MODEL || env.OPENAI_MODEL || spec.driver;
}
