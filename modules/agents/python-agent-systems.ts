import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../settings/package-root.js';
import { AgentPythonInstallError, cachePath, findPython, installOnce, readInstallMarker, run, type InstallOptions } from './agent-python-env.js';
import { installedPortablePython, installPortablePython, portablePythonKey, portablePythonRootOf, portableVenv } from './portable-python.js';

/**
 * Agent systems written in Python (OpenHands, R&D-Agent), each pinned in infra/python-agents/<id>/
 * (requirements.txt: every package and its hashes, compiled by uv from requirements.in; system.json:
 * which Python, which commands) and installed into a venv of its own in the machine cache — never the
 * agents' training environment, whose packages theirs would fight with. A system's commands are
 * exposed through a bin folder of their own (`a2rl-bin/`), so an agent's PATH gains the command and
 * not the system's `python` and `pip`: the agent's shell keeps finding the training environment first.
 */
export interface PythonAgentSystem {
  id: string;
  title: string;
  /** `portable`: the Debian 13 interpreter (portable-python.ts); `system`: the machine's Python 3.11. */
  python: 'portable' | 'system';
  /** The package declares a Python range that excludes the portable one though it runs on it (said in docs/agents.md). */
  ignoreRequiresPython?: boolean;
  /** Command name → file in the venv it runs. */
  commands: Record<string, string>;
  /** Python run in the new venv: imports the system and prints its version (a broken install fails here, not in a run). */
  probe: string;
  dir: string;
}

export interface PythonAgentSystemInstall {
  key: string;
  id: string;
  version: string;
  python: string;
}

const MARKER = 'a2rl-installed.json';
const BIN = 'a2rl-bin';

export function pythonAgentsDir(): string {
  return path.join(packageRoot(), 'infra', 'python-agents');
}

export function listPythonAgentSystems(root = pythonAgentsDir()): PythonAgentSystem[] {
  if (!existsSync(root)) return [];
  return readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(path.join(root, d.name, 'system.json')))
    .map((d) => ({ ...(JSON.parse(readFileSync(path.join(root, d.name, 'system.json'), 'utf8')) as Omit<PythonAgentSystem, 'dir'>), dir: path.join(root, d.name) }))
    .sort((a, b) => a.id.localeCompare(b.id));
}

/** Keys already computed, by folder and the files' size and modification time: every command lookup asks (agent-registry.ts). */
const keys = new Map<string, { stamp: string; key: string }>();

/** The install's key: its lock, its declaration and (for the portable one) the interpreter's key. */
export function pythonAgentSystemKey(system: PythonAgentSystem): string {
  const stamp = ['requirements.txt', 'system.json'].map((f) => statSync(path.join(system.dir, f))).map((st) => `${st.size}:${st.mtimeMs}`).join(' ');
  const known = keys.get(system.dir);
  if (known?.stamp === stamp) return known.key;
  const hash = createHash('sha256');
  for (const file of ['requirements.txt', 'system.json']) hash.update(readFileSync(path.join(system.dir, file))).update('\0');
  if (system.python === 'portable') hash.update(portablePythonKey());
  const key = hash.digest('hex').slice(0, 16);
  keys.set(system.dir, { stamp, key });
  return key;
}

export function pythonAgentSystemPrefix(system: PythonAgentSystem, env: NodeJS.ProcessEnv, key = pythonAgentSystemKey(system)): string | null {
  return cachePath(env, 'agent-systems', system.id, key);
}

/** The completed install of `system` for its current lock, or null. */
export function installedPythonAgentSystem(system: PythonAgentSystem, env: NodeJS.ProcessEnv = process.env): (PythonAgentSystemInstall & { prefix: string }) | null {
  const key = pythonAgentSystemKey(system);
  const prefix = pythonAgentSystemPrefix(system, env, key);
  const install = prefix ? readInstallMarker<PythonAgentSystemInstall>(path.join(prefix, MARKER), key) : null;
  return install ? { ...install, prefix: prefix! } : null;
}

/** The bin folders of the installed systems, searched after the pinned CLIs and before PATH (agent-registry.ts). */
export function pythonAgentBinDirs(env: NodeJS.ProcessEnv = process.env): string[] {
  return listPythonAgentSystems().flatMap((s) => {
    const installed = installedPythonAgentSystem(s, env);
    return installed ? [path.join(installed.prefix, BIN)] : [];
  });
}

