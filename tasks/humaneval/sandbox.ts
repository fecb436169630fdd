import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { lstat, readlink } from 'node:fs/promises';
import { promisify } from 'node:util';
import { EvaluatorError } from '../task-pack.js';

export interface SandboxLimits {
  /** Wall-clock limit; the whole sandbox is killed when it passes. */
  timeMs: number;
  /** Address-space limit of the Python process (prlimit --as). */
  memoryBytes: number;
  /** stdout + stderr beyond this kills the program (a flood of prints is a failed sample). */
  outputBytes: number;
}

export const DEFAULT_LIMITS: SandboxLimits = { timeMs: 10_000, memoryBytes: 1024 ** 3, outputBytes: 1024 * 1024 };

export type RunOutcome = 'passed' | 'failed' | 'timeout' | 'output_limit';

export interface RunResult {
  outcome: RunOutcome;
  exitCode: number | null;
  /** The first bytes of stdout + stderr, for details. */
  output: string;
}

const exec = promisify(execFile);

interface PythonInstall {
  executable: string;
  /** Install prefixes outside /usr to bind read-only (pyenv, conda…). */
  prefixes: string[];
}

let python: Promise<PythonInstall> | undefined;

/** The host's `python3` (real path and prefixes), resolved once; the sandbox runs exactly it. */
function findPython(): Promise<PythonInstall> {
  python ??= exec('python3', ['-c', 'import os,sys; print(os.path.realpath(sys.executable)); print(sys.prefix); print(sys.base_prefix)'])
    .then(({ stdout }) => {
      const [executable, ...prefixes] = stdout.trim().split('\n');
      return { executable: executable!, prefixes: [...new Set(prefixes)].filter((p) => p !== '/usr' && !p.startsWith('/usr/')) };
    })
    .catch((error: Error) => {
      python = undefined;
      throw new EvaluatorError(`humaneval needs python3 on PATH to run completions: ${error.message}`);
    });
  return python;
}

/** Read-only system dirs; merged-/usr hosts have /bin, /lib… as symlinks, recreated as such. */
async function systemBinds(): Promise<string[]> {
  const args = ['--ro-bind', '/usr', '/usr', '--ro-bind', '/etc', '/etc'];
  for (const dir of ['/bin', '/sbin', '/lib', '/lib32', '/lib64']) {
    const info = await lstat(dir).catch(() => null);
    if (info?.isSymbolicLink()) args.push('--symlink', await readlink(dir), dir);
    else if (info?.isDirectory()) args.push('--ro-bind', dir, dir);
  }
  return args;
}

/**
 * Runs a Python program (fed on stdin, so no host file is involved) in a bubblewrap sandbox: every
 * namespace unshared (no network), a read-only system and Python install, a fresh tmpfs as the work
 * dir, address-space and file limits, a wall-clock limit and an output cap. The program passes only
 * if it exits 0 having printed a per-run random token at its very end, so a solution that exits
 * early (`sys.exit(0)` before the tests) fails.
 */
export async function runPythonSandboxed(program: string, limits: SandboxLimits = DEFAULT_LIMITS, signal?: AbortSignal): Promise<RunResult> {
  const { executable, prefixes } = await findPython();
  const token = `A2RL-DONE-${randomBytes(12).toString('hex')}`;
  const args = [
    ...(await systemBinds()),
    ...prefixes.flatMap((p) => ['--ro-bind', p, p]),
    '--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--chdir', '/tmp', '--setenv', 'HOME', '/tmp',
    '--unshare-all', '--die-with-parent', '--new-session',
    '/usr/bin/prlimit', `--as=${limits.memoryBytes}`, `--fsize=${limits.outputBytes}`, '--nofile=64', '--core=0', '--',
    executable, '-I', '-B', '-',
  ];
  const child = spawn('bwrap', args, { stdio: ['pipe', 'pipe', 'pipe'], detached: true, env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' } });
  const chunks: Buffer[] = [];
  let size = 0;
  let outcome: RunOutcome | null = null;
  const kill = (why: RunOutcome) => {
    outcome ??= why;
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  const collect = (chunk: Buffer) => {
    size += chunk.length;
    if (size > limits.outputBytes) return kill('output_limit');
    chunks.push(chunk);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  child.stdin.on('error', () => {}); // the program may exit before reading all of stdin
  child.stdin.end(`${program}\n\nprint(${JSON.stringify(token)}, flush=True)\n`);
  const timer = setTimeout(() => kill('timeout'), limits.timeMs);
  const onAbort = () => kill('failed');
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const exitCode = await new Promise<number | null>((resolve, reject) => {
      child.once('error', (error) => reject(new EvaluatorError(`cannot start bwrap (install bubblewrap): ${error.message}`, { cause: error })));
      child.once('close', (code) => resolve(code));
    });
    signal?.throwIfAborted();
    const output = Buffer.concat(chunks).toString('utf8');
    if (outcome === null && exitCode === 0 && output.trimEnd().endsWith(token)) outcome = 'passed';
    return { outcome: outcome ?? 'failed', exitCode, output: output.replace(token, '').slice(0, 2000) };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}
