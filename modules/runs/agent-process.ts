import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';
import {
  ProcessMonitor,
  readAllStats,
  readProcStat,
  type LiveProcess,
  type ProcessMonitorOptions,
} from './process-monitor.js';

export type ExitReason = 'completed' | 'timeout' | 'killed' | 'crashed';

export interface AgentExit {
  exitCode?: number;
  signal?: string;
  reason: ExitReason;
}

export interface LaunchOptions {
  file: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Wall-clock budget from spawn. */
  budgetMs: number;
  /** Time between SIGTERM and SIGKILL. */
  graceMs?: number;
  onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  /**
   * Unsandboxed runs: where to record the agent's process group so that the next harness start can
   * kill leftovers after a harness crash (`killLeftoverProcessGroup`). Removed on a clean exit.
   */
  pidFile?: string;
  /** Callbacks of the process monitor the launcher runs anyway to know the whole tree. */
  monitor?: Omit<ProcessMonitorOptions, 'rootPid'>;
}

export interface AgentHandle {
  pid: number;
  startedAt: Date;
  /** Resolves once the agent and every descendant are dead and stdout/stderr are drained. */
  exited: Promise<AgentExit>;
  /** Terminates the tree (SIGTERM, grace, SIGKILL); `exited` then reports this reason. */
  kill(reason?: 'killed' | 'timeout'): Promise<AgentExit>;
  monitor: ProcessMonitor;
}

export class AgentLaunchError extends Error {
  override readonly name = 'AgentLaunchError';
}

const SWEEP_POLL_MS = 50;
const OUTPUT_DRAIN_MS = 2000;

/**
 * Starts an agent in its own process group (detached) and enforces its budget on the whole tree:
 * the process group plus every descendant the monitor has seen, including ones that called setsid
 * or were reparented. After the agent exits by itself, leftover descendants are swept the same way,
 * so no process of the run outlives it.
 */
export async function launchAgent(opts: LaunchOptions): Promise<AgentHandle> {
  const graceMs = opts.graceMs ?? 5000;
  const child = spawn(opts.file, opts.args, {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    await Promise.race([once(child, 'spawn'), once(child, 'error').then(([err]) => Promise.reject(err))]);
  } catch (err) {
    throw new AgentLaunchError(`cannot start agent "${opts.file}": ${(err as Error).message}`, { cause: err });
  }
  const pid = child.pid!;
  const startedAt = new Date();
  const pgid = pid; // detached: the child is a session and group leader
  const monitor = new ProcessMonitor({ ...opts.monitor, rootPid: pid }).start();
  if (opts.pidFile) {
    try {
      await writePidFile(opts.pidFile, pgid, pid);
    } catch (err) {
      // Without the pid file a harness crash could leave this tree behind: do not run it.
      tryKill(-pgid, 'SIGKILL');
      monitor.stop();
      throw new AgentLaunchError(`cannot write pid file ${opts.pidFile}: ${(err as Error).message}`, { cause: err });
    }
  }

  child.stdout!.on('data', (c: Buffer) => opts.onOutput('stdout', c));
  child.stderr!.on('data', (c: Buffer) => opts.onOutput('stderr', c));
  const outputClosed = once(child, 'close');

  let stopReason: 'killed' | 'timeout' | undefined;
  let termination: Promise<void> | undefined;
  const rootExit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      // Synchronously, before the monitor's next poll can see the root gone.
      monitor.noteExit(pid, code !== null ? { exitCode: code } : { signal: signal ?? undefined });
      resolve({ code, signal });
    }),
  );

  const terminate = (reason: 'killed' | 'timeout'): Promise<void> => {
    stopReason ??= reason;
    termination ??= killTree(monitor, pgid, graceMs);
    return termination;
  };
  const budget = setTimeout(() => void terminate('timeout'), opts.budgetMs);

  const exited = (async (): Promise<AgentExit> => {
    const { code, signal } = await rootExit;
    clearTimeout(budget);
    // Leftovers of an agent that exited by itself are swept too; after a kill this waits for it.
    await (termination ?? killTree(monitor, pgid, graceMs));
    await withTimeout(outputClosed, OUTPUT_DRAIN_MS);
    monitor.stop();
    if (opts.pidFile) await rm(opts.pidFile, { force: true });
    const status = code !== null ? { exitCode: code } : { signal: signal ?? undefined };
    const reason: ExitReason = stopReason ?? (code === 0 ? 'completed' : 'crashed');
    return { ...status, reason };
  })();

  return {
    pid,
    startedAt,
    exited,
    monitor,
    kill: async (reason = 'killed') => {
      await terminate(reason);
      return exited;
    },
  };
}

