import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { packageRoot } from '../settings/package-root.js';

/**
 * The agents' Python (torch CPU, transformers, trl, peft, datasets, accelerate, safetensors), a venv
 * built from infra/agent-python/requirements.txt — every file pinned and hash-checked, through the
 * project's one constraints file (torch==2.13.0: an unpinned torch is a CUDA build of several GB).
 * It lives in a machine cache outside the clone, keyed by the requirements' hash, so every clone and
 * CI job on a machine shares one copy and a changed lock builds a new one. Runs bind it read-only as
 * the agent's Python when no A2RL_AGENT_PYTHON(_<TASK>) names another (sandbox/agent-python.ts).
 */
export function agentPythonDir(): string {
  return path.join(packageRoot(), 'infra', 'agent-python');
}

const MARKER = 'a2rl-installed.json';
const PYTHON_VERSION = '3.11'; // requirements.txt pins cp311 wheels

/** What the marker file records once an install completed (written last: its presence means complete). */
export interface AgentPythonInstall {
  key: string;
  python: string;
  versions: Record<string, string>;
}

/** The key of the pinned environment: the hash of requirements.txt and constraints.txt. */
export function agentPythonKey(dir = agentPythonDir()): string {
  const hash = createHash('sha256');
  for (const file of ['requirements.txt', 'constraints.txt']) hash.update(readFileSync(path.join(dir, file))).update('\0');
  return hash.digest('hex').slice(0, 16);
}

/** Where a2rl's machine caches live: A2RL_CACHE, else $XDG_CACHE_HOME/a2rl, else ~/.cache/a2rl (null when the env names no home). */
export function a2rlCacheDir(env: NodeJS.ProcessEnv): string | null {
  if (env.A2RL_CACHE?.trim()) return path.resolve(env.A2RL_CACHE.trim());
  if (env.XDG_CACHE_HOME?.trim()) return path.join(path.resolve(env.XDG_CACHE_HOME.trim()), 'a2rl');
  return env.HOME?.trim() ? path.join(env.HOME.trim(), '.cache', 'a2rl') : null;
}

/** `<cache>/<parts…>` in the machine cache, or null when env names no cache. */
export function cachePath(env: NodeJS.ProcessEnv, ...parts: string[]): string | null {
  const cache = a2rlCacheDir(env);
  return cache ? path.join(cache, ...parts) : null;
}

/** The managed environment's prefix for the current requirements (null when env names no cache). */
export function managedAgentPythonPrefix(env: NodeJS.ProcessEnv, key = agentPythonKey()): string | null {
  return cachePath(env, 'agent-python', key);
}

/**
 * An installer's marker (written last) when it was written for `key` and `complete` agrees; null when
 * absent, partial or another lock's.
 */
export function readInstallMarker<T extends { key: string }>(file: string, key: string, complete: (install: T) => boolean = () => true): T | null {
  try {
    const install = JSON.parse(readFileSync(file, 'utf8')) as T;
    return install.key === key && complete(install) ? install : null;
  } catch {
    return null;
  }
}

/** The completed install at `prefix` for `key`, or null (absent, partial, or another lock's). */
export function readAgentPythonInstall(prefix: string, key: string): AgentPythonInstall | null {
  return readInstallMarker<AgentPythonInstall>(path.join(prefix, MARKER), key, () => existsSync(path.join(prefix, 'bin', 'python')));
}

/** The managed environment's prefix when it is installed for the current requirements, else null. */
export function installedAgentPython(env: NodeJS.ProcessEnv): string | null {
  let key: string;
  try {
    key = agentPythonKey();
  } catch {
    return null; // a copy of a2rl without infra/agent-python: nothing managed
  }
  const prefix = managedAgentPythonPrefix(env, key);
  return prefix && readAgentPythonInstall(prefix, key) ? prefix : null;
}

export class AgentPythonInstallError extends Error {
  override readonly name = 'AgentPythonInstallError';
}

/** What every machine-cache installer takes (the agents' Python, the portable Python, the Python agent systems). */
export interface InstallOptions {
  env?: NodeJS.ProcessEnv;
  log?: (line: string) => void;
  force?: boolean;
}

/** Builds the managed environment unless it is already there; returns its prefix. One installer at a time per machine. */
export async function installAgentPython(opts: InstallOptions = {}): Promise<string> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => {});
  const dir = agentPythonDir();
  const key = agentPythonKey(dir);
  const prefix = managedAgentPythonPrefix(env, key);
  if (!prefix) throw new AgentPythonInstallError('no cache directory: set A2RL_CACHE (or HOME)');
  if (!opts.force && readAgentPythonInstall(prefix, key)) {
    log(`the agents' Python is already installed in ${prefix}`);
    return prefix;
  }
  await installOnce(prefix, () => (opts.force ? null : readAgentPythonInstall(prefix, key)), () => build(dir, prefix, key, env, log), log);
  return prefix;
}

