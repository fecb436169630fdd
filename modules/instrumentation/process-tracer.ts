import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, constants as fsConstants, mkdtempSync, open, openSync, readFileSync, rmSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import {
  classifyArgv,
  readAllStats,
  readArgv,
  readCwd,
  readPeakRssKb,
  readProcStat,
  sandboxWrapperFilter,
  type ExitStatus,
  type ProcessExit,
  type ProcessStart,
  type SkipFilter,
} from './process-monitor.js';

/**
 * Exact process events from `strace -f`, the alternative to ProcessMonitor's /proc polling.
 *
 * strace reports every successful exec, every fork/clone (with host pids, even inside bwrap's pid
 * namespace, thanks to --pidns-translation) and every exit with its real status, however short the
 * process lived. Rules:
 * - A "program" is what a process runs between two execs. Each successful exec starts one
 *   (ProcessStarted); a failed exec (e.g. the ENOENT attempts of a PATH lookup) starts nothing. If a
 *   process execs again, its previous program ends with a ProcessExited WITHOUT exit code or
 *   signal; the exit status belongs to the program running when the process exits.
 * - A process that forks without exec'ing (a subshell, a multiprocessing worker) is a program
 *   running its parent's argv. Because fork is almost always followed by exec, it is announced only
 *   if it exits, or is still running FORK_ANNOUNCE_MS after the fork, without having exec'd.
 * - ppid comes from the parent's clone/fork line (exact). strace may print a child's exec before
 *   its parent's clone result; the start is then held until that line arrives, or for at most
 *   PARENT_WAIT_MS, after which /proc's ppid (or 0 when the process is gone) is used.
 * - Threads (CLONE_THREAD) are not processes and are not reported.
 * - cwd is read from /proc when the exec line arrives (empty if the process is already gone); CPU
 *   time and peak RSS are sampled from /proc every interval while the program runs, so a program
 *   shorter than one interval may report 0.
 * - Times (startedAt, durationMs) are strace's microsecond timestamps.
 *
 * strace runs with -DD: the launched process IS the traced command (so its exit status is the
 * agent's) and strace is a detached grandchild in its own process group, so killing the agent's
 * group never kills the tracer. strace exits by itself once every tracee is gone. Its output goes
 * through a FIFO that is read continuously, so nothing grows on disk and strace never waits long;
 * the FIFO is unlinked as soon as both ends are open.
 */

export type TracerKind = 'strace' | 'proc';

export interface TraceCallbacks {
  onStart?: (p: ProcessStart) => void;
  onExit?: (p: ProcessExit) => void;
  /** Sampling interval for CPU/RSS; default 100 ms. */
  intervalMs?: number;
  /**
   * Programs not to report; default: the harness's bwrap wrapper (sandboxWrapperFilter), judged on
   * the root's first exec — the program the launcher ran — and its namespace init, a fork of it.
   */
  skip?: SkipFilter;
}

export class TracerUnavailableError extends Error {
  override readonly name = 'TracerUnavailableError';
}

const FORK_ANNOUNCE_MS = 500;
const PARENT_WAIT_MS = 250;
const TICK_MS = 10;

/**
 * Default-ignored signals cannot kill, so their delivery lines are noise. (`signal=none` would also
 * hide the "+++ killed by SIG… +++" lines we need.)
 */
const STRACE_FLAGS = [
  '-f',
  '-q',
  '-ttt',
  '--seccomp-bpf', // only the traced syscalls stop the tracee: near-zero overhead for everything else
  '--pidns-translation',
  '-s',
  '4096',
  '-e',
  'trace=execve,execveat,clone,clone3,fork,vfork',
  '-e',
  'signal=!SIGCHLD,SIGURG,SIGWINCH,SIGCONT',
];

const probes = new Map<string, boolean>();