/** SIGTERM to the group and every tracked descendant, wait up to `graceMs`, then SIGKILL until none is left. */
async function killTree(monitor: ProcessMonitor, pgid: number, graceMs: number): Promise<void> {
  const victims = () => liveMembers(monitor, pgid);
  let alive = victims();
  if (alive.length === 0) return;
  signalAll(alive, pgid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (alive.length > 0 && Date.now() < deadline) {
    await sleep(SWEEP_POLL_MS);
    alive = victims();
  }
  // New processes may be forked while we kill: repeat until a scan finds nothing.
  for (let round = 0; alive.length > 0 && round < 100; round++) {
    signalAll(alive, pgid, 'SIGKILL');
    await sleep(SWEEP_POLL_MS / 5);
    alive = victims();
  }
}

/** Tracked descendants plus anything still in the agent's process group (zombies excluded). */
function liveMembers(monitor: ProcessMonitor, pgid: number): LiveProcess[] {
  const members = new Map(monitor.livePids().map((p) => [p.pid, p]));
  for (const st of readAllStats().values()) {
    if (st.pgid === pgid && st.state !== 'Z' && !members.has(st.pid)) members.set(st.pid, st);
  }
  return [...members.values()];
}

function signalAll(victims: LiveProcess[], pgid: number, signal: NodeJS.Signals): void {
  tryKill(-pgid, signal);
  for (const v of victims) {
    // Guard against pid reuse between the scan and the kill.
    if (readProcStat(v.pid)?.startTicks === v.startTicks) tryKill(v.pid, signal);
  }
}

function tryKill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone (ESRCH).
  }
}

interface PidFileContent {
  bootId: string;
  pgid: number;
  /** Start time (ticks since boot) of the group leader; every member started at or after it. */
  startTicks: number;
}

async function writePidFile(path: string, pgid: number, pid: number): Promise<void> {
  const content: PidFileContent = { bootId: bootId(), pgid, startTicks: readProcStat(pid)?.startTicks ?? 0 };
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, JSON.stringify(content));
  await rename(temp, path);
}

/**
 * After a harness crash: SIGKILLs what is left of the agent process group recorded in `pidFile`
 * (members of the group and their descendants, started no earlier than the recorded leader, on the
 * same boot), then removes the file. Returns how many processes were signalled. A descendant that
 * left the group with setsid AND lost its parent cannot be attributed anymore and is not found.
 */
export async function killLeftoverProcessGroup(pidFile: string): Promise<number> {
  let content: PidFileContent;
  try {
    content = JSON.parse(readFileSync(pidFile, 'utf8')) as PidFileContent;
  } catch {
    return 0; // no file (clean previous exit) or a torn write: nothing we can attribute
  }
  let killed = 0;
  if (content.bootId === bootId()) {
    const all = readAllStats();
    const doomed = new Set<number>();
    for (const st of all.values()) {
      if (st.pgid === content.pgid && st.startTicks >= content.startTicks) doomed.add(st.pid);
    }
    for (let grew = true; grew; ) {
      grew = false;
      for (const st of all.values()) {
        if (!doomed.has(st.pid) && doomed.has(st.ppid)) {
          doomed.add(st.pid);
          grew = true;
        }
      }
    }
    for (const pid of doomed) {
      if (all.get(pid)?.state === 'Z') continue;
      tryKill(pid, 'SIGKILL');
      killed++;
    }
  }
  await rm(pidFile, { force: true });
  return killed;
}

function bootId(): string {
  return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
}

/** Waits for `p` but no longer than `ms` (a descendant we could not kill may hold the pipes open). */
async function withTimeout(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
