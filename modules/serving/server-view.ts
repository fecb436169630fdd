import { accessSync, constants, existsSync, openSync, readSync, closeSync, readFileSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { SYSTEM_DIRS } from '../sandbox/sandbox.js';

/**
 * What a confined server (model server, environment server) sees of the harness's machine: the
 * environment variables it is given (an allowlist: never a credential or an a2rl variable) and the
 * host paths bound read-only for its command (its executable's installation, the paths its command
 * line names). Pure functions of their inputs, apart from looking at the filesystem.
 */

/** Variables passed by name: locale, library and Python search paths. */
const PASSED_NAMES = /^(LANG|LANGUAGE|LC_[A-Z]+|TZ|LD_LIBRARY_PATH|PYTHONPATH|PYTHONHASHSEED|PYTHONDONTWRITEBYTECODE|PYTHONUNBUFFERED)$/;
/** Variables passed by prefix: how the ML stack is tuned (vLLM, CUDA, NCCL, PyTorch, thread pools, offline switches). */
const PASSED_PREFIXES = /^(VLLM|NCCL|CUDA|CUBLAS|CUDNN|NVIDIA|PYTORCH|TORCH|TORCHINDUCTOR|TRITON|OMP|MKL|OPENBLAS|TOKENIZERS|HF_HUB|TRANSFORMERS)_/;
/** Never passed by a pattern, whatever its prefix: it names a credential. */
const CREDENTIAL_NAME = /(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE)/i;

/** What every confined server gets whatever the harness has: offline switches, a private HOME and TMPDIR. */
const FIXED_ENV: Record<string, string> = {
  HOME: '/tmp',
  TMPDIR: '/tmp',
  LANG: 'C.UTF-8',
  HF_HUB_OFFLINE: '1',
  HF_DATASETS_OFFLINE: '1',
  TRANSFORMERS_OFFLINE: '1',
  VLLM_NO_USAGE_STATS: '1',
  DO_NOT_TRACK: '1',
};

/** Whether `name` may be configured to pass through (`A2RL_SERVER_ENV`): never a2rl's own or a credential. */
export function passableName(name: string): boolean {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && !name.startsWith('A2RL_') && !CREDENTIAL_NAME.test(name);
}

/**
 * The server's environment: the fixed variables, the harness's PATH and the allowlisted variables
 * of `host`, the names in `extraNames` (configured, or the server's own such as ALFWORLD_DATA), then
 * `own` (the server's own values: its bearer token, CUDA_VISIBLE_DEVICES), which win.
 */
export function serverEnv(host: NodeJS.ProcessEnv, extraNames: readonly string[], own: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = { ...FIXED_ENV, PATH: host.PATH || '/usr/local/bin:/usr/bin:/bin' };
  for (const [name, value] of Object.entries(host)) {
    if (value === undefined || name.startsWith('A2RL_') || CREDENTIAL_NAME.test(name)) continue;
    if (PASSED_NAMES.test(name) || PASSED_PREFIXES.test(name)) env[name] = value;
  }
  for (const name of extraNames) {
    const value = host[name];
    if (value !== undefined && passableName(name)) env[name] = value;
  }
  return { ...env, ...own };
}

/** Where a path may not be bound: the harness's home (ledger, keys, task cache with held-out data) and anything holding it. */
export interface BindPolicy {
  /** A2RL_HOME, resolved. */
  home: string;
}

/** Host directories whose whole content no server may see, bound by themselves. */
const NEVER_WHOLE = ['/', '/proc', '/sys', '/dev', '/run', '/var', '/var/run', '/tmp', '/root', '/home'];

/** A host path a server may have bound read-only: absolute, existing, outside A2RL_HOME and not holding it. */
export function bindable(p: string, policy: BindPolicy): boolean {
  if (!path.isAbsolute(p) || !existsSync(p)) return false;
  const abs = path.resolve(p);
  if (NEVER_WHOLE.includes(abs)) return false;
  if (isWithin(policy.home, abs)) return false;
  // Inside A2RL_HOME only one task's dataset folder (micro ALFWorld games: ALFWORLD_DATA), never the
  // ledger, keys, runs or the datasets folder as a whole.
  if (isWithin(abs, policy.home)) return isWithin(abs, path.join(policy.home, 'datasets')) && path.relative(path.join(policy.home, 'datasets'), abs).length > 0;
  return true;
}

/**
 * The host paths a server command needs to run, to be bound read-only at their own paths: the
 * installation of its executable (and of a script's interpreter, through `#!` and `env`), and the
 * existing absolute paths its words name (`/path`, `NAME=/path:/other`, `--option=/path`). Paths
 * inside the system directories (bound whole anyway) and those `bindable` refuses are left out.
 */
export function commandBinds(argv: readonly string[], env: Record<string, string>, policy: BindPolicy): string[] {
  const found = new Set<string>();
  const searchPath = env.PATH ?? '';
  const executable = (word: string) => resolveExecutable(word, searchPath);
  const first = executable(argv[0] ?? '');
  for (const root of first ? executableRoots(first, searchPath) : []) found.add(root);
  // `env [-u NAME] [NAME=value]… command …`: the command after the assignments is an executable too.
  if (argv[0] && path.basename(argv[0]) === 'env') {
    const next = argv.slice(1).find((w, i, rest) => !w.startsWith('-') && !/^[A-Za-z_]\w*=/.test(w) && rest[i - 1] !== '-u');
    const resolved = next ? executable(next) : null;
    for (const root of resolved ? executableRoots(resolved, searchPath) : []) found.add(root);
  }
  for (const word of argv) for (const p of pathsIn(word)) found.add(p);
  for (const name of ['PYTHONPATH', 'LD_LIBRARY_PATH']) for (const p of (env[name] ?? '').split(':')) if (p) found.add(p);
  return [...found].filter((p) => bindable(p, policy) && !SYSTEM_DIRS.some((sys) => isWithin(p, sys)));
}

/** Absolute paths a command word names: the word, or the value of `NAME=` / `--option=`, split at `:`. */
function pathsIn(word: string): string[] {
  const value = /^(?:[A-Za-z_]\w*|--?[\w-]+)=(.*)$/.exec(word)?.[1] ?? word;
  return value.split(':').filter((p) => p.startsWith('/'));
}

/** The file a command word runs: itself when it has a slash, else the first executable of that name on PATH. */
export function resolveExecutable(word: string, searchPath: string): string | null {
  if (!word) return null;
  if (word.includes('/')) return isExecutable(path.resolve(word)) ? path.resolve(word) : null;
  for (const dir of searchPath.split(':')) {
    if (!dir) continue;
    const candidate = path.join(dir, word);
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

/**
 * The installation an executable belongs to: `<prefix>` of `<prefix>/bin/x` (a venv, conda, pyenv's
 * shims), that of the file it links to, a venv's interpreter (`pyvenv.cfg` home) and, for a script,
 * its interpreter's (`#!/path` or `#!/usr/bin/env name`).
 */
function executableRoots(file: string, searchPath: string, depth = 0): string[] {
  const roots = new Set([prefixOf(file), prefixOf(realOr(file))]);
  for (const root of [...roots]) {
    const home = venvHome(root);
    if (home) roots.add(prefixOf(path.join(home, 'python')));
  }
  const interpreter = depth < 2 ? shebangInterpreter(realOr(file), searchPath) : null;
  if (interpreter) for (const root of executableRoots(interpreter, searchPath, depth + 1)) roots.add(root);
  return [...roots];
}

function prefixOf(file: string): string {
  const dir = path.dirname(file);
  return ['bin', 'sbin', 'shims'].includes(path.basename(dir)) ? path.dirname(dir) : dir;
}

function venvHome(prefix: string): string | null {
  try {
    return /^home\s*=\s*(.+)$/m.exec(readFileSync(path.join(prefix, 'pyvenv.cfg'), 'utf8'))?.[1]?.trim() ?? null;
  } catch {
    return null;
  }
}

/** The interpreter of a `#!` script, resolved (`env` followed to the named program). */
function shebangInterpreter(file: string, searchPath: string): string | null {
  let head: string;
  try {
    const fd = openSync(file, 'r');
    try {
      const buf = Buffer.alloc(256);
      head = buf.subarray(0, readSync(fd, buf, 0, buf.length, 0)).toString('latin1');
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
  if (!head.startsWith('#!')) return null;
  const [interpreter, ...rest] = head.slice(2).split('\n')[0]!.trim().split(/\s+/);
  if (!interpreter) return null;
  if (path.basename(interpreter) === 'env') {
    const program = rest.find((w) => !w.startsWith('-'));
    return program ? resolveExecutable(program, searchPath) : null;
  }
  return isExecutable(interpreter) ? interpreter : null;
}

function isExecutable(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function realOr(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

export function isWithin(p: string, dir: string): boolean {
  return p === dir || p.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}
