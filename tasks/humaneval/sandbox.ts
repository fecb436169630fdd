import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { lstat, readlink } from 'node:fs/promises';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { sandboxPlan, type SandboxPlan } from '../../modules/sandbox/capabilities.js';
import { noNewUserNamespacesFilter } from '../../modules/sandbox/seccomp.js';
import { EvaluatorError } from '../task-pack.js';

export interface SandboxLimits {
  /** Wall-clock limit of one sample (both processes, start-up included); both are killed when it passes. */
  timeMs: number;
  /** Address-space limit of each Python process (prlimit --as). */
  memoryBytes: number;
  /** The completion's stdout + stderr beyond this kills the sample (a flood of prints is a failed sample). */
  outputBytes: number;
}

export const DEFAULT_LIMITS: SandboxLimits = { timeMs: 10_000, memoryBytes: 1024 ** 3, outputBytes: 1024 * 1024 };

/**
 * Processes (threads included) per uid: room for an honest pool, not for a fork bomb. A root harness
 * gives each sandbox a uid of its own; an unprivileged one shares its uid with them, and the limit
 * counts the harness user's own processes too, hence the larger figure there.
 */
const MAX_PROCESSES = { setuid: 32, userns: 1024 } as const;
/** The private /tmp of each sandbox (tmpfs is memory: capped). */
const TMP_BYTES = 16 * 1024 ** 2;
/**
 * uids of the confined processes when the harness is root: each sample's candidate and judge get two
 * uids drawn from here, distinct from each other and from the other confined uids (agents: 64000 and
 * 100000–159999, modules/sandbox; servers: 160000–219999, modules/serving/confinement.ts), so the
 * per-uid process limit of one cannot starve another.
 */
export const SAMPLE_UIDS = { candidate: { first: 220_000, count: 20_000 }, judge: { first: 240_000, count: 20_000 } } as const;

/** The file descriptor bwrap reads the seccomp filter from (3 and 4 are the process's channels). */
const SECCOMP_FD = 5;

export type Role = 'judge' | 'candidate';

const exec = promisify(execFile);

interface PythonInstall {
  executable: string;
  /** Install prefixes outside /usr to bind read-only (pyenv, conda…). */
  prefixes: string[];
}

let python: Promise<PythonInstall> | undefined;

/** The host's `python3` (real path and prefixes), resolved once; the sandboxes run exactly it. */
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
export async function systemBinds(): Promise<string[]> {
  const args = ['--ro-bind', '/usr', '/usr', '--ro-bind', '/etc', '/etc'];
  for (const dir of ['/bin', '/sbin', '/lib', '/lib32', '/lib64']) {
    const info = await lstat(dir).catch(() => null);
    if (info?.isSymbolicLink()) args.push('--symlink', await readlink(dir), dir);
    else if (info?.isDirectory()) args.push('--ro-bind', dir, dir);
  }
  return args;
}

/**
 * A Python install outside /usr (pyenv under /root…) bound at its own path: bwrap would create its
 * missing parents with mode 0700, which the confined uid could not cross, so they are made first.
 */
export function prefixBinds(prefixes: readonly string[]): string[] {
  const parents = new Set<string>();
  for (const prefix of prefixes) {
    for (let dir = path.posix.dirname(prefix); dir !== '/'; dir = path.posix.dirname(dir)) parents.add(dir);
  }
  const dirs = [...parents].sort((a, b) => a.split('/').length - b.split('/').length);
  return [...dirs.flatMap((dir) => ['--perms', '0755', '--dir', dir]), ...prefixes.flatMap((p) => ['--ro-bind', p, p])];
}

/** Two distinct unprivileged uids for one sample's candidate and judge (used when the harness is root). */
export function sampleUids(): Record<Role, number> {
  const { candidate, judge } = SAMPLE_UIDS;
  return { candidate: candidate.first + randomInt(candidate.count), judge: judge.first + randomInt(judge.count) };
}