/** Whether `binary` can trace here with our flags (probed once per binary, synchronously). */
export function straceWorks(binary = 'strace'): boolean {
  let ok = probes.get(binary);
  if (ok === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'a2rl-strace-probe-'));
    try {
      const out = join(dir, 'trace');
      const r = spawnSync(binary, [...STRACE_FLAGS, '-o', out, '--', 'true'], { stdio: 'ignore', timeout: 10_000 });
      ok = r.error === undefined && r.status === 0 && /execve\("[^"]*true".* = 0\n.*\+\+\+ exited with 0 \+\+\+/s.test(readFileSync(out, 'utf8'));
    } catch {
      ok = false;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    probes.set(binary, ok);
  }
  return ok;
}

interface Program {
  pid: number;
  ppid?: number;
  argv: string[];
  cwd: string;
  /** Epoch ms (fractional). */
  startedAt: number;
  startTicks?: number;
  cpuTicks: number;
  peakRssKb: number;
  forkOnly: boolean;
  announced: boolean;
  skip: boolean;
  /** Set when it ended before it could be announced. */
  ended?: { at: number; status: ExitStatus };
}

/** Traces one agent launch with strace. */
export class StraceTracer {
  private readonly dir: string;
  private readonly fifo: string;
  private readonly reader: Promise<void>;
  private readerOpened = false;
  private readonly programs = new Map<number, Program>();
  /** Exec'd programs whose parent is not known yet (live or already ended). */
  private readonly awaitingParent = new Map<number, Program>();
  private readonly parentOf = new Map<number, number>();
  /** Thread id -> its process (thread-group leader). */
  private readonly threads = new Map<number, number>();
  /** Exits of pids whose clone line has not arrived yet: threads, or forks that never exec'd. */
  private readonly earlyExits = new Map<number, { at: number; status: ExitStatus }>();
  private readonly unfinished = new Map<number, string>();
  private skip: SkipFilter | undefined;
  private rootPid: number | undefined;
  private rootCwd = '';
  private timer: NodeJS.Timeout | undefined;
  private done = false;

  constructor(
    private readonly binary: string,
    private readonly callbacks: TraceCallbacks = {},
  ) {
    this.skip = callbacks.skip;
    this.dir = mkdtempSync(join(tmpdir(), 'a2rl-trace-'));
    this.fifo = join(this.dir, 'strace.fifo');
    execFileSync('mkfifo', ['-m', '600', this.fifo]);
    // Without strace's output there are no events; the launcher still knows and kills the tree.
    this.reader = this.read().catch(() => undefined);
  }

  /** The command line that runs `file args` under strace. */
  wrap(file: string, args: string[]): { file: string; args: string[] } {
    return { file: this.binary, args: ['-DD', ...STRACE_FLAGS, '-o', this.fifo, '--', file, ...args] };
  }

  /** Call once the wrapped command is spawned; its pid is the traced root, started in `cwd`. */
  start(rootPid: number, cwd = ''): void {
    this.rootPid = rootPid;
    this.rootCwd = cwd;
    this.parentOf.set(rootPid, process.pid);
    const interval = this.callbacks.intervalMs ?? 100;
    this.timer = setInterval(() => this.tick(), interval);
    this.timer.unref();
  }

  /** The strace process itself (or the root before it exec'd): never a kill target of the tree. */
  isTracer(pid: number): boolean {
    if (pid === this.rootPid) return false;
    const argv = readArgv(pid);
    return !!argv && basename(argv[0] ?? '') === basename(this.binary) && argv.includes(this.fifo);
  }

