import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { a2rlCacheDir, AgentPythonInstallError, findPython, lock, readAgentPythonInstall, run, type AgentPythonInstall } from '../agents/agent-python-env.js';
import { packageRoot } from '../settings/package-root.js';

/**
 * The readers the exports are checked with (pyarrow for Parquet, inspect-ai's log reader): a venv
 * built from infra/analysis-python/requirements.txt, cached under A2RL_CACHE keyed by the pins'
 * hash, the marker file written last (as the agents' Python is, modules/agents/agent-python-env.ts).
 */
export function analysisPythonDir(): string {
  return path.join(packageRoot(), 'infra', 'analysis-python');
}

const PROBE = 'import json, pyarrow, inspect_ai\nfrom importlib.metadata import version\nprint(json.dumps({n: version(n) for n in ("pyarrow", "inspect-ai")}))';
const MARKER = 'a2rl-installed.json';

export function analysisPythonKey(dir = analysisPythonDir()): string {
  return createHash('sha256').update(readFileSync(path.join(dir, 'requirements.txt'))).digest('hex').slice(0, 16);
}

function prefixOf(env: NodeJS.ProcessEnv, key: string): string | null {
  const cache = a2rlCacheDir(env);
  return cache ? path.join(cache, 'analysis-python', key) : null;
}

/** The venv's python for the current pins, else null (then the specs that need it skip with one line). */
export function installedAnalysisPython(env: NodeJS.ProcessEnv = process.env): string | null {
  const key = analysisPythonKey();
  const prefix = prefixOf(env, key);
  return prefix && readAgentPythonInstall(prefix, key) ? path.join(prefix, 'bin', 'python') : null;
}

/** Builds the venv unless it is there; returns its python. */
export async function installAnalysisPython(opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {}): Promise<string> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => {});
  const key = analysisPythonKey();
  const prefix = prefixOf(env, key);
  if (!prefix) throw new AgentPythonInstallError('no cache directory: set A2RL_CACHE (or HOME)');
  const python = path.join(prefix, 'bin', 'python');
  if (readAgentPythonInstall(prefix, key)) return python;
  const release = await lock(`${prefix}.lock`, log);
  try {
    if (readAgentPythonInstall(prefix, key)) return python;
    const system = findPython(env);
    log(`installing the analysis readers pinned in ${analysisPythonDir()}/requirements.txt into ${prefix} …`);
    rmSync(prefix, { recursive: true, force: true });
    mkdirSync(path.dirname(prefix), { recursive: true });
    await run(system, ['-m', 'venv', '--without-pip', prefix], env, log);
    await run(system, ['-m', 'pip', '--python', python, 'install', '--only-binary=:all:', '--no-input', '--disable-pip-version-check', '--progress-bar', 'off', '-r', path.join(analysisPythonDir(), 'requirements.txt')], env, log);
    const lines: string[] = [];
    await run(python, ['-c', PROBE], env, (line) => lines.push(line));
    const version: string[] = [];
    await run(system, ['-c', 'import sys; print(sys.version.split()[0])'], env, (line) => version.push(line));
    const install: AgentPythonInstall = { key, python: version.join('').trim(), versions: JSON.parse(lines.join('\n').trim().split('\n').pop()!) as Record<string, string> };
    writeFileSync(path.join(prefix, MARKER), `${JSON.stringify(install, null, 2)}\n`);
    log(`the analysis readers are ready in ${prefix}: ${Object.entries(install.versions).map(([n, v]) => `${n} ${v}`).join(', ')}`);
    return python;
  } finally {
    release();
  }
}
