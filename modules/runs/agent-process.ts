import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import pTimeout from 'p-timeout';
import { ProcessMonitor, readAllStats, readProcStat, type LiveProcess } from '../instrumentation/process-monitor.js';
import { StraceTracer, straceWorks, TracerUnavailableError, type TraceCallbacks, type TracerKind } from '../instrumentation/process-tracer.js';
import { ptraceTracerBinary, ptraceTracerProblem } from '../instrumentation/ptrace-tracer.js';
import { tryKill, writePidFile } from './agent-pid-file.js';
import { disarmReaper, startReaper } from '../serving/server-process.js';
import { writeExtraFds } from '../sandbox/extra-fds.js';

export { killLeftoverProcessGroup } from './agent-pid-file.js';

export type ExitReason = 'completed' | 'timeout' | 'killed' | 'crashed';

export interface AgentExit {
  exitCode?: number;
  signal?: string;
  reason: ExitReason;
  /** Epoch ms when the whole tree was seen gone (before output and trace draining). */
  endedAt?: number;
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
  /**
   * Process facts (ProcessStarted/ProcessExited), reported by whichever tracer is used, and the gaps
   * in them (strace only: the poller cannot know what it missed).
   */
  monitor?: TraceCallbacks;
  /**
   * Who reports process events: 'ptrace' (a2rl's own tracer, native/a2rl-trace.c: exact, and every
   * exec held until it is read), 'strace' (exact: every exec, exact exit statuses; see
   * process-tracer.ts), 'proc' (the /proc poller, which misses processes shorter than a poll) or
   * 'auto' (default: ptrace where it builds and works, else strace where it works, else proc). The
   * /proc poller always runs to know the tree for killing; with a tracer it reports nothing.
   */
  tracer?: TracerKind | 'auto';
  /** The strace executable (default `strace` on the harness's PATH). */
  straceBinary?: string;
  /** The a2rl-trace executable (default: built from modules/instrumentation/native/a2rl-trace.c). */
  ptraceBinary?: string;
  /** Hold each exec this long instead of stopping it with SIGSTOP (process-tracer.ts straceFlags); from the agent's declaration. */
  execHoldMs?: number;
  /** What the command reads from file descriptors 3, 4… (the sandbox's options and filter: see sandbox.ts). */
  fds?: Buffer[];
}

export interface AgentHandle {
  pid: number;
  startedAt: Date;
  /** Resolves once the agent and every descendant are dead and stdout/stderr are drained. */
  exited: Promise<AgentExit>;
  /** Terminates the tree (SIGTERM, grace, SIGKILL); `exited` then reports this reason. */
  kill(reason?: 'killed' | 'timeout'): Promise<AgentExit>;
  monitor: ProcessMonitor;
  /** Which tracer reports the process events. */
  tracer: TracerKind;
}

export class AgentLaunchError extends Error {
  override readonly name = 'AgentLaunchError';
}

const SWEEP_POLL_MS = 50;
/** How often a traced run's membership poll reads /proc (a kill polls afresh, and the tracer adopts each process it sees). */
const TRACED_MEMBERSHIP_POLL_MS = 1000;
const OUTPUT_DRAIN_MS = 2000;
/** The tracer exits as soon as its last tracee is gone; this only bounds a stuck one. */
const TRACER_DRAIN_MS = 3000;

/**
 * Starts an agent in its own process group (detached) and enforces its budget on the whole tree:
 * the process group plus every descendant the monitor has seen, including ones that called setsid
 * or were reparented. After the agent exits by itself, leftover descendants are swept the same way,
 * so no process of the run outlives it.
 */
