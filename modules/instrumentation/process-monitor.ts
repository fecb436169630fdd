import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, readSync } from 'node:fs';
import { constants } from 'node:os';
import { CGROUP_ENTER } from '../sandbox/cgroup.js';
import { SANDBOX_BRIDGE } from '../sandbox/sandbox.js';
import { basename } from 'node:path';
import type { EventData, ExecutedFile } from '../ledger/events/catalog.js';
import { ExecCapturer, type CapturedFile } from './exec-capture.js';

/**
 * Reads an agent's process tree from /proc (Linux only).
 *
 * Membership: the root pid plus every process whose parent is a member. A process once seen stays a
 * member until it disappears (identified by pid AND start time, so a recycled pid is never mistaken
 * for it) — that keeps orphans that were reparented to init or to the sandbox's pid-1 in the tree, and
 * their later children too. A process that both starts and is reparented between two polls is missed
 * (it can still be reached through its process group; see agent-process.ts).
 *
 * Exit status: /proc cannot report the status of a process that is not our child once it has been
 * reaped. It is recorded when observable: from a zombie's /proc/<pid>/stat field 52 (exit_code), or
 * from `noteExit` (the launcher knows the root's status). Otherwise ProcessExited has neither
 * exitCode nor signal. CPU time and peak RSS are the last sample taken before the process vanished,
 * so up to one poll interval of activity may be missing. A process living less than one interval may
 * go unseen entirely.
 *
 * Exec: a process seen to have exec'd since the last poll (execedSince) ends its program there,
 * without status, and starts a new one on the same pid, both at that poll's time, as the tracer ends
 * and starts programs at an exec. So a subshell first seen as its parent's copy, which execs only
 * later (a slow fork on a busy machine, a wait before `exec`), is still reported as what it runs.
 */

/**
 * A program started: facts only. What kind of program it is (training, evaluation, …) is an
 * interpretation, made by the run-analysis projection (projections/run-analysis/process-kind.ts).
 */
export interface ProcessStart {
  pid: number;
  ppid: number;
  argv: string[];
  cwd: string;
  /** The file the kernel executed: strace's execve path (absolute), or /proc/<pid>/exe for the poller. */
  executable?: string;
  /** Epoch milliseconds: strace's timestamp of the exec, or the kernel's start time (10 ms resolution), or the poll that saw the exec. */
  startedAt: number;
  /** The executable image and the script it runs (exec-capture.ts), with their bytes when kept. */
  exe?: CapturedFile;
  script?: CapturedFile & { via: 'shebang' | 'argument' };
  /** at-exec: read while the process was stopped at its exec (strace); after-start: read later (the poller, the launched root). */
  capture?: 'at-exec' | 'after-start';
}

export interface ProcessExit {
  pid: number;
  exitCode?: number;
  signal?: string;
  durationMs: number;
  cpuMs: number;
  peakRssKb: number;
  /** Epoch milliseconds: strace's timestamp of the exit (or of the next exec), or the poll that saw it gone. */
  endedAt: number;
}

/** The catalog's bounds on ProcessStarted.argv: entries, and bytes in all (events stay under 256 KiB). */
const MAX_ARGV_ENTRIES = 4096;
const MAX_ARGV_BYTES = 64 * 1024;
const MAX_PATH_CHARS = 4096;

/**
 * The ProcessStarted payload of a start. An argv over the bounds is shortened the way strace
 * shortens what it prints: the string that crosses the byte bound is cut and ends in "...", and a
 * final "..." entry stands for the entries left out.
 */