/**
 * What the sandbox must show for a command found in a system's bin folder to run: the venv and the
 * interpreter's own root (the portable one, or the machine's Python prefix for a venv of it). Null
 * for a file that is not a managed system's.
 */
export function pythonAgentCommandBinds(binDir: string, env: NodeJS.ProcessEnv = process.env): string[] | null {
  if (path.basename(binDir) !== BIN) return null;
  const prefix = path.dirname(binDir);
  const install = listPythonAgentSystems().map((s) => installedPythonAgentSystem(s, env)).find((i) => i?.prefix === prefix);
  if (!install) return null;
  const root = portablePythonRootOf(install.python, env);
  return root ? [prefix, root] : [prefix, path.dirname(path.dirname(install.python))];
}

/** Installs every declared system unless installed (the portable Python first when one needs it). */
export async function installPythonAgentSystems(opts: InstallOptions = {}): Promise<string[]> {
  const prefixes: string[] = [];
  for (const system of listPythonAgentSystems()) prefixes.push(await installPythonAgentSystem(system, opts));
  return prefixes;
}

export async function installPythonAgentSystem(system: PythonAgentSystem, opts: InstallOptions = {}): Promise<string> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => {});
  const prefix = pythonAgentSystemPrefix(system, env);
  if (!prefix) throw new AgentPythonInstallError('no cache directory: set A2RL_CACHE (or HOME)');
  if (!opts.force && installedPythonAgentSystem(system, env)) {
    log(`${system.id} is already installed in ${prefix}`);
    return prefix;
  }
  const python = system.python === 'portable' ? installedPortablePython(env) ?? (await installPortablePython({ env, log })) : resolvedSystemPython(env);
  await installOnce(prefix, () => (opts.force ? null : installedPythonAgentSystem(system, env)), () => build(system, python, prefix, env, log), log);
  return prefix;
}

function resolvedSystemPython(env: NodeJS.ProcessEnv): string {
  const name = findPython(env);
  const out = spawnSync(name, ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8', env });
  return out.stdout.trim() || name;
}

async function build(system: PythonAgentSystem, python: string, prefix: string, env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<PythonAgentSystemInstall> {
  log(`installing ${system.title} pinned in ${system.dir}/requirements.txt into ${prefix} …`);
  rmSync(prefix, { recursive: true, force: true });
  mkdirSync(path.dirname(prefix), { recursive: true });
  if (system.python === 'portable') await portableVenv(python, prefix, env, log);
  else await run(python, ['-m', 'venv', prefix], env, log);
  // The lock lists every package with its hashes (--no-deps: nothing outside it is resolved). A few
  // pure-Python packages publish only source archives: built here, hash-checked like the wheels.
  const args = ['install', '--require-hashes', '--no-deps', '--prefer-binary', '--no-input', '--disable-pip-version-check', '--progress-bar', 'off'];
  if (system.ignoreRequiresPython) args.push('--ignore-requires-python');
  await run(path.join(prefix, 'bin', 'pip'), [...args, '-r', path.join(system.dir, 'requirements.txt')], env, log);
  const version = probe(system, path.join(prefix, 'bin', 'python'), env);
  const bin = path.join(prefix, BIN);
  mkdirSync(bin);
  for (const [name, target] of Object.entries(system.commands)) {
    if (!existsSync(path.join(prefix, target))) throw new AgentPythonInstallError(`${system.id}: ${target} is missing from the installed venv`);
    symlinkSync(path.join('..', target), path.join(bin, name));
  }
  const install: PythonAgentSystemInstall = { key: pythonAgentSystemKey(system), id: system.id, version, python };
  writeFileSync(path.join(prefix, MARKER), `${JSON.stringify(install, null, 2)}\n`);
  log(`${system.id} ${version} is ready in ${prefix}`);
  return install;
}

function probe(system: PythonAgentSystem, python: string, env: NodeJS.ProcessEnv): string {
  // Offline, as in a run: LiteLLM would otherwise fetch its price list while importing.
  // In its own prefix: R&D-Agent starts a log folder in the working directory when imported.
  const out = spawnSync(python, ['-c', system.probe], { cwd: path.dirname(path.dirname(python)), encoding: 'utf8', env: { ...env, LITELLM_LOCAL_MODEL_COST_MAP: 'True' }, timeout: 300_000 });
  if (out.status !== 0) throw new AgentPythonInstallError(`${system.id}: the new environment cannot import it: ${(out.stderr || out.error?.message || '').trim().split('\n').pop()}`);
  return out.stdout.trim().split('\n').pop() ?? '';
}