export async function launchAgent(opts: LaunchOptions): Promise<AgentHandle> {
  let monitor: ProcessMonitor | undefined;
  // Each process the tracer reports joins the membership used for killing at once.
  const adopting: TraceCallbacks = { ...opts.monitor, onStart: (p) => (monitor?.adopt(p.pid, p.startedAt), opts.monitor?.onStart?.(p)) };
  const traced = await traceCommand({ ...opts, monitor: adopting });
  const { child, pid, startedAt } = await spawnAgent(opts, traced);
  const pgid = pid; // detached: the child is a session and group leader
  // A harness killed outright (SIGKILL, OOM) runs no exit hook: the watchdog kills the group then.
  // The sandbox's own lifeline cannot, when its first process is still held for exec-time capture.
  const reaper = startReaper(pgid, []);
  // With a tracer, the poller only keeps the membership used for killing (the tracer reports, and
  // hands it every process it sees): it polls seldom, since a poll reads every process of the machine.
  const { intervalMs, onStart, onExit, onGap } = opts.monitor ?? {};
  monitor = new ProcessMonitor(
    traced.tracer ? { intervalMs: Math.max(intervalMs ?? 0, TRACED_MEMBERSHIP_POLL_MS), rootPid: pid } : { intervalMs, onStart, onExit, onGap, rootPid: pid },
  ).start();
  const tree: AgentTree = { child, pid, startedAt, pgid, monitor, tracer: traced.tracer, reaper };
  if (opts.pidFile) await guardWithPidFile(opts.pidFile, tree);
  return supervise(opts, tree, traced.kind);
}

/** The agent's process tree as launched: what supervising it needs. */
interface AgentTree {
  child: ChildProcess;
  pid: number;
  startedAt: Date;
  pgid: number;
  monitor: ProcessMonitor;
  tracer: StraceTracer | undefined;
  reaper: ReturnType<typeof startReaper>;
}

/** The command to spawn: wrapped by the tracer chosen (a2rl-trace or strace), else as given with the /proc poller. */
async function traceCommand(opts: LaunchOptions): Promise<{ kind: TracerKind; command: { file: string; args: string[] }; tracer?: StraceTracer }> {
  const wanted = opts.tracer ?? 'auto';
  const kind = chooseTracer(wanted, opts.straceBinary ?? 'strace', opts.ptraceBinary);
  const command = { file: opts.file, args: opts.args };
  if (kind === 'proc') return { kind, command };
  // A tracer would only report a missing command as its own exit status: check it here.
  const file = resolveExecutable(opts.file, opts.cwd, opts.env.PATH ?? '/usr/bin:/bin');
  if (!file) throw new AgentLaunchError(`cannot start agent "${opts.file}": not found or not executable`);
  const tracer =
    kind === 'ptrace'
      ? new StraceTracer(ptraceTracerBinary(opts.ptraceBinary)!, opts.monitor, 'ptrace')
      : new StraceTracer(opts.straceBinary ?? 'strace', { ...opts.monitor, execHoldMs: opts.execHoldMs });
  try {
    await tracer.ready;
    return { kind, command: tracer.wrap(file, opts.args), tracer };
  } catch (err) {
    await tracer.finish(0);
    if (wanted !== 'auto') throw err;
    return { kind: 'proc', command };
  }
}

/** Spawns the (traced) command in its own process group; resolves once it is running. */
async function spawnAgent(opts: LaunchOptions, traced: { command: { file: string; args: string[] }; tracer?: StraceTracer }): Promise<{ child: ChildProcess; pid: number; startedAt: Date }> {
  const { command, tracer } = traced;
  const child = spawn(command.file, command.args, {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', ...(opts.fds ?? []).map(() => 'pipe' as const)],
  });
  writeExtraFds(child.stdio, opts.fds);
  if (child.pid !== undefined) tracer?.start(child.pid, opts.cwd);
  try {
    await Promise.race([once(child, 'spawn'), once(child, 'error').then(([err]) => Promise.reject(err))]);
  } catch (err) {
    await tracer?.finish(0);
    throw new AgentLaunchError(`cannot start agent "${opts.file}": ${(err as Error).message}`, { cause: err });
  }
  // Spawned: the pid is known.
  return { child, pid: child.pid as number, startedAt: new Date() };
}

/** Writes the pid file; without it a harness crash could leave this tree behind, so the tree is killed and not run. */
async function guardWithPidFile(pidFile: string, tree: AgentTree): Promise<void> {
  try {
    await writePidFile(pidFile, tree.pgid, tree.pid);
  } catch (err) {
    tryKill(-tree.pgid, 'SIGKILL');
    disarmReaper(tree.reaper);
    tree.monitor.stop();
    await tree.tracer?.finish(TRACER_DRAIN_MS);
    throw new AgentLaunchError(`cannot write pid file ${pidFile}: ${(err as Error).message}`, { cause: err });
  }
}