export function processStartedFact(p: ProcessStart, keyOf: (file: CapturedFile) => string | undefined = () => undefined): EventData<'ProcessStarted'> {
  const argv: string[] = [];
  let bytes = 0;
  for (const [i, arg] of p.argv.entries()) {
    const size = Buffer.byteLength(arg);
    if (i === MAX_ARGV_ENTRIES - 1 && p.argv.length > MAX_ARGV_ENTRIES) {
      argv.push('...');
      break;
    }
    if (bytes + size > MAX_ARGV_BYTES) {
      argv.push(`${cutUtf8(arg, Math.max(0, MAX_ARGV_BYTES - bytes))}...`);
      if (i < p.argv.length - 1 && argv.length < MAX_ARGV_ENTRIES) argv.push('...');
      break;
    }
    argv.push(arg);
    bytes += size;
  }
  return {
    pid: p.pid,
    ppid: p.ppid,
    argv,
    cwd: p.cwd,
    ...(p.executable && p.executable.length <= MAX_PATH_CHARS ? { executable: p.executable } : {}),
    ...(p.exe ? { exe: executedFileFact(p.exe, keyOf) } : {}),
    ...(p.script ? { script: { ...executedFileFact(p.script, keyOf), via: p.script.via } } : {}),
    ...(p.capture ? { capture: p.capture } : {}),
    observedAt: new Date(p.startedAt).toISOString(),
  };
}

/** The recorded fact of a captured file: its bytes are in the artifact store under `keyOf(file)`, when kept. */
function executedFileFact(f: CapturedFile, keyOf: (file: CapturedFile) => string | undefined): ExecutedFile {
  const kept = (f.content !== undefined || f.keptEarlier) && f.sha256 !== undefined;
  const key = kept ? keyOf(f) : undefined;
  const note = kept && !key ? 'content not stored' : f.note;
  return {
    path: f.path.length <= MAX_PATH_CHARS ? f.path : `${cutUtf8(f.path, MAX_PATH_CHARS - 3)}...`,
    ...(f.sha256 ? { sha256: f.sha256 } : {}),
    ...(f.size !== undefined ? { size: f.size } : {}),
    ...(key ? { key } : {}),
    ...(f.deleted ? { deleted: true } : {}),
    ...(note ? { note: note.slice(0, 300) } : {}),
  };
}

/** The ProcessExited payload of an exit; observed when it ended. */
export function processExitedFact(p: ProcessExit): EventData<'ProcessExited'> {
  return {
    pid: p.pid,
    ...(p.exitCode !== undefined ? { exitCode: p.exitCode } : {}),
    ...(p.signal !== undefined ? { signal: p.signal } : {}),
    durationMs: p.durationMs,
    cpuMs: p.cpuMs,
    peakRssKb: p.peakRssKb,
    observedAt: new Date(p.endedAt).toISOString(),
  };
}

/** The longest prefix of `text` of at most `maxBytes` UTF-8 bytes that does not split a character. */
function cutUtf8(text: string, maxBytes: number): string {
  let bytes = 0;
  let end = 0;
  for (const ch of text) {
    const size = Buffer.byteLength(ch);
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += ch.length;
  }
  return text.slice(0, end);
}

export interface ExitStatus {
  exitCode?: number;
  signal?: string;
}

/** One line of /proc/<pid>/stat, the fields we use. */
export interface ProcStat {
  pid: number;
  /** The command name (field 2): the executable's base name, unless the process renamed itself. */
  comm: string;
  state: string;
  ppid: number;
  pgid: number;
  /** Clock ticks since boot. */
  startTicks: number;
  /** utime + stime, clock ticks. */
  cpuTicks: number;
  /** Raw wait status (field 52); meaningful only for a zombie. */
  exitCode: number;
  /** Where the process's arguments are (field 48): new at each exec; 0 where /proc hides it (ptrace access) or once exiting. */
  argStart: number;
}

/** USER_HZ: the unit of /proc tick counts. It is 100 on every Linux architecture Node supports. */
const TICK_MS = 10;
/** Between a tick count turned into epoch ms (boot time from /proc/uptime) and a tracer's timestamp. */
const ADOPT_CLOCK_SLACK_MS = 1000;

/** Reused by readSmallProcFile: one per thread (each worker has its own module), used synchronously. */
const procBuffer = Buffer.allocUnsafe(64 * 1024);

/**
 * A small /proc file (stat, status, a task's children) as latin1, null when it cannot be read (the
 * process is gone): open, reads into a reused buffer to the end (a seq_file such as `children` may
 * stop a read short of a record), close — a third of readFileSync's CPU (no fstat, no allocation),
 * which counts where every process of the machine is read every poll.
 */
