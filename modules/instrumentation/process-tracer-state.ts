import { isAbsolute, resolve } from 'node:path';
import {
  readArgv,
  readCwd,
  readExe,
  readPeakRssKb,
  readProcStat,
  sandboxWrapperFilter,
  type ExitStatus,
  type ProcessExit,
  type ProcessStart,
  type SkipFilter,
} from './process-monitor.js';
import type { ExecFacts } from './exec-capture.js';
import { isChildOf, pairInOrder, procPids, type OpenClone, type PidInfo, type ProcPids } from './process-tracer-pids.js';

/**
 * The strace state machine: strace's `-f -ttt` output lines in, ProcessStart/ProcessExit facts out.
 * It runs in the tracer's worker thread (process-tracer-worker.ts) because the /proc reads it makes
 * (cwd and exact argv at exec time, ppid fallback, CPU/RSS samples) are only right while the process
 * still runs: they must not wait for a busy main thread. Rules:
 * - A "program" is what a process runs between two execs. Each successful exec starts one; a failed
 *   exec (e.g. the ENOENT attempts of a PATH lookup) starts nothing. If a process execs again, its
 *   previous program ends WITHOUT exit code or signal, at the time of the new exec; the exit status
 *   belongs to the program running when the process exits.
 * - A process that forks without exec'ing (a subshell, a multiprocessing worker) is a program
 *   running its parent's argv. Because fork is almost always followed by exec, it is announced only
 *   if it exits, or is still running FORK_ANNOUNCE_MS after the fork, without having exec'd.
 * - ppid comes from the parent's clone/fork line (exact). strace may print a child's exec before
 *   its parent's clone result; the start is then held until that line arrives, or until the reader
 *   has drained the FIFO since the exec line and PARENT_WAIT_MS have passed since it was written or
 *   read (whichever is later), after which /proc's ppid (or 0 when the process is gone) is used. A
 *   reader behind strace (a busy machine, a paused input) must first read the clone lines already
 *   written: counted from strace's timestamp alone, the wait would be over before they are read.
 * - Inside a pid namespace (bwrap) a clone returns the child's pid in that namespace, while lines
 *   carry host pids: process-tracer-pids.ts finds the child's host pid. A clone whose child was
 *   already reaped stays open and pairs with the exit of a pid never seen alive, once the reader
 *   has drained the FIFO after that exit (`drained()`: strace wrote the child's clone line before
 *   its parent could reap it, so it has been read by then); what cannot be paired with certainty
 *   is given up after ORPHAN_GIVE_UP_MS and reported as a gap.
 * - Threads (CLONE_THREAD) are not processes and are not reported.
 * - `executable` is the path the successful execve ran (resolved against the process's cwd when
 *   relative): for a script started through its #! line that is the script. /proc/<pid>/exe stands
 *   in when the path is unknown (execveat on a descriptor, a path strace shortened).
 * - cwd is followed from the trace (the root's launch directory, inherited on fork, changed by chdir),
 *   so it is the directory at the time of the exec even when the line is read later; /proc's is
 *   used where the trace loses track (fchdir, a relative chdir from an unknown directory).
 *   CPU time and peak RSS are sampled from /proc at the exec (under a2rl-trace right after the
 *   program is let go, so that it does not wait for those reads) and every tick while it runs, so a
 *   program shorter than one tick may report 0.
 * - Times (startedAt, endedAt, durationMs) are strace's microsecond timestamps.
 * - What a program really runs (exec-capture.ts: the executable image, the script) is read when its
 *   successful exec line is read. a2rl-trace (`holds` 'ptrace') holds every exec, the root's first
 *   included, in a ptrace stop nothing else can end, and the worker lets it go once this line is
 *   processed (its `--- held at exec N ---` line), so every capture is `at-exec`. strace injects a
 *   SIGSTOP into every exec (`-e inject=…:signal=`, queued at the call's entry, so the new program
 *   stops before its first instruction); the state resumes the process (SIGCONT) once strace reports
 *   it stopped by that kernel-sent SIGSTOP, which is always after the capture. The launched root's
 *   first exec is not stopped (strace starts it before tracing), hence `capture: 'after-start'`
 *   there. A SIGCONT from another process (an agent racing its own child) that arrives before the
 *   capture finished is reported as a gap.
 */

