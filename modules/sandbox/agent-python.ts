import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { installedAgentPython } from '../agents/agent-python-env.js';
import { packageRoot } from '../settings/package-root.js';

/**
 * The Python environment an agent trains with (torch, trl, vllm…), read-only inside the sandbox at its
 * own path, first on PATH. In order: `A2RL_AGENT_PYTHON_<TASK>` (task id upper-cased, other characters
 * as `_`), then `A2RL_AGENT_PYTHON` — a venv or conda prefix the operator prepared (e.g. with CUDA) —
 * then the environment `a2rl agents python install` built (agent-python-env.ts), when installed.
 * `A2RL_AGENT_PYTHON=none` gives the agent no environment.
 */
export interface AgentPython {
  /** The environment's prefix (has `bin/python`). */
  prefix: string;
  /** The variable it came from (for messages and the record), or `managed` for `a2rl agents python install`'s. */
  variable: string;
  /** Where the interpreter really lives when the prefix only links to it (a venv's `home`), so it is bound too. */
  interpreterPrefix: string | null;
  /** A conda environment (has `conda-meta/`): CONDA_PREFIX rather than VIRTUAL_ENV. */
  conda: boolean;
}

export class AgentPythonError extends Error {
  override readonly name = 'AgentPythonError';
}

/** The variable naming a task's own environment, e.g. `A2RL_AGENT_PYTHON_ALFWORLD`. */
export function taskPythonVariable(task: string): string {
  return `A2RL_AGENT_PYTHON_${task.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/** The configured environment, validated; null when none is configured. Throws AgentPythonError (one line). */
export function agentPython(env: NodeJS.ProcessEnv, task: string): AgentPython | null {
  const perTask = taskPythonVariable(task);
  const variable = env[perTask]?.trim() ? perTask : env.A2RL_AGENT_PYTHON?.trim() ? 'A2RL_AGENT_PYTHON' : null;
  if (!variable) return managedPython(env);
  const given = env[variable]!.trim();
  if (given === 'none') return null;
  const fail = (why: string) => new AgentPythonError(`${variable}=${given}: ${why} (give the prefix of a venv or conda environment, e.g. /opt/envs/train)`);
  if (!path.isAbsolute(given)) throw fail('not an absolute path');
  if (!isDir(given)) throw fail('no such directory');
  const prefix = realpathSync(given);
  const python = path.join(prefix, 'bin', 'python');
  if (!existsSync(python)) throw fail(`${python} does not exist`);
  return { prefix, variable, interpreterPrefix: interpreterPrefix(prefix, python), conda: isDir(path.join(prefix, 'conda-meta')) };
}

/** The managed environment when it is installed for the current lock (no variable set). */
function managedPython(env: NodeJS.ProcessEnv): AgentPython | null {
  const installed = installedAgentPython(env);
  if (!installed) return null;
  const prefix = realpathSync(installed);
  return { prefix, variable: 'managed', interpreterPrefix: interpreterPrefix(prefix, path.join(prefix, 'bin', 'python')), conda: false };
}

/** A venv's interpreter lives elsewhere (pyvenv.cfg `home`, the link target): its prefix, when outside the environment. */
function interpreterPrefix(prefix: string, python: string): string | null {
  let home: string | null = null;
  try {
    const cfg = readFileSync(path.join(prefix, 'pyvenv.cfg'), 'utf8');
    const m = /^home\s*=\s*(.+)$/m.exec(cfg);
    if (m) home = path.dirname(m[1].trim());
  } catch {
    // not a venv
  }
  home ??= path.dirname(path.dirname(realpathSync(python)));
  return home === prefix || home.startsWith(`${prefix}/`) ? null : home;
}

/** The drop-in client packages (`alfworld`, `web_agent_site`) interactive tasks put on PYTHONPATH. */
export function dropInPackagesDir(): string {
  return path.join(packageRoot(), 'tasks', 'paper-common', 'python');
}

/** The agent's run-time: its Python, the packages put on PYTHONPATH, the GPUs it holds. */
export interface AgentRuntime {
  python: AgentPython | null;
  pythonPackages: string[];
  /** GPU ids the run holds (undefined: the harness's own, see gpu-binding.ts). */
  gpus?: string[];
}

/** The run-time of a run of `task` (validates the Python environment: AgentPythonError). */
export function agentRuntime(opts: { env: NodeJS.ProcessEnv; task: string; interactive: boolean; gpus?: string[] }): AgentRuntime {
  return {
    python: agentPython(opts.env, opts.task),
    pythonPackages: opts.interactive ? [dropInPackagesDir()] : [],
    ...(opts.gpus ? { gpus: opts.gpus } : {}),
  };
}

/**
 * The environment variables the run-time sets (the same inside the sandbox and out, since every
 * path is bound at its own path): the environment's bin/ first on PATH, VIRTUAL_ENV or CONDA_PREFIX,
 * the drop-in packages first on PYTHONPATH.
 */
export function runtimeEnv(runtime: AgentRuntime, env: Record<string, string>): Record<string, string> {
  const out = { ...env };
  const { python, pythonPackages } = runtime;
  if (python) {
    out.PATH = [path.join(python.prefix, 'bin'), ...(env.PATH ? [env.PATH] : [])].join(':');
    if (python.conda) out.CONDA_PREFIX = python.prefix;
    else out.VIRTUAL_ENV = python.prefix;
  }
  if (pythonPackages.length) out.PYTHONPATH = [...pythonPackages, ...(env.PYTHONPATH ? [env.PYTHONPATH] : [])].join(':');
  return out;
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}