export function readSmallProcFile(path: string): string | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null;
  }
  try {
    let n = 0;
    for (let r; n < procBuffer.length && (r = readSync(fd, procBuffer, n, procBuffer.length - n, null)) > 0; ) n += r;
    return n < procBuffer.length ? procBuffer.toString('latin1', 0, n) : readFileSync(path, 'latin1');
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

export function readProcStat(pid: number): ProcStat | null {
  const text = readSmallProcFile(`/proc/${pid}/stat`);
  if (text === null) return null;
  // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
  const close = text.lastIndexOf(')');
  const f = text.slice(close + 2).split(' ');
  // f[0] is field 3 of proc(5): field N is f[N - 3].
  return {
    pid,
    comm: text.slice(text.indexOf('(') + 1, close),
    state: f[0],
    ppid: Number(f[1]),
    pgid: Number(f[2]),
    cpuTicks: Number(f[11]) + Number(f[12]),
    startTicks: Number(f[19]),
    exitCode: f.length > 49 ? Number(f[49]) : 0,
    argStart: f.length > 45 ? Number(f[45]) : 0,
  };
}

/**
 * Whether a process has exec'd between two reads of its stat: its arguments moved (each exec maps a
 * new stack, at a random place unless randomisation is off) or, where /proc hides them, its command
 * name changed (a process that renames itself then reads as an exec; one that execs a program of the
 * same name is missed).
 */
export function execedSince(before: Pick<ProcStat, 'comm' | 'argStart'>, now: Pick<ProcStat, 'comm' | 'argStart'>): boolean {
  if (before.argStart !== 0 && now.argStart !== 0) return before.argStart !== now.argStart;
  return before.comm !== now.comm;
}

export function listPids(): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (Number.isInteger(pid) && pid > 0) pids.push(pid);
  }
  return pids;
}

/** Stats of every process now visible in /proc. */
export function readAllStats(): Map<number, ProcStat> {
  const all = new Map<number, ProcStat>();
  for (const pid of listPids()) {
    const st = readProcStat(pid);
    if (st) all.set(pid, st);
  }
  return all;
}

/** Epoch milliseconds of a kernel start time (ticks since boot). */
export function ticksToEpochMs(ticks: number): number {
  return bootEpochMs() + ticks * TICK_MS;
}

let bootMs: number | undefined;
function bootEpochMs(): number {
  // /proc/uptime has centisecond resolution (btime in /proc/stat only whole seconds).
  bootMs ??= Date.now() - Number(readFileSync('/proc/uptime', 'latin1').split(' ')[0]) * 1000;
  return bootMs;
}

/** Decodes a wait(2) status word. */
export function decodeWaitStatus(status: number): ExitStatus {
  const sig = status & 0x7f;
  if (sig === 0) return { exitCode: (status >> 8) & 0xff };
  return { signal: signalName(sig) };
}

export function signalName(signo: number): string {
  const found = Object.entries(constants.signals).find(([, n]) => n === signo);
  return found ? found[0] : `SIG${signo}`;
}

export function readArgv(pid: number): string[] | null {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    const argv = raw.split('\0');
    if (argv.at(-1) === '') argv.pop();
    return argv;
  } catch {
    return null;
  }
}

export function readCwd(pid: number): string {
  try {
    return readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return '';
  }
}

export function readPeakRssKb(pid: number): number | null {
  const status = readSmallProcFile(`/proc/${pid}/status`);
  const m = status === null ? null : /^VmHWM:\s+(\d+) kB/m.exec(status);
  return m ? Number(m[1]) : null;
}

/** A process offered to a skip filter. */
export interface SkipCandidate {
  pid: number;
  ppid: number;
  argv: string[];
  /** The parent of the process's parent, where known. */
  grandparent?: number;
}

/** Processes to track (for membership and killing) but not report. */
export type SkipFilter = (p: SkipCandidate) => boolean;

const isBwrapArgv = (argv: string[]): boolean => argv.length > 0 && basename(argv[0]) === 'bwrap';
/** What the launcher may run up to bwrap, on the same pid (sandbox.ts: the kernel limits, bwrap itself). */
const PRELUDE = new Set(['prlimit', 'bwrap']);

