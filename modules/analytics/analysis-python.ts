import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { a2rlCacheDir, AgentPythonInstallError, findPython, lock, readAgentPythonInstall, run, type AgentPythonInstall } from '../agents/agent-python-env.js';
import { installedPortablePython, installPortablePython } from '../agents/portable-python.js';
import { packageRoot } from '../settings/package-root.js';

/**
 * The readers the exports are checked with, each a venv built from its pinned requirements file,
 * cached under A2RL_CACHE keyed by the pins' hash, the marker file written last (as the agents'
 * Python is, modules/agents/agent-python-env.ts):
 * - `analysis`: pyarrow (Parquet) and inspect-ai (its eval log reader), infra/analysis-python, on
 *   the system Python;
 * - `harbor`: Harbor (its ATIF trajectory models and validator), infra/harbor-python, on the
 *   portable Python 3.13 (Harbor needs ≥ 3.12), only where that is installed.
 */
interface ReaderVenv {
  name: 'analysis-python' | 'harbor-python';
  probe: string;
  /** The interpreter the venv is made from (installed first when it can be). */
  base: (env: NodeJS.ProcessEnv, log: (line: string) => void) => Promise<string>;
}

const ANALYSIS: ReaderVenv = {
  name: 'analysis-python',
  probe: 'import json, pyarrow, inspect_ai\nfrom importlib.metadata import version\nprint(json.dumps({n: version(n) for n in ("pyarrow", "inspect-ai")}))',
  base: async (env) => findPython(env),
};

const HARBOR: ReaderVenv = {
  name: 'harbor-python',
  probe: 'import json, harbor.utils.trajectory_validator\nfrom importlib.metadata import version\nprint(json.dumps({"harbor": version("harbor")}))',
  base: async (env, log) => installedPortablePython(env) ?? (await installPortablePython({ env, log })),
};

const MARKER = 'a2rl-installed.json';

export function analysisPythonDir(): string {
  return path.join(packageRoot(), 'infra', 'analysis-python');
}

const requirements = (v: ReaderVenv) => path.join(packageRoot(), 'infra', v.name, 'requirements.txt');
const keyOf = (v: ReaderVenv) => createHash('sha256').update(readFileSync(requirements(v))).digest('hex').slice(0, 16);

function prefixOf(v: ReaderVenv, env: NodeJS.ProcessEnv): string | null {
  const cache = a2rlCacheDir(env);
  return cache ? path.join(cache, v.name, keyOf(v)) : null;
}

function installed(v: ReaderVenv, env: NodeJS.ProcessEnv): string | null {
  const prefix = prefixOf(v, env);
  return prefix && readAgentPythonInstall(prefix, keyOf(v)) ? path.join(prefix, 'bin', 'python') : null;
}

async function install(v: ReaderVenv, opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void }): Promise<string> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => {});
  const key = keyOf(v);
  const prefix = prefixOf(v, env);
  if (!prefix) throw new AgentPythonInstallError('no cache directory: set A2RL_CACHE (or HOME)');
  const python = path.join(prefix, 'bin', 'python');
  if (readAgentPythonInstall(prefix, key)) return python;
  const base = await v.base(env, log);
  const release = await lock(`${prefix}.lock`, log);
  try {
    if (readAgentPythonInstall(prefix, key)) return python;
    const system = findPython(env);
    log(`installing the readers pinned in ${requirements(v)} into ${prefix} …`);
    rmSync(prefix, { recursive: true, force: true });
    mkdirSync(path.dirname(prefix), { recursive: true });
    // No pip inside: the system interpreter's pip installs into the venv (--python), as for the peer evaluators.
    await run(base, ['-m', 'venv', '--without-pip', prefix], env, log);
    // The file is a lock (uv pip compile --generate-hashes from requirements.in): every package and its hashes, nothing resolved here.
    await run(system, ['-m', 'pip', '--python', python, 'install', '--require-hashes', '--no-deps', '--only-binary=:all:', '--no-input', '--disable-pip-version-check', '--progress-bar', 'off', '-r', requirements(v)], env, log);
    const lines: string[] = [];
    await run(python, ['-c', v.probe], env, (line) => lines.push(line));
    const version: string[] = [];
    await run(python, ['-c', 'import sys; print(sys.version.split()[0])'], env, (line) => version.push(line));
    const done: AgentPythonInstall = { key, python: version.join('').trim(), versions: JSON.parse(lines.join('\n').trim().split('\n').pop()!) as Record<string, string> };
    writeFileSync(path.join(prefix, MARKER), `${JSON.stringify(done, null, 2)}\n`);
    log(`the readers are ready in ${prefix}: ${Object.entries(done.versions).map(([n, ver]) => `${n} ${ver}`).join(', ')}`);
    return python;
  } finally {
    release();
  }
}

/** pyarrow + inspect-ai's python for the current pins, else null (the specs that need it skip with one line). */
export const installedAnalysisPython = (env: NodeJS.ProcessEnv = process.env) => installed(ANALYSIS, env);
export const installAnalysisPython = (opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {}) => install(ANALYSIS, opts);
/** Harbor's python for the current pins, else null. */
export const installedHarborPython = (env: NodeJS.ProcessEnv = process.env) => installed(HARBOR, env);
export const installHarborPython = (opts: { env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {}) => install(HARBOR, opts);

/** Both readers; one that cannot be installed is a warning (its specs skip). */
export async function installExportReaders(opts: { log?: (line: string) => void } = {}): Promise<void> {
  const log = opts.log ?? console.error;
  for (const [what, go] of [['pyarrow, inspect-ai', installAnalysisPython], ['harbor', installHarborPython]] as const) {
    try {
      await go({ log });
    } catch (err) {
      log(`warning: could not install the export readers (${what}: their read-back specs will be skipped): ${(err as Error).message}`);
    }
  }
}