  /**
   * After the traced tree is dead: waits for strace to finish writing (at most `timeoutMs`, then it
   * is killed), reports what is left and removes the FIFO. Programs strace never saw exit (it was
   * killed) end without a status.
   */
  async finish(timeoutMs: number): Promise<void> {
    if (!this.readerOpened) this.unblockReader();
    if (!(await settlesWithin(this.reader, timeoutMs))) {
      for (const pid of readAllStats().keys()) if (this.isTracer(pid)) tryKill(pid);
      this.unblockReader();
      await settlesWithin(this.reader, 1000);
    }
    if (this.timer) clearInterval(this.timer);
    const now = Date.now();
    for (const p of this.awaitingParent.values()) this.resolveParent(p);
    for (const p of [...this.programs.values()]) this.end(p, now, {});
    this.done = true;
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async read(): Promise<void> {
    // Opening a FIFO for reading blocks until the writer (strace) opens it: done on the threadpool.
    const fd = await new Promise<number>((resolve, reject) => open(this.fifo, 'r', (err, fd) => (err ? reject(err) : resolve(fd))));
    this.readerOpened = true;
    // Both ends are open: the name is no longer needed, and without it nobody else can write in.
    rmSync(this.dir, { recursive: true, force: true });
    const input = new Socket({ fd, readable: true, writable: false });
    const lines = createInterface({ input, crlfDelay: Infinity });
    lines.on('line', (line) => this.onLine(line));
    await new Promise<void>((resolve) => lines.once('close', resolve));
  }

  /** strace never opened its output (it failed to start): let the blocked open return, then EOF. */
  private unblockReader(): void {
    try {
      closeSync(openSync(this.fifo, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK));
    } catch {
      // ENXIO: the reader is not blocked in open (already opened or not started yet).
    }
  }

  private onLine(line: string): void {
    if (this.done) return;
    const m = /^(\d+)\s+(\d+\.\d+)\s+(.*)$/.exec(line);
    if (!m) return;
    const pid = Number(m[1]);
    const at = Number(m[2]) * 1000;
    let text = m[3];
    if (text.endsWith(' <unfinished ...>')) {
      this.unfinished.set(pid, text.slice(0, -' <unfinished ...>'.length));
      return;
    }
    const resumed = /^<\.\.\. (\w+) resumed>(.*)$/.exec(text);
    if (resumed) {
      const head = this.unfinished.get(pid);
      this.unfinished.delete(pid);
      if (head === undefined) {
        // A multithreaded process exec'd from a non-leader thread: the call was printed under the
        // thread's id, the result under the leader's pid. The new argv is in /proc.
        if (resumed[1].startsWith('execve') && /\)\s+= 0$/.test(resumed[2])) this.exec(pid, at, readArgv(pid) ?? []);
        return;
      }
      text = head + resumed[2];
    }
    if (text.startsWith('+++ ')) return this.onExitLine(pid, at, text);
    const call = /^(\w+)\(/.exec(text);
    if (!call) return; // signal deliveries (--- SIG… ---) and anything else
    if (call[1] === 'execve' || call[1] === 'execveat') {
      const parsed = parseExecArgs(text, call[0].length);
      if (!parsed || !/\)\s+= 0$/.test(parsed.tail)) return; // failed exec: no new program
      const exact = parsed.truncated ? readArgv(pid) : null;
      this.exec(pid, at, exact && exact.length > 0 ? exact : parsed.argv);
    } else {
      const ret = /\)\s+= (\d+)(?: \/\* (\d+) in strace's PID NS \*\/)?$/.exec(text);
      if (ret) this.clone(pid, Number(ret[2] ?? ret[1]), /\bCLONE_THREAD\b/.test(text), at);
    }
  }

  private onExitLine(pid: number, at: number, text: string): void {
    const exited = /^\+\+\+ exited with (\d+) \+\+\+$/.exec(text);
    const killed = /^\+\+\+ killed by (SIG\w+)/.exec(text);
    if (!exited && !killed) return; // "superseded by execve": a thread that exec'd, not an exit
    const status: ExitStatus = exited ? { exitCode: Number(exited[1]) } : { signal: killed![1] };
    if (this.threads.delete(pid)) return;
    this.unfinished.delete(pid);
    const p = this.programs.get(pid);
    if (p) this.end(p, at, status);
    else this.earlyExits.set(pid, { at, status });
  }