/**
 * The default filter: only the harness's own sandbox wrapper, identified by position, never by name
 * alone (any program can be exec'd as "bwrap" with `exec -a`). `rootArgv` is the program the launcher
 * started as `rootPid`. When that is the sandbox's prelude (entering the run's cgroup, prlimit,
 * bwrap: sandbox.ts), the wrapper is every program the root runs; when bwrap keeps a namespace init
 * (it unshares the pid namespace without --as-pid-1), also the root's direct child while it runs
 * bwrap; and the first programs of the init's one child while they are the uid switch (setpriv)
 * or the network bridge (node SANDBOX_BRIDGE), which exec or fork the agent's command. Parentage is the forker's, not a
 * later reparenting, so no agent process can take one of these positions. Everything else is
 * reported, whatever its argv; the agent's command is the bridge's or the init's child.
 */
export function sandboxWrapperFilter(rootPid: number, rootArgv: string[]): SkipFilter {
  const entersCgroup = basename(rootArgv[0] ?? '') === 'sh' && rootArgv[2] === CGROUP_ENTER;
  if (rootArgv.length === 0 || !(PRELUDE.has(basename(rootArgv[0])) || entersCgroup)) return () => false;
  let launcher: number | undefined;
  let launcherDone = false;
  const isInit = (p: { ppid: number; argv: string[] }) => p.ppid === rootPid && isBwrapArgv(p.argv);
  return (p) => {
    if (p.pid === rootPid || isInit(p)) return true;
    // The init's one child: it may be seen before the init itself (a fork that never execs).
    if (!launcherDone && p.grandparent === rootPid && (launcher === undefined || launcher === p.pid)) {
      launcher = p.pid;
      if (isSandboxLauncher(p.argv)) return true;
      launcherDone = true;
    }
    return false;
  };
}

const sameArgv = (a: string[], b: string[]) => a.length === b.length && a.every((arg, i) => arg === b[i]);

function isSandboxLauncher(argv: string[]): boolean {
  return basename(argv[0] ?? '') === 'setpriv' || (basename(argv[0] ?? '') === 'node' && argv[1] === SANDBOX_BRIDGE);
}

/** The executable a process runs (not its self-chosen argv[0]); '' if unreadable. */
export function readExe(pid: number): string {
  try {
    return readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, '');
  } catch {
    return '';
  }
}

interface Tracked {
  pid: number;
  ppid: number;
  pgid: number;
  startTicks: number;
  startedAt: number;
  argv: string[];
  /** The stat fields an exec changes, as of the last poll. */
  image: Pick<ProcStat, 'comm' | 'argStart'>;
  cpuTicks: number;
  /** The process's CPU ticks when this program started (a process's count goes on across execs). */
  cpuTicksAtStart: number;
  peakRssKb: number;
  sightings: number;
  skip: boolean;
  announced: boolean;
  exited: boolean;
  zombieStatus?: ExitStatus;
}

export interface LiveProcess {
  pid: number;
  pgid: number;
  startTicks: number;
}

export interface ProcessMonitorOptions {
  rootPid: number;
  intervalMs?: number;
  onStart?: (p: ProcessStart) => void;
  onExit?: (p: ProcessExit) => void;
  /** Processes to track but not report; default: the harness's bwrap wrapper (sandboxWrapperFilter). */
  skip?: SkipFilter;
  /**
   * Reporting monitors (with `onStart`) tell here, once at start, what polling cannot guarantee
   * (POLLER_LIMITS): it is recorded as an ObservationGap so that every reader of the run sees it.
   */
  onGap?: (reason: string) => void;
}

/** What the /proc poller cannot guarantee, said loudly wherever it reports processes instead of strace. */
export const POLLER_LIMITS =
  'processes are observed by polling /proc, not traced (strace is unavailable here): a program shorter than a poll (100 ms) is not seen at all, ' +
  'an exec is dated by the poll that sees it, ' +
  'and the executable and script of the programs it does see are read when it sees them, not at their exec: a file replaced, restored or deleted ' +
  'in between is recorded as found then, or not at all (ProcessStarted.capture "after-start")';