/** Forwards the output, enforces the budget on the whole tree, and says how it ended once every member is gone. */
function supervise(opts: LaunchOptions, tree: AgentTree, kind: TracerKind): AgentHandle {
  const { child, pid, startedAt, pgid, monitor, tracer, reaper } = tree;
  const graceMs = opts.graceMs ?? 5000;
  const spare = (p: number) => tracer?.isTracer(p) ?? false;
  child.stdout?.on('data', (c: Buffer) => opts.onOutput('stdout', c));
  child.stderr?.on('data', (c: Buffer) => opts.onOutput('stderr', c));
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
    termination ??= killTree(monitor, pgid, graceMs, spare);
    return termination;
  };
  const budget = setTimeout(() => void terminate('timeout'), opts.budgetMs);

  const exited = (async (): Promise<AgentExit> => {
    const { code, signal } = await rootExit;
    clearTimeout(budget);
    // Leftovers of an agent that exited by itself are swept too; after a kill this waits for it.
    await (termination ?? killTree(monitor, pgid, graceMs, spare));
    disarmReaper(reaper);
    const endedAt = Date.now();
    await withTimeout(outputClosed, OUTPUT_DRAIN_MS);
    await tracer?.finish(TRACER_DRAIN_MS);
    monitor.stop();
    if (opts.pidFile) await rm(opts.pidFile, { force: true });
    const status = code !== null ? { exitCode: code } : { signal: signal ?? undefined };
    const reason: ExitReason = stopReason ?? (code === 0 ? 'completed' : 'crashed');
    return { ...status, reason, endedAt };
  })();

  const kill = async (reason: 'killed' | 'timeout' = 'killed'): Promise<AgentExit> => {
    await terminate(reason);
    return exited;
  };
  return { pid, startedAt, exited, monitor, tracer: kind, kill };
}

/** SIGTERM to the group and every tracked descendant, wait up to `graceMs`, then SIGKILL until none is left. */
async function killTree(monitor: ProcessMonitor, pgid: number, graceMs: number, spare: (pid: number) => boolean): Promise<void> {
  // The tracer may have been seen in the tree before it detached; it exits by itself with its
  // tracees, and killing it first would lose their exit statuses.
  const victims = () => liveMembers(monitor, pgid).filter((p) => !spare(p.pid));
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

function chooseTracer(wanted: TracerKind | 'auto', binary: string, ptraceBinary: string | undefined): TracerKind {
  if (wanted === 'proc') return 'proc';
  if (wanted !== 'strace' && ptraceTracerBinary(ptraceBinary)) return 'ptrace';
  if (wanted === 'ptrace') throw new TracerUnavailableError(ptraceTracerProblem(ptraceBinary) ?? 'the ptrace tracer is not available');
  if (straceWorks(binary)) return 'strace';
  if (wanted === 'strace') throw new TracerUnavailableError(`strace ("${binary}") is not installed or cannot trace here`);
  return 'proc';
}

/** What exec in `cwd` would run for `file`: itself if it has a slash, else the first match on `searchPath`. */
function resolveExecutable(file: string, cwd: string, searchPath: string): string | undefined {
  const candidates = (file.includes('/') ? [file] : searchPath.split(':').map((dir) => join(dir || '.', file))).map((c) => resolve(cwd, c));
  return candidates.find((c) => {
    try {
      accessSync(c, fsConstants.X_OK);
      return statSync(c).isFile();
    } catch {
      return false;
    }
  });
}

function signalAll(victims: LiveProcess[], pgid: number, signal: NodeJS.Signals): void {
  tryKill(-pgid, signal);
  for (const v of victims) {
    // Guard against pid reuse between the scan and the kill.
    if (readProcStat(v.pid)?.startTicks === v.startTicks) tryKill(v.pid, signal);
  }
}

/** Waits for `p` but no longer than `ms` (a descendant we could not kill may hold the pipes open). */
async function withTimeout(p: Promise<unknown>, ms: number): Promise<void> {
  await pTimeout(p, { milliseconds: ms, message: false });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