  private exec(pid: number, at: number, argv: string[]): void {
    const previous = this.programs.get(pid);
    // A fork followed by exec is one process running one program: the fork alone is not reported.
    if (previous && (previous.announced || !previous.forkOnly)) this.end(previous, at, {});
    const p: Program = {
      pid,
      ppid: this.parentOf.get(pid),
      argv,
      // The root's cwd is known even when it exits before /proc can be read.
      cwd: readCwd(pid) || (pid === this.rootPid ? this.rootCwd : ''),
      startedAt: at,
      cpuTicks: 0,
      peakRssKb: 0,
      forkOnly: false,
      announced: false,
      skip: false,
    };
    // The root's first exec is the command the launcher ran: it decides what the wrapper is.
    if (pid === this.rootPid && !this.skip) this.skip = sandboxWrapperFilter(pid, argv);
    this.programs.set(pid, p);
    this.sample(p);
    if (p.ppid === undefined) this.awaitingParent.set(pid, p);
    else this.announce(p);
  }

  private clone(parent: number, child: number, isThread: boolean, at: number): void {
    if (isThread) {
      if (!this.earlyExits.delete(child)) this.threads.set(child, this.threads.get(parent) ?? parent);
      return;
    }
    // A fork from a secondary thread: the parent process is the thread's group leader.
    parent = this.threads.get(parent) ?? parent;
    this.parentOf.set(child, parent);
    const waiting = this.awaitingParent.get(child);
    if (waiting) {
      // Its exec line came first.
      waiting.ppid = parent;
      this.awaitingParent.delete(child);
      this.announce(waiting);
      return;
    }
    if (this.programs.has(child)) return;
    const from = this.programs.get(parent);
    const argv = from?.argv ?? readArgv(child) ?? [];
    const p: Program = {
      pid: child,
      ppid: parent,
      argv,
      cwd: from?.cwd ?? '',
      startedAt: at,
      cpuTicks: 0,
      peakRssKb: 0,
      forkOnly: true,
      announced: false,
      skip: false,
    };
    this.programs.set(child, p);
    const early = this.earlyExits.get(child);
    if (early) {
      this.earlyExits.delete(child);
      this.end(p, early.at, early.status);
    }
  }

  private skipped(p: Program): boolean {
    return p.ppid !== undefined && !!this.skip?.({ pid: p.pid, ppid: p.ppid, argv: p.argv });
  }

  private announce(p: Program): void {
    if (p.announced || p.ppid === undefined) return;
    p.announced = true;
    p.skip = this.skipped(p); // decided once its parent is known
    if (!p.skip) {
      this.callbacks.onStart?.({ pid: p.pid, ppid: p.ppid, argv: p.argv, cwd: p.cwd, kind: classifyArgv(p.argv), startedAt: Math.round(p.startedAt) });
    }
    if (p.ended) this.report(p, p.ended.at, p.ended.status);
  }

  /** The program running in `p.pid` ended at `at` (exited, or replaced by another exec). */
  private end(p: Program, at: number, status: ExitStatus): void {
    if (this.programs.get(p.pid) === p) {
      this.programs.delete(p.pid);
      this.sample(p);
    }
    if (status.exitCode !== undefined || status.signal !== undefined) this.parentOf.delete(p.pid);
    if (p.announced) return this.report(p, at, status);
    p.ended = { at, status };
    this.announce(p); // stays pending in awaitingParent when the parent is still unknown
  }

  private report(p: Program, at: number, status: ExitStatus): void {
    if (p.skip) return;
    this.callbacks.onExit?.({
      pid: p.pid,
      ...status,
      durationMs: Math.max(0, Math.round((at - p.startedAt) * 1000) / 1000),
      cpuMs: p.cpuTicks * TICK_MS,
      peakRssKb: p.peakRssKb,
    });
  }

  private tick(): void {
    const now = Date.now();
    for (const p of this.programs.values()) {
      this.sample(p);
      if (p.forkOnly && !p.announced && now - p.startedAt >= FORK_ANNOUNCE_MS) this.announce(p);
    }
    for (const p of this.awaitingParent.values()) if (now - p.startedAt >= PARENT_WAIT_MS) this.resolveParent(p);
  }