/** The poller reads executables on the harness's main thread: smaller bounds than the tracer's worker. */
const POLLER_CAPTURE = { keepBytes: 4 * 1024 * 1024, systemKeepBytes: 64 * 1024, hashBytes: 64 * 1024 * 1024 };

/**
 * Polls /proc for the descendants of `rootPid`. `onStart` fires once per process, on its second
 * sighting (so the argv is the one after exec rather than the forked parent's) or when it exits
 * after a single sighting; `onExit` fires once when it disappears or becomes a zombie.
 */
export class ProcessMonitor {
  private readonly tracked = new Map<number, Tracked>();
  private readonly noted = new Map<number, ExitStatus>();
  private readonly rootStartTicks: number | undefined;
  private readonly intervalMs: number;
  private readonly skip: SkipFilter;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly capturer = new ExecCapturer(POLLER_CAPTURE);

  constructor(private readonly opts: ProcessMonitorOptions) {
    this.intervalMs = opts.intervalMs ?? 100;
    this.rootStartTicks = readProcStat(opts.rootPid)?.startTicks;
    this.skip = opts.skip ?? sandboxWrapperFilter(opts.rootPid, this.launchedArgv());
  }

  /**
   * The root's program as launched: spawn returns after its exec, so this is what the launcher ran
   * unless the root has exec'd again already. The executable must be bwrap too, so a root that
   * exec'd something else under the name "bwrap" is not taken for the wrapper.
   */
  private launchedArgv(): string[] {
    const argv = readArgv(this.opts.rootPid) ?? [];
    return isBwrapArgv(argv) && basename(readExe(this.opts.rootPid)) !== 'bwrap' ? [] : argv;
  }

  start(): this {
    if (this.opts.onStart) this.opts.onGap?.(POLLER_LIMITS);
    this.poll();
    this.timer = setInterval(() => this.poll(), this.intervalMs);
    this.timer.unref();
    return this;
  }

  /** A final poll, then no more callbacks. Processes still alive are left tracked but unreported. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.poll();
    this.stopped = true;
  }

  /** Exit status learnt elsewhere (the launcher's waitpid for the root); used when `pid` vanishes. */
  noteExit(pid: number, status: ExitStatus): void {
    this.noted.set(pid, status);
  }

  /**
   * A process reported elsewhere (the tracer's start of it, at `startedAt`, epoch ms): followed from
   * now on, even once it has left the root's tree, without waiting for a poll to find it. A pid that
   * is gone, or now names a process forked after that start (the pid reused), is not taken.
   */
  adopt(pid: number, startedAt: number): void {
    if (this.stopped || this.tracked.has(pid)) return;
    const st = readProcStat(pid);
    if (!st || st.state === 'Z') return;
    const forkedAt = ticksToEpochMs(st.startTicks);
    if (forkedAt <= startedAt + ADOPT_CLOCK_SLACK_MS) this.track(st, forkedAt, [], 0);
  }

  /** Tracked processes that are alive and not zombies, after a fresh poll. */
  livePids(): LiveProcess[] {
    this.poll();
    return [...this.tracked.values()]
      .filter((t) => !t.zombieStatus)
      .map(({ pid, pgid, startTicks }) => ({ pid, pgid, startTicks }));
  }

  /** One scan of /proc; synchronous so each scan is a consistent snapshot. */
  private poll(): void {
    if (this.stopped) return;
    const all = readAllStats();
    const now = Date.now();
    const members = this.members(all);

    for (const [pid, t] of this.tracked) {
      const st = all.get(pid);
      if (!st || st.startTicks !== t.startTicks) {
        this.finish(t, now);
        this.tracked.delete(pid);
      }
    }
    for (const st of members) {
      let t = this.tracked.get(st.pid);
      if (!t) t = this.track(st, ticksToEpochMs(st.startTicks), readArgv(st.pid) ?? [], 0);
      if (t.zombieStatus) continue;
      if (st.state !== 'Z' && t.announced && execedSince(t.image, st)) t = this.execed(t, st, now);
      t.image = { comm: st.comm, argStart: st.argStart };
      t.sightings++;
      t.pgid = st.pgid;
      t.cpuTicks = st.cpuTicks;
      if (st.state === 'Z') {
        t.zombieStatus = decodeWaitStatus(st.exitCode);
        this.finish(t, now);
        continue;
      }
      if (!t.announced) {
        const argv = readArgv(st.pid);
        if (argv && argv.length > 0) t.argv = argv; // a kernel thread or a zombie has none
        if (t.sightings >= 2) this.announce(t);
      }
      t.peakRssKb = readPeakRssKb(st.pid) ?? t.peakRssKb;
    }
  }