/**
 * One installer at a time per machine cache entry: takes the lock beside `prefix`, then builds unless
 * another installer finished while this one waited (`ready` says so). Returns what is installed.
 */
export async function installOnce<T>(prefix: string, ready: () => T | null, build: () => Promise<T>, log: (line: string) => void): Promise<T> {
  const release = await lock(`${prefix}.lock`, log);
  try {
    return ready() ?? (await build());
  } finally {
    release();
  }
}

async function build(dir: string, prefix: string, key: string, env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<AgentPythonInstall> {
  const python = findPython(env);
  log(`installing the agents' Python pinned in ${dir}/requirements.txt into ${prefix} (Python ${python}) …`);
  // A venv is not relocatable (its scripts name their prefix): built in place, the marker written last marks it complete.
  rmSync(prefix, { recursive: true, force: true });
  mkdirSync(path.dirname(prefix), { recursive: true });
  await run(python, ['-m', 'venv', prefix], env, log);
  const pip = path.join(prefix, 'bin', 'pip');
  // Wheels only: nothing is compiled; every file's hash is checked; the constraints keep torch on its CPU wheel.
  await run(pip, ['install', '--require-hashes', '--only-binary=:all:', '--no-input', '--disable-pip-version-check', '--progress-bar', 'off',
    '-c', path.join(dir, 'constraints.txt'), '-r', path.join(dir, 'requirements.txt')], env, log);
  const versions = importProbe(path.join(prefix, 'bin', 'python'), env);
  const install: AgentPythonInstall = { key, python: spawnSync(python, ['-c', 'import sys; print(sys.version.split()[0])'], { encoding: 'utf8', env }).stdout.trim(), versions };
  writeFileSync(path.join(prefix, MARKER), `${JSON.stringify(install, null, 2)}\n`);
  log(`the agents' Python is ready in ${prefix}: ${Object.entries(versions).map(([n, v]) => `${n} ${v}`).join(', ')}`);
  return install;
}

/** A Python 3.11 interpreter on PATH (the lock pins cp311 wheels). */
export function findPython(env: NodeJS.ProcessEnv): string {
  for (const name of [`python${PYTHON_VERSION}`, 'python3']) {
    const out = spawnSync(name, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], { encoding: 'utf8', env });
    if (out.status === 0 && out.stdout.trim() === PYTHON_VERSION) return name;
  }
  throw new AgentPythonInstallError(`no Python ${PYTHON_VERSION} on PATH (python${PYTHON_VERSION} or python3): the agents' Python pins its wheels`);
}

const PROBE = 'import json, torch, trl, transformers, peft, datasets, accelerate, safetensors, tokenizers as t\nprint(json.dumps({m.__name__: m.__version__ for m in (torch, trl, transformers, peft, datasets, accelerate, safetensors, t)}))';

/** Imports what an agent trains with (a broken wheel fails here, not in a run) and returns the versions. */
function importProbe(python: string, env: NodeJS.ProcessEnv): Record<string, string> {
  const out = spawnSync(python, ['-c', PROBE], { encoding: 'utf8', env, timeout: 300_000 });
  if (out.status !== 0) throw new AgentPythonInstallError(`the new environment cannot import its packages: ${out.stderr.trim().split('\n').pop() ?? out.error?.message ?? ''}`);
  return JSON.parse(out.stdout.trim().split('\n').pop()!) as Record<string, string>;
}

// pip warns once per package about each configured index that does not carry it: noise in a log.
const NOISE = /^WARNING: Location '.*' is ignored: it is neither a file nor a directory\.$/;

export function run(file: string, args: string[], env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let last = '';
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        if (NOISE.test(line)) return;
        if (line.trim()) last = line.trim();
        log(line);
      });
    }
    child.on('error', (err) => reject(new AgentPythonInstallError(`${path.basename(file)}: ${err.message}`)));
    child.on('close', (code) => (code === 0 ? resolve() : reject(new AgentPythonInstallError(`${path.basename(file)} ${args[0]} failed (exit ${code}): ${last}`))));
  });
}

/** An exclusive lock: a directory holding the owner's pid, taken over when that process is gone. */
export async function lock(dir: string, log: (line: string) => void): Promise<() => void> {
  mkdirSync(path.dirname(dir), { recursive: true });
  let told = false;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(path.join(dir, 'pid'), String(process.pid));
      return () => rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = Number(readFileSafe(path.join(dir, 'pid')));
    // No pid a minute after the directory was made: its maker died in between.
    if (owner ? !alive(owner) : ageMs(dir) > 60_000) {
      rmSync(dir, { recursive: true, force: true });
      continue;
    }
    if (!told) log(`waiting for another install of the agents' Python (pid ${owner || '?'}) …`);
    told = true;
    await sleep(2_000);
  }
}

function ageMs(file: string): number {
  try {
    return Date.now() - statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

function readFileSafe(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