/**
 * How a sample's processes are kept apart from the harness and from each other: the machine's
 * sandbox plan (modules/sandbox/capabilities.ts), which must be one that confines. A grader
 * that ran completions unconfined would hand the model the harness, so there is no fallback.
 */
function confiningPlan(): SandboxPlan {
  const plan = sandboxPlan();
  if (plan.mode === 'none') {
    throw new EvaluatorError(`humaneval runs completions only in a sandbox, and none is available here: ${plan.capabilities.notes.join('; ') || 'bubblewrap cannot create namespaces'}`);
  }
  return plan;
}

export interface ConfinedProcess {
  child: ChildProcess;
  /** Settles when the process and its stdio are closed; rejects when bwrap cannot be started. */
  closed: Promise<void>;
}

/**
 * Starts `python3 -I -B -c <script>` confined: a bubblewrap sandbox of its own (pid, IPC, UTS,
 * cgroup and network namespaces: no network, no other process visible), a read-only system and
 * Python install, a private size-capped /tmp, an empty environment; as an unprivileged uid with no
 * capabilities and no_new_privs (root harness: `uid`, via setpriv, with a seccomp filter refusing new
 * user namespaces; unprivileged harness: a user namespace with user namespaces disabled); per-process
 * limits on address space, file size, open files and processes of its uid. Its own process group, so
 * killing the group ends the sandbox (--die-with-parent takes the namespace down with bwrap).
 *
 * The process's fds 3 (in) and 4 (out) are its channels to the harness; stdout and stderr are pipes.
 */
export async function spawnConfinedPython(script: string, role: Role, uid: number, limits: SandboxLimits): Promise<ConfinedProcess> {
  const plan = confiningPlan();
  const { executable, prefixes } = await findPython();
  const filter = plan.mode === 'setuid' ? noNewUserNamespacesFilter() : null;
  const identity =
    plan.mode === 'setuid'
      ? ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--inh-caps=-all', '--ambient-caps=-all', '--bounding-set=-all', '--no-new-privs', '--']
      : [];
  const namespaces = ['--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--unshare-net'];
  if (plan.mode === 'userns') namespaces.push('--unshare-user', '--disable-userns', '--uid', '1000', '--gid', '1000', '--cap-drop', 'ALL');
  const args = [
    ...(await systemBinds()),
    ...prefixBinds(prefixes),
    '--proc', '/proc', '--dev', '/dev', '--perms', '1777', '--size', String(TMP_BYTES), '--tmpfs', '/tmp', '--chdir', '/tmp',
    '--clearenv', '--setenv', 'HOME', '/tmp', '--setenv', 'PATH', '/usr/local/bin:/usr/bin:/bin', '--setenv', 'LANG', 'C.UTF-8',
    ...namespaces, '--die-with-parent', '--new-session',
    ...(filter ? ['--seccomp', String(SECCOMP_FD)] : []),
    '--',
    // prlimit as root before the uid is dropped: the limits are then inherited and cannot be raised.
    'prlimit', `--as=${limits.memoryBytes}`, `--fsize=${limits.outputBytes}`, `--nproc=${plan.mode === 'setuid' ? MAX_PROCESSES.setuid : MAX_PROCESSES.userns}`, '--nofile=64', '--core=0', '--',
    ...identity,
    executable, '-I', '-B', '-u', '-c', script, role,
  ];
  const child = spawn('bwrap', args, {
    stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe', filter ? 'pipe' : 'ignore'],
    detached: true,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8' },
  });
  if (filter) (child.stdio as unknown as Writable[])[SECCOMP_FD]!.end(filter);
  const closed = new Promise<void>((resolve, reject) => {
    child.once('error', (error) => reject(new EvaluatorError(`cannot start bwrap (install bubblewrap): ${error.message}`, { cause: error })));
    child.once('close', () => resolve());
  });
  closed.catch(() => {}); // the caller awaits it; a failed start must not be an unhandled rejection meanwhile
  return { child, closed };
}

/** Ends a confined process and everything in its sandbox. */
export function killConfined({ child }: ConfinedProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