  /** A program to follow: a process first seen, or what a process exec'd. */
  private track(st: ProcStat, startedAt: number, argv: string[], cpuTicksAtStart: number): Tracked {
    const t: Tracked = {
      pid: st.pid,
      ppid: st.ppid,
      pgid: st.pgid,
      startTicks: st.startTicks,
      startedAt,
      argv,
      image: { comm: st.comm, argStart: st.argStart },
      cpuTicks: cpuTicksAtStart,
      cpuTicksAtStart,
      peakRssKb: 0,
      sightings: 0,
      skip: false,
      announced: false,
      exited: false,
    };
    this.tracked.set(st.pid, t);
    return t;
  }

  /**
   * The process exec'd since the last poll: its program ends now without a status (the exit status
   * belongs to the program running at the exit), and the new one starts now, announced like any new
   * process (at its next sighting, so an exec that follows at once is taken as the same start). A
   * process renamed without an exec (same argv) is not a new program.
   */
  private execed(t: Tracked, st: ProcStat, now: number): Tracked {
    const argv = readArgv(st.pid);
    if (!argv || argv.length === 0 || sameArgv(argv, t.argv)) return t;
    this.finish(t, now, 'exec');
    return this.track(st, now, argv, t.cpuTicks);
  }

  private members(all: Map<number, ProcStat>): ProcStat[] {
    const children = new Map<number, ProcStat[]>();
    for (const st of all.values()) {
      const list = children.get(st.ppid);
      if (list) list.push(st);
      else children.set(st.ppid, [st]);
    }
    const seeds: ProcStat[] = [];
    const root = all.get(this.opts.rootPid);
    if (root && root.startTicks === this.rootStartTicks) seeds.push(root);
    for (const t of this.tracked.values()) {
      const st = all.get(t.pid);
      if (st && st.startTicks === t.startTicks) seeds.push(st);
    }
    const seen = new Map<number, ProcStat>();
    const queue = seeds;
    while (queue.length > 0) {
      const st = queue.pop()!;
      if (seen.has(st.pid)) continue;
      seen.set(st.pid, st);
      queue.push(...(children.get(st.pid) ?? []));
    }
    return [...seen.values()];
  }

  private announce(t: Tracked): void {
    t.announced = true;
    t.skip = this.skip({ pid: t.pid, ppid: t.ppid, argv: t.argv, grandparent: this.tracked.get(t.ppid)?.ppid });
    if (t.skip) return;
    if (!this.opts.onStart) return;
    const executable = readExe(t.pid);
    // Read now, while it runs (or not at all once it is gone): no guarantee it is what it exec'd.
    const facts = t.zombieStatus || t.exited ? {} : this.capturer.capture(t.pid, undefined, t.argv);
    this.opts.onStart({
      pid: t.pid,
      ppid: t.ppid,
      argv: t.argv,
      cwd: readCwd(t.pid),
      ...(executable ? { executable } : {}),
      startedAt: t.startedAt,
      ...facts,
      capture: 'after-start',
    });
  }

  private finish(t: Tracked, now: number, cause: 'gone' | 'exec' = 'gone'): void {
    if (t.exited) return;
    t.exited = true;
    if (!t.announced) this.announce(t);
    if (t.skip) return;
    const status = cause === 'exec' ? {} : (t.zombieStatus ?? this.noted.get(t.pid) ?? {});
    if (cause === 'gone') this.noted.delete(t.pid);
    this.opts.onExit?.({
      pid: t.pid,
      ...status,
      durationMs: Math.max(0, now - t.startedAt),
      cpuMs: (t.cpuTicks - t.cpuTicksAtStart) * TICK_MS,
      peakRssKb: t.peakRssKb,
      endedAt: now,
    });
  }
}