export interface TraceSink {
  start(p: ProcessStart): void;
  exit(p: ProcessExit): void;
  /** Something observed cannot be vouched for (see the SIGCONT race above). */
  gap?(reason: string): void;
}

/** Exec-time capture: read what a stopped process runs, and let it go. */
export interface ExecHooks {
  capture(pid: number, execPath: string | undefined, argv: string[]): ExecFacts;
  /** The facts of an exec a2rl-trace let go at once, from its `known exec` line (exec-capture.ts, takeKnown). */
  captureKnown?(identity: string, exePath: string): ExecFacts;
  resume(pid: number): void;
}

const FORK_ANNOUNCE_MS = 500;
const PARENT_WAIT_MS = 250;
/** Open clones that could not be paired this long after they were read are reported as a gap. */
const ORPHAN_GIVE_UP_MS = 1000;
/** USER_HZ (see process-monitor.ts). */
const TICK_MS = 10;

interface Program {
  pid: number;
  ppid?: number;
  argv: string[];
  cwd: string;
  executable?: string;
  /** Epoch ms (fractional). */
  startedAt: number;
  startTicks?: number;
  cpuTicks: number;
  peakRssKb: number;
  forkOnly: boolean;
  announced: boolean;
  facts?: ExecFacts;
  capture?: 'at-exec' | 'after-start';
  skip: boolean;
  /** Set when it ended before it could be announced. */
  ended?: { at: number; status: ExitStatus };
  /** While its parent is unknown: the line count at its exec line, and when the wait for its parent's clone line began. */
  waiting?: { line: number; since: number };
}

/** What a child inherits from the process that cloned it, as of the clone line. */
interface Origin {
  leader: number;
  program?: Program;
  cwd?: string;
}

/** A clone line inside a pid namespace, with what its child will inherit. */
interface Clone extends OpenClone {
  /** The child's namespace level as followed from the trace; undefined: read it from /proc. */
  childLevel?: number;
  origin: Origin;
}

export class StraceState {
  private readonly programs = new Map<number, Program>();
  /** Exec'd programs whose parent is not known yet (live or already ended). */
  private readonly awaitingParent = new Map<number, Program>();
  private readonly parentOf = new Map<number, number>();
  /** Thread id -> its process (thread-group leader). */
  private readonly threads = new Map<number, number>();
  /** Exits of pids whose clone line has not arrived yet: threads, or forks that never exec'd. */
  private readonly earlyExits = new Map<number, { at: number; status: ExitStatus }>();
  private readonly unfinished = new Map<number, string>();
  /** Working directory per process, as followed from the trace (inherited on fork, set by chdir). */
  private readonly cwdOf = new Map<number, string>();
  private skip: SkipFilter | undefined;
  private finished = false;
  /** Processes that got strace's injected SIGSTOP and are to be resumed once stopped. */
  private readonly injectedStops = new Set<number>();
  /** Processes captured at exec and not resumed yet → when the capture finished (epoch ms). */
  private readonly capturedAt = new Map<number, number>();
  private rootExecSeen = false;
  /** a2rl-trace's `known exec` line per pid, with its line number: the exec line that follows it is not held. */
  private readonly knownExecs = new Map<number, { identity: string; exe: string; line: number }>();
  /** Lines that should have been a fact but could not be read (a gap in the record). */
  unparsable = 0;
  /** Pid namespace level per process (0: the harness's), where known. */
  private readonly levels = new Map<number, number>();
  /** Processes that moved their children to another pid namespace (unshare, setns): level not inferred. */
  private readonly nsChanged = new Set<number>();
  /** Host pids seen in a line before any clone line named them: /proc's view then, null if gone. */
  private readonly seen = new Map<number, PidInfo | null>();
  /** Clones whose child's host pid is not known yet (process-tracer-pids.ts), with when they were read. */
  private open: Array<Clone & { readAt: number }> = [];
  /** How clone results were mapped to host pids (measurements, tests). */
  readonly pidStats = { direct: 0, seen: 0, listed: 0, adopted: 0, paired: 0, lost: 0 };
  /** Lines processed; an exit's number tells whether the FIFO was drained since. */
  private lineCount = 0;
  /** Line number of each exit of a pid no clone line has named yet. */
  private readonly exitSeq = new Map<number, number>();
  /** `lineCount` and time at the reader's last drain of the FIFO (`drained()`). */
  private drainedSeq = 0;
  private drainedAt = 0;
  /** The reader's latest time (tick, drained): when a line read now began to wait. */
  private clock = 0;
  /** Exits of children of clones given up that have not come yet: they must not pair with others. */
  private owed = 0;