  /** Gives up waiting for the clone line: /proc's view of the parent, 0 if the process is gone. */
  private resolveParent(p: Program): void {
    this.awaitingParent.delete(p.pid);
    p.ppid = readProcStat(p.pid)?.ppid ?? 0;
    this.announce(p);
  }

  private sample(p: Program): void {
    const st = readProcStat(p.pid);
    if (!st || st.state === 'Z') return;
    p.startTicks ??= st.startTicks;
    if (st.startTicks !== p.startTicks) return; // pid reused
    p.cpuTicks = Math.max(p.cpuTicks, st.cpuTicks);
    p.peakRssKb = Math.max(p.peakRssKb, readPeakRssKb(p.pid) ?? 0);
  }
}

interface ParsedExec {
  argv: string[];
  truncated: boolean;
  /** The text after argv: the rest of the arguments and the result. */
  tail: string;
}

/**
 * Finds the argv array of an execve/execveat line (the first top-level `[...]` after the opening
 * parenthesis at `from`) and decodes it. Strings strace shortened (-s) get a trailing "..." and a
 * shortened array a final "..." element. Returns null if the line is not in the expected shape.
 */
export function parseExecArgs(text: string, from: number): ParsedExec | null {
  let i = from;
  while (i < text.length && text[i] !== '[') {
    if (text[i] === '"') {
      const s = parseCString(text, i);
      if (!s) return null;
      i = s.end;
    } else i++;
  }
  if (text[i] !== '[') return null;
  i++;
  const argv: string[] = [];
  let truncated = false;
  for (;;) {
    if (text.startsWith(', ', i)) i += 2;
    if (text[i] === ']') break;
    if (text.startsWith('...', i)) {
      argv.push('...');
      truncated = true;
      i += 3;
      continue;
    }
    const s = parseCString(text, i);
    if (!s) return null;
    argv.push(s.truncated ? `${s.value}...` : s.value);
    truncated ||= s.truncated;
    i = s.end;
  }
  return { argv, truncated, tail: text.slice(i + 1) };
}

/**
 * Decodes the C-style string literal strace prints at `text[start] === '"'`: escapes \" \\ \n \t
 * \r \v \f \a \b, octal \NNN and hex \xNN denote bytes, which are then read as UTF-8. A `...` right
 * after the closing quote means strace truncated it.
 */
export function parseCString(text: string, start: number): { value: string; end: number; truncated: boolean } | null {
  if (text[start] !== '"') return null;
  const bytes: number[] = [];
  let i = start + 1;
  while (i < text.length && text[i] !== '"') {
    const c = text[i];
    if (c !== '\\') {
      const code = text.codePointAt(i)!;
      if (code < 0x80) bytes.push(code);
      else bytes.push(...Buffer.from(String.fromCodePoint(code), 'utf8'));
      i += code > 0xffff ? 2 : 1;
      continue;
    }
    const e = text[i + 1];
    i += 2;
    const simple = SIMPLE_ESCAPES[e];
    if (simple !== undefined) bytes.push(simple);
    else if (e === 'x' && /^[0-9a-fA-F]/.test(text[i] ?? '')) {
      const hex = /^[0-9a-fA-F]{1,2}/.exec(text.slice(i, i + 2))![0];
      bytes.push(parseInt(hex, 16));
      i += hex.length;
    } else if (e >= '0' && e <= '7') {
      const oct = /^[0-7]{1,3}/.exec(text.slice(i - 1, i + 2))![0];
      bytes.push(parseInt(oct, 8) & 0xff);
      i += oct.length - 1;
    } else return null;
  }
  if (text[i] !== '"') return null;
  i++;
  const truncated = text.startsWith('...', i);
  return { value: Buffer.from(bytes).toString('utf8'), end: truncated ? i + 3 : i, truncated };
}

const SIMPLE_ESCAPES: Record<string, number> = { '"': 0x22, '\\': 0x5c, "'": 0x27, n: 10, t: 9, r: 13, v: 11, f: 12, a: 7, b: 8 };


async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([p.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)))]);
  clearTimeout(timer);
  return settled;
}

function tryKill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
