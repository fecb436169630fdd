import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../settings/package-root.js';

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
  /** Folder holding start.sh (absent for ad-hoc commands). */
  dir?: string;
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
  return { ...spec, requires: spec.requires ?? {}, dir: path.join(root, id) };
}

/** An agent given as a shell command (`--agent-command`), run with `bash -c` in the workspace. */
export function adHocAgent(command: string): AgentSpec {
  return { id: 'ad-hoc', title: command, kind: 'ad-hoc', requires: {} };
}

function onPath(command: string, env: NodeJS.ProcessEnv): boolean {
  try {
    execFileSync('sh', ['-c', `command -v "$0" >/dev/null`, command], { env, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** What is missing on this machine to run the agent: commands not on PATH, unset API keys. */
export function checkAgent(spec: AgentSpec, env: NodeJS.ProcessEnv = process.env): AgentAvailability {
  const missing: string[] = [];
  for (const command of spec.requires.commands ?? []) if (!onPath(command, env)) missing.push(`command "${command}" on PATH`);
  for (const name of spec.requires.env ?? []) if (!env[name]) missing.push(`environment variable ${name}`);
  const any = spec.requires.anyEnv ?? [];
  if (any.length && !any.some((name) => env[name])) missing.push(`one of ${any.join(', ')}`);
  return { spec, missing };
}

/** Driver attribution as in the paper: explicit flag, else the agent's environment, else the agent's own. */
export function detectDriver(explicit: string | undefined, spec: AgentSpec, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return explicit || env.LLM_MODEL || env.CHAT_MODEL || env.OPENAI_MODEL || spec.driver;
}