  /**
   * `rootPid` is the launched command (its parent is the harness, `harnessPid`), started in
   * `rootCwd`; its first exec decides what the sandbox wrapper is (sandboxWrapperFilter).
   */
  constructor(
    private readonly sink: TraceSink,
    private readonly rootPid: number,
    rootCwd: string,
    private readonly harnessPid: number,
    private readonly hooks?: ExecHooks,
    /**
     * How execs wait for their capture: undefined, strace's injected SIGSTOP; a number, held that many
     * ms by strace (delay_exit); 'ptrace', held by a2rl-trace until the worker lets them go.
     */
    private readonly holds?: number | 'ptrace',
    private readonly pids: ProcPids = procPids,
  ) {
    this.parentOf.set(rootPid, harnessPid);
    if (rootCwd) this.cwdOf.set(rootPid, rootCwd);
    // The launched command runs in the harness's namespace (level 0) unless /proc says otherwise.
    this.levels.set(rootPid, (pids.status(rootPid)?.nspid.length ?? 1) - 1);
  }

  /** One line of strace's output (without the newline). */
  line(line: string): void {
    if (this.finished) return;
    const m = /^(\d+)\s+(\d+\.\d+)\s+(.*)$/.exec(line);
    if (!m) {
      if (line.trim() !== '') this.unparsable++;
      return;
    }
    const pid = Number(m[1]);
    const at = Number(m[2]) * 1000;
    let text = m[3];
    this.lineCount++;
    this.firstSight(pid);
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
        // thread's id, the result under the leader's pid. The new argv and file are in /proc.
        if (resumed[1].startsWith('execve') && /\)\s+= 0(?: \(DELAYED\))?$/.test(resumed[2])) this.exec(pid, at, readArgv(pid) ?? [], readExe(pid) || undefined);
        return;
      }
      text = head + resumed[2];
    }
    // A held exec (delay_exit) is marked as such after its result.
    const held = text.endsWith(' (DELAYED)');
    if (held) text = text.slice(0, -' (DELAYED)'.length);
    if (text.startsWith('+++ ')) return this.onExitLine(pid, at, text);
    if (text.startsWith('--- ')) return this.onSignalLine(pid, at, text);
    const call = /^(\w+)\(/.exec(text);
    if (!call) return; // signal deliveries (--- SIG… ---) and anything else
    if (call[1] === 'execve' || call[1] === 'execveat') {
      const parsed = parseExecArgs(text, call[0].length);
      if (!parsed) {
        if (/\)\s+= 0$/.test(text)) this.unparsable++; // a successful exec we cannot read
        return;
      }
      if (!/\)\s+= 0$/.test(parsed.tail)) return; // failed exec: no new program
      const exact = parsed.truncated ? readArgv(pid) : null;
      this.exec(pid, at, exact && exact.length > 0 ? exact : parsed.argv, execPath(text, call[1], call[0].length), held);
    } else if (call[1] === 'chdir' || call[1] === 'fchdir') {
      if (/\)\s+= 0$/.test(text)) this.chdir(pid, call[1] === 'chdir' ? parseCString(text, call[0].length) : null);
    } else if (call[1] === 'unshare' || call[1] === 'setns') {
      if (/\)\s+= 0$/.test(text) && (call[1] === 'setns' || /\bCLONE_NEWPID\b/.test(text))) this.nsChanged.add(this.threads.get(pid) ?? pid);
    } else {
      // strace's --pidns-translation, and a2rl-trace always, give the host pid in a comment.
      const ret = /\)\s+= (\d+)(?: \/\* (\d+) in (?:strace's|the tracer's) PID NS \*\/)?$/.exec(text);
      if (ret?.[2]) this.clone(pid, Number(ret[2]), /\bCLONE_THREAD\b/.test(text), at);
      else if (ret) this.cloned(pid, Number(ret[1]), text, at);
    }
  }

  /** a2rl-trace was told to let `pid` go from its exec: the program's first CPU/RSS sample. */
  released(pid: number): void {
    const p = this.programs.get(pid);
    if (p && !this.finished) this.sample(p);
  }

  /** Samples CPU/RSS of running programs and settles what waited long enough (fork, parent). */
  tick(now: number): void {
    if (this.finished) return;
    for (const p of this.programs.values()) {
      this.sample(p);
      if (p.forkOnly && !p.announced && now - p.startedAt >= FORK_ANNOUNCE_MS) this.announce(p);
    }
    this.clock = now;
    this.settleParents(now);
  }

  /**
   * The reader found the FIFO empty (a short read) at `now`: every line strace wrote before is
   * processed. Open clones can be paired with the exits read so far.
   */
  drained(now: number): void {
    if (this.finished) return;
    this.drainedSeq = this.lineCount;
    this.drainedAt = now;
    this.clock = now;
    this.settleOrphans();
    this.settleParents(now);
  }

  /**
   * strace is gone (its output ended, or it was killed): settles every pending parent and ends the
   * programs strace never saw exit, at `now`, without status. Returns how many ended that way.
   */
  finish(now: number): number {
    if (this.finished) return 0;
    this.drainedSeq = this.lineCount;
    this.drainedAt = Number.POSITIVE_INFINITY; // nothing more will come: give up what does not pair
    this.settleOrphans();
    for (const p of [...this.awaitingParent.values()]) this.resolveParent(p);
    const unseen = [...this.programs.values()];
    for (const p of unseen) this.end(p, now, {});
    this.finished = true;
    return unseen.filter((p) => !p.skip).length;
  }

  /** strace's SIGSTOP (sent by the kernel on its behalf) stopped `pid`: resume it; note SIGCONTs of others. */
  private onSignalLine(pid: number, at: number, text: string): void {
    const known = /^--- known exec (\d+ \d+ \d+ \d+ \d+ \d+ \d+) (?=")/.exec(text);
    if (known) {
      const exe = parseCString(text, known[0].length);
      if (exe && text.slice(exe.end) === ' ---') this.knownExecs.set(pid, { identity: known[1], exe: exe.value, line: this.lineCount });
      return;
    }
    if (text.startsWith('--- SIGSTOP {') && text.includes('si_code=SI_KERNEL')) {
      this.injectedStops.add(pid);
    } else if (text === '--- stopped by SIGSTOP ---') {
      if (!this.injectedStops.delete(pid)) return; // the agent's own SIGSTOP: not ours to undo
      this.capturedAt.delete(pid);
      this.hooks?.resume(pid);
    } else if (text.startsWith('--- SIGCONT {')) {
      // si_pid is in the receiver's namespace: 0 for a sender outside it (the harness, in a sandbox).
      const sender = Number(/si_pid=(\d+)/.exec(text)?.[1] ?? 0);
      const level = this.levels.get(this.threads.get(pid) ?? pid);
      const captured = this.capturedAt.get(pid);
      if (captured !== undefined && sender !== 0 && (level !== 0 || sender !== this.harnessPid) && at < captured) {
        const inNs = level === 0 ? '' : ' (in its pid namespace)';
        this.sink.gap?.(`pid ${pid} was continued by pid ${sender}${inNs} before the harness had read what it exec'd: its recorded executable and script may not be what ran`);
      }
    }
  }

  private onExitLine(pid: number, at: number, text: string): void {
    const exited = /^\+\+\+ exited with (\d+) \+\+\+$/.exec(text);
    const killed = /^\+\+\+ killed by (SIG\w+)/.exec(text);
    if (!exited && !killed) return; // "superseded by execve": a thread that exec'd, not an exit
    const status: ExitStatus = exited ? { exitCode: Number(exited[1]) } : { signal: killed![1] };
    if (this.threads.delete(pid)) {
      this.seen.delete(pid);
      return;
    }
    this.unfinished.delete(pid);
    this.injectedStops.delete(pid);
    this.capturedAt.delete(pid);
    const p = this.programs.get(pid);
    if (p) this.end(p, at, status);
    else {
      this.earlyExits.set(pid, { at, status });
      this.exitSeq.set(pid, this.lineCount);
    }
  }

  private exec(pid: number, at: number, argv: string[], path: string | undefined, held = false): void {
    const previous = this.programs.get(pid);
    // A fork followed by exec is one process running one program: the fork alone is not reported.
    if (previous && (previous.announced || !previous.forkOnly)) this.end(previous, at, {});
    // As followed from the trace: right at the time of the exec even if the process has moved on
    // (or is gone) by the time this line is read; /proc only where the trace lost track.
    const cwd = this.cwdOf.get(pid) ?? readCwd(pid);
    const executable = path === undefined ? readExe(pid) || undefined : isAbsolute(path) || !cwd ? path : resolve(cwd, path);
    const p: Program = { pid, ppid: this.parentOf.get(pid), argv, cwd, executable, startedAt: at, cpuTicks: 0, peakRssKb: 0, forkOnly: false, announced: false, skip: false };
    // The root's first exec is the command the launcher ran: it decides what the wrapper is.
    if (pid === this.rootPid && !this.skip) this.skip = sandboxWrapperFilter(pid, argv);
    this.programs.set(pid, p);
    // Held by a2rl-trace, the program is first sampled once let go (`released`): the /proc reads are
    // not part of what it waits for. Else first, since a root that does not wait at its exec may be
    // gone once a large image is hashed.
    if (this.holds !== 'ptrace') this.sample(p);
    if (this.hooks) this.captureExec(p, path ?? executable, held);
    if (p.ppid === undefined) {
      p.waiting = { line: this.lineCount, since: Math.max(at, this.clock) };
      this.awaitingParent.set(pid, p);
    } else this.announce(p);
  }

  /** Reads what `p` runs while it waits at its exec (the launched root's first exec does not wait). */
  private captureExec(p: Program, path: string | undefined, held: boolean): void {
    const first = p.pid === this.rootPid && !this.rootExecSeen;
    if (p.pid === this.rootPid) this.rootExecSeen = true;
    const known = this.knownExecs.get(p.pid);
    this.knownExecs.delete(p.pid);
    if (this.holds === 'ptrace' && known && known.line === this.lineCount - 1 && this.hooks!.captureKnown) {
      // Not held: what it runs was read by the tracer at the exec; it runs already (sampled now).
      p.facts = this.hooks!.captureKnown(known.identity, known.exe);
      p.capture = 'at-exec';
      this.sample(p);
      return;
    }
    p.facts = this.hooks!.capture(p.pid, path, p.argv);
    if (this.holds === 'ptrace') {
      p.capture = 'at-exec';
      return;
    }
    if (this.holds !== undefined) {
      // Held for a fixed time: vouched for only when read before strace let it go (same clock as -ttt).
      p.capture = !first && held && Date.now() < p.startedAt + this.holds ? 'at-exec' : 'after-start';
      return;
    }
    p.capture = first ? 'after-start' : 'at-exec';
    if (!first) this.capturedAt.set(p.pid, Date.now());
  }

  /**
   * `parent` (a thread) made `child`; `origin` is what the child inherits, as of the clone line
   * (a clone settled later keeps it: its parent may have exec'd, moved or ended since).
   */
  private clone(parent: number, child: number, isThread: boolean, at: number, origin = this.originOf(parent)): void {
    this.seen.delete(child); // named by its clone line now
    if (isThread) {
      if (this.earlyExits.has(child)) this.forgetExit(child);
      else this.threads.set(child, origin.leader);
      return;
    }
    // A fork from a secondary thread: the parent process is the thread's group leader.
    parent = origin.leader;
    this.parentOf.set(child, parent);
    const inherited = origin.cwd;
    // The child's own chdir may have been printed before its parent's clone line.
    if (inherited !== undefined && !this.cwdOf.has(child)) this.cwdOf.set(child, inherited);
    const waiting = this.awaitingParent.get(child);
    if (waiting) {
      // Its exec line came first.
      waiting.ppid = parent;
      this.awaitingParent.delete(child);
      this.announce(waiting);
      return;
    }
    if (this.programs.has(child)) return;
    const from = origin.program;
    const p: Program = {
      pid: child,
      ppid: parent,
      argv: from?.argv ?? readArgv(child) ?? [],
      cwd: from?.cwd ?? '',
      executable: from?.executable,
      // A fork runs its parent's program: the same image and script.
      ...(from?.facts ? { facts: from.facts, capture: from.capture } : {}),
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
      this.forgetExit(child);
      this.end(p, early.at, early.status);
    }
  }

  /** What a child of thread `caller` inherits now: its process, that process's program and cwd. */
  private originOf(caller: number): Origin {
    const leader = this.threads.get(caller) ?? caller;
    return { leader, program: this.programs.get(leader), cwd: this.cwdOf.get(leader) };
  }

  /**
   * A clone/fork line without strace's translation: `nsPid` is the child's pid in the caller's
   * namespace. Finds its host pid now, or keeps the clone open (process-tracer-pids.ts).
   */
  private cloned(caller: number, nsPid: number, text: string, at: number): void {
    const isThread = /\bCLONE_THREAD\b/.test(text);
    const leader = this.threads.get(caller) ?? caller;
    const level = this.levelOf(leader);
    // The child's level, unless its parent moved its children to another namespace (then read it).
    const childLevel = level === undefined || this.nsChanged.has(leader) ? undefined : level + (/\bCLONE_NEWPID\b/.test(text) ? 1 : 0);
    const clone: Clone = { caller, leader, nsPid, level, isThread, at, chosenPid: /\bset_tid=0x/.test(text), childLevel, origin: this.originOf(caller) };
    const child = level === 0 ? nsPid : this.findChild(clone);
    if (level === 0) this.pidStats.direct++;
    if (child === undefined) {
      this.open.push({ ...clone, readAt: Date.now() });
      return;
    }
    this.adopt(clone, child);
  }

  /** `child` is the host pid of what `clone` created. */
  private adopt(clone: Clone, child: number): void {
    const info = this.seen.get(child);
    this.seen.delete(child);
    const level = info ? info.nspid.length - 1 : clone.childLevel;
    if (!clone.isThread && level !== undefined) this.levels.set(child, level);
    this.clone(clone.caller, child, clone.isThread, clone.at, clone.origin);
  }

  /** The host pid of `clone`'s child: among processes already seen, then the caller's children. */
  private findChild(clone: OpenClone): number | undefined {
    if (clone.level === undefined) return undefined;
    for (const [pid, info] of this.seen) {
      if (info && isChildOf(info, clone)) {
        this.pidStats.seen++;
        return pid;
      }
    }
    const candidates = clone.isThread ? this.pids.tasks(clone.leader) : this.pids.children(clone.leader, clone.caller);
    for (const pid of candidates ?? []) {
      if (this.parentOf.has(pid) || (!clone.isThread && this.programs.has(pid))) continue; // already known
      const info = this.seen.get(pid) ?? this.pids.status(pid);
      if (info && isChildOf(info, clone)) {
        this.seen.set(pid, info);
        this.pidStats.listed++;
        return pid;
      }
    }
    return undefined;
  }

  /** The pid namespace level of process `pid`: followed from the trace, else read from /proc. */
  private levelOf(pid: number): number | undefined {
    const known = this.levels.get(pid);
    if (known !== undefined) return known;
    const info = this.seen.get(pid) ?? this.pids.status(pid);
    if (!info) return undefined;
    this.levels.set(pid, info.nspid.length - 1);
    return info.nspid.length - 1;
  }

  /**
   * The first line of a host pid no clone line has named yet (in a pid namespace, the child's lines
   * may come before its parent's clone line, or the clone stayed open): /proc's view of it while it
   * may still be there, and the open clone it belongs to, if any.
   */
  private firstSight(pid: number): void {
    if (this.parentOf.has(pid) || this.threads.has(pid) || this.seen.has(pid)) return;
    const info = this.pids.status(pid);
    this.seen.set(pid, info);
    if (!info) return;
    if (info.tgid !== pid) this.threads.set(pid, info.tgid);
    const i = this.open.findIndex((c) => isChildOf(info, c));
    if (i === -1) return;
    const [clone] = this.open.splice(i, 1);
    this.pidStats.adopted++;
    this.adopt(clone, pid);
  }

  /**
   * Pairs open clones with the exits of pids never seen alive that were read before the last drain
   * (pairInOrder: only when certain). Gives up on them — a gap naming the processes lost — when all
   * their exits are in and they still cannot be paired (several callers), or ORPHAN_GIVE_UP_MS
   * after they were read. Exits still owed by clones given up (`owed`) are waited for and dropped,
   * never paired: until they are all in, nothing pairs.
   */
  private settleOrphans(): void {
    const drainedExits = (seenAlive: boolean) =>
      [...this.earlyExits.keys()].filter((pid) => !!this.seen.get(pid) === seenAlive && (this.exitSeq.get(pid) ?? Infinity) <= this.drainedSeq);
    // A process seen alive that ended unattributed, its clone line read: a clone given up owed it.
    for (const pid of this.owed > 0 ? drainedExits(true) : []) {
      if (this.owed === 0) break;
      this.forgetExit(pid);
      this.owed--;
    }
    const vanished = drainedExits(false);
    if (this.open.length === 0) {
      for (const pid of vanished.slice(0, this.owed)) this.forgetExit(pid);
      this.owed = Math.max(0, this.owed - vanished.length);
      return;
    }
    const pairs = this.owed === 0 ? pairInOrder(this.open, vanished) : null;
    if (pairs) {
      this.open = [];
      this.pidStats.paired += pairs.length;
      for (const [clone, pid] of pairs) this.adopt(clone, pid);
      return;
    }
    // Every exit owed is in (the clone lines of these exits are all read: open, or given up) and
    // still they cannot be paired: nothing to wait for.
    const hopeless = vanished.length === this.open.length + this.owed;
    if (!hopeless && this.drainedAt - Math.min(...this.open.map((c) => c.readAt)) < ORPHAN_GIVE_UP_MS) return;
    const lost = this.open.filter((c) => !c.isThread).length;
    this.pidStats.lost += this.open.length;
    if (lost > 0) {
      const callers = new Set(this.open.map((c) => c.caller)).size;
      this.sink.gap?.(
        `${lost} process(es) forked inside a pid namespace (by ${callers} caller(s)) ended before the tracer could tell their host pids apart; they are not recorded`,
      );
    }
    this.owed = Math.max(0, this.owed + this.open.length - vanished.length);
    for (const pid of vanished) this.forgetExit(pid);
    this.open = [];
  }

  private forgetExit(pid: number): void {
    this.earlyExits.delete(pid);
    this.exitSeq.delete(pid);
    this.seen.delete(pid);
  }

  /** A successful chdir (to `path`, relative to the current directory) or fchdir (`path` null). */
  private chdir(pid: number, path: { value: string; truncated: boolean } | null): void {
    const proc = this.threads.get(pid) ?? pid; // threads share their process's cwd
    const current = this.cwdOf.get(proc);
    const next = path && !path.truncated && (isAbsolute(path.value) || current) ? resolve(current ?? '/', path.value) : readCwd(proc);
    if (next) this.cwdOf.set(proc, next);
    else this.cwdOf.delete(proc);
  }

  private announce(p: Program): void {
    if (p.announced || p.ppid === undefined) return;
    p.announced = true;
    p.skip = !!this.skip?.({ pid: p.pid, ppid: p.ppid, argv: p.argv, grandparent: this.parentOf.get(p.ppid) }); // decided once its parent is known
    if (!p.skip) {
      this.sink.start({
        pid: p.pid,
        ppid: p.ppid,
        argv: p.argv,
        cwd: p.cwd,
        ...(p.executable ? { executable: p.executable } : {}),
        startedAt: Math.round(p.startedAt),
        ...p.facts,
        ...(p.capture ? { capture: p.capture } : {}),
      });
    }
    if (p.ended) this.report(p, p.ended.at, p.ended.status);
  }

  /** The program running in `p.pid` ended at `at` (exited, or replaced by another exec). */
  private end(p: Program, at: number, status: ExitStatus): void {
    if (this.programs.get(p.pid) === p) {
      this.programs.delete(p.pid);
      this.sample(p);
    }
    if (status.exitCode !== undefined || status.signal !== undefined) {
      this.parentOf.delete(p.pid);
      this.cwdOf.delete(p.pid);
      this.levels.delete(p.pid);
      this.nsChanged.delete(p.pid);
      this.seen.delete(p.pid);
    }
    if (p.announced) return this.report(p, at, status);
    p.ended = { at, status };
    this.announce(p); // stays pending in awaitingParent when the parent is still unknown
  }

  private report(p: Program, at: number, status: ExitStatus): void {
    if (p.skip) return;
    this.sink.exit({
      pid: p.pid,
      ...status,
      durationMs: Math.max(0, Math.round((at - p.startedAt) * 1000) / 1000),
      cpuMs: p.cpuTicks * TICK_MS,
      peakRssKb: p.peakRssKb,
      endedAt: Math.round(at),
    });
  }

  /** Gives up on the clone lines of the parents that waited long enough (see the rules above). */
  private settleParents(now: number): void {
    for (const p of this.awaitingParent.values()) {
      const waiting = p.waiting ?? { line: 0, since: p.startedAt };
      if (this.drainedSeq >= waiting.line && now - waiting.since >= PARENT_WAIT_MS) this.resolveParent(p);
    }
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

/**
 * The file a successful execve/execveat line ran, as strace printed it; undefined when it is not a
 * plain path (execveat relative to a descriptor, a path strace shortened).
 */
function execPath(text: string, call: string, from: number): string | undefined {
  let i = from;
  if (call === 'execveat') {
    if (!text.startsWith('AT_FDCWD, ', i)) return undefined;
    i += 'AT_FDCWD, '.length;
  }
  const s = parseCString(text, i);
  return s && !s.truncated && s.value !== '' ? s.value : undefined;
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
