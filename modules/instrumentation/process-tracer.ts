import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, constants as fsConstants, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import pTimeout from 'p-timeout';
import { readAllStats, readArgv, type ProcessExit, type ProcessStart } from './process-monitor.js';
import type { FromWorker, ToWorker, TracerWorkerData } from './process-tracer-worker.js';
import { startWorker } from '../settings/worker-thread.js';

export { parseCString, parseExecArgs } from './process-tracer-state.js';

/**
 * Exact process events from a tracer, the alternative to ProcessMonitor's /proc polling: a2rl's own
 * (`ptrace`, native/a2rl-trace.c, where it builds and works) or `strace -f`. Both write strace's line
 * format, which one state machine reads. What a2rl-trace does better is in its source's header: only
 * execs stop, every exec is held in a ptrace stop until the harness has read it (the state resumes it
 * through a control FIFO), and a fork's child comes with its host pid. The rest of this comment
 * describes the strace path; a2rl-trace runs the same way (detached, FIFO, worker).
 *
 * strace reports every successful exec, every fork/clone and every exit with its real status,
 * however short the process lived. How its lines become facts is in process-tracer-state.ts; inside
 * bwrap's pid namespace a clone returns the namespace's pid, which the worker maps to the host pid
 * (process-tracer-pids.ts) — strace's own --pidns-translation scanned all of /proc for every new
 * process, several milliseconds each.
 *
 * strace runs with -DD: the launched process IS the traced command (so its exit status is the
 * agent's) and strace is a detached grandchild in its own process group, so killing the agent's
 * group never kills the tracer. strace exits by itself once every tracee is gone. Its output goes
 * through a FIFO (unlinked as soon as both ends are open, so nothing grows on disk) that a worker
 * thread drains and parses (process-tracer-worker.ts): strace writes synchronously, so if its reader
 * stalled, the agent would stall with it — a reader on the harness's event loop froze the agent
 * whenever that loop was busy (a file-watcher burst, ledger I/O). The worker posts batches of facts;
 * this class hands them to the callbacks in order and acknowledges each batch once the callbacks'
 * promises (if they return any) settle. Unacknowledged facts are bounded (maxPendingBytes): past it
 * the worker stops reading, strace blocks and the agent slows down; nothing is dropped. What is lost
 * anyway (strace killed before reporting exits, unparsable lines, a failed worker) is reported
 * through `onGap`. See docs/runs.md, "Process tracing".
 */

export type TracerKind = 'ptrace' | 'strace' | 'proc';

export interface TraceCallbacks {
  /** May return a promise (e.g. the ledger append): its batch counts as pending until it settles. */
  onStart?: (p: ProcessStart) => unknown;
  onExit?: (p: ProcessExit) => unknown;
  /** Something observed could not be recorded; `count` is how many facts when known. */
  onGap?: (reason: string, count?: number) => void;
  /** Sampling interval for CPU/RSS; default 100 ms. */
  intervalMs?: number;
  /** Bound on facts posted by the worker and not yet acknowledged; default 64 MiB. */
  maxPendingBytes?: number;
  /** strace only: hold each new program this long at its exec instead of stopping it with SIGSTOP (straceFlags). */
  execHoldMs?: number;
}

export class TracerUnavailableError extends Error {
  override readonly name = 'TracerUnavailableError';
}

const DEFAULT_MAX_PENDING_BYTES = 64 * 1024 * 1024;
/** How often finish() retries letting a reader that is blocked in open() go (strace never wrote). */
const UNBLOCK_RETRY_MS = 20;

/**
 * Default-ignored signals cannot kill, so their delivery lines are noise. (`signal=none` would also
 * hide the "+++ killed by SIG… +++" lines we need.) SIGSTOP and SIGCONT lines stay: every exec gets a
 * SIGSTOP injected (queued at the call's entry, delivered before the new program's first
 * instruction) so that the worker reads what it runs while it waits, and resumes it with SIGCONT
 * (process-tracer-state.ts); a SIGCONT from anyone else is how a race with that capture shows.
 */
const STRACE_FLAGS = [
  '-f',
  '-q',
  '-ttt',
  '--seccomp-bpf', // only the traced syscalls stop the tracee: near-zero overhead for everything else
  '-s',
  '4096',
  '-e',
  // unshare/setns (rare) tell when a process's children go to another pid namespace.
  'trace=execve,execveat,clone,clone3,fork,vfork,chdir,fchdir,unshare,setns',
  '-e',
  'inject=execve,execveat:signal=SIGSTOP',
  '-e',
  'signal=!SIGCHLD,SIGURG,SIGWINCH',
];

/**
 * With a hold (`execHoldMs`), each successful exec is delayed that long instead (`delay_exit`: strace
 * keeps the new program in a ptrace stop, which its parent never sees). A shell with job control — the
 * interactive bash OpenHands runs commands in — takes the SIGSTOP for its foreground job being
 * suspended and returns early; with the hold it never notices. The capture is vouched for
 * (`at-exec`) only when it finished within the hold.
 */
export function straceFlags(execHoldMs: number | undefined): string[] {
  if (execHoldMs === undefined) return STRACE_FLAGS;
  return STRACE_FLAGS.map((f) => (f.startsWith('inject=') ? `inject=execve,execveat:delay_exit=${Math.round(execHoldMs * 1000)}` : f));
}

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

/** Traces one agent launch with strace, or with a2rl-trace (`kind` 'ptrace'). */
export class StraceTracer {
  private readonly dir: string;
  private readonly fifo: string;
  /** a2rl-trace only: where the worker names the held processes it is done with. */
  private readonly control: string | undefined;
  private readonly worker: Worker;
  /** Resolves when the worker has posted its last fact (or died). */
  private readonly done: Promise<void>;
  private opened = false;
  private rootPid: number | undefined;
  private readonly maxPendingBytes: number;
  /**
   * Bytes of facts taken and not yet acknowledged to the worker: acknowledged together once they
   * reach `ackBytes` (a 16th of the bound, at most 64 KiB), not one message per batch — each
   * message wakes the worker. The worker's count of pending facts is then at most that much too
   * high: it may stop reading a little early, and resumes once less than half the bound is pending.
   */
  private unacked = 0;
  private readonly ackBytes: number;
  private finishing: Promise<void> | undefined;

  constructor(
    private readonly binary: string,
    private readonly callbacks: TraceCallbacks = {},
    readonly kind: 'strace' | 'ptrace' = 'strace',
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'a2rl-trace-'));
    this.fifo = join(this.dir, 'strace.fifo');
    this.control = kind === 'ptrace' ? join(this.dir, 'control.fifo') : undefined;
    if (this.control) execFileSync('mkfifo', ['-m', '600', this.control]);
    this.maxPendingBytes = callbacks.maxPendingBytes ?? DEFAULT_MAX_PENDING_BYTES;
    this.ackBytes = Math.max(1, Math.min(64 * 1024, Math.floor(this.maxPendingBytes / 16)));
    execFileSync('mkfifo', ['-m', '600', this.fifo]);
    // Opened here, handed to the worker, which owns it from then on (process-tracer-worker.ts, `input`).
    // Non-blocking: a FIFO's read end opens at once so, with no writer yet.
    const inputFd = openSync(this.fifo, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
    const data: TracerWorkerData = {
      fifo: this.fifo,
      inputFd,
      intervalMs: callbacks.intervalMs ?? 100,
      maxPendingBytes: this.maxPendingBytes,
      ...(this.control ? { control: this.control } : { execHoldMs: callbacks.execHoldMs }),
    };
    try {
      this.worker = startWorker(new URL('./process-tracer-worker.js', import.meta.url), data);
    } catch (err) {
      closeSync(inputFd); // no thread was made to own it
      throw err;
    }
    let isReady = false;
    let ready!: () => void;
    let failed!: (err: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => ((ready = resolve), (failed = reject)));
    this.ready.catch(() => undefined); // a launcher that gives up before awaiting it
    this.done = new Promise<void>((resolve) => {
      this.worker.on('message', (msg: FromWorker) => {
        if (msg.t === 'ready') {
          isReady = true;
          this.worker.unref(); // from now on the traced child keeps the harness alive, not its tracer
          ready();
        } else if (msg.t === 'done') resolve();
        else this.onMessage(msg);
      });
      // Without strace's output there are no events; the launcher still knows and kills the tree.
      this.worker.on('error', (err) => {
        failed(new TracerUnavailableError(`the process tracer's worker failed: ${err.message}`, { cause: err }));
        if (isReady) this.callbacks.onGap?.(`process tracer failed: ${err.message}`);
        resolve();
      });
      this.worker.on('exit', () => {
        failed(new TracerUnavailableError("the process tracer's worker exited before it was ready"));
        resolve();
      });
    });
  }

  /**
   * Resolves once the worker is about to read the FIFO: spawn strace only then, so that a harness
   * that dies right after the launch never leaves strace blocked forever opening a FIFO nobody will
   * read. Rejects (TracerUnavailableError) if the worker cannot start.
   */
  readonly ready: Promise<void>;

  /** The command line that runs `file args` under the tracer. */
  wrap(file: string, args: string[]): { file: string; args: string[] } {
    if (this.control) return { file: this.binary, args: ['-o', this.fifo, '-c', this.control, '--', file, ...args] };
    return { file: this.binary, args: ['-DD', ...straceFlags(this.callbacks.execHoldMs), '-o', this.fifo, '--', file, ...args] };
  }

  /** Call once the wrapped command is spawned; its pid is the traced root, started in `cwd`. */
  start(rootPid: number, cwd = ''): void {
    this.rootPid = rootPid;
    this.post({ t: 'root', pid: rootPid, cwd });
  }

  /** The tracer process itself (or the root before it exec'd): never a kill target of the tree. */
  isTracer(pid: number): boolean {
    if (pid === this.rootPid) return false;
    const argv = readArgv(pid);
    return !!argv && basename(argv[0] ?? '') === basename(this.binary) && argv.includes(this.fifo);
  }

  /**
   * After the traced tree is dead: waits for strace to finish writing and the worker to deliver
   * everything (at most `timeoutMs`; then strace is killed, and after another second the worker is
   * told to give up on the output). Programs strace never saw exit end without a status (a gap).
   */
  finish(timeoutMs: number): Promise<void> {
    this.finishing ??= this.finishNow(timeoutMs);
    return this.finishing;
  }

  private async finishNow(timeoutMs: number): Promise<void> {
    // If strace never opened its output (it failed to start), the worker is blocked opening the
    // FIFO, or about to be (it may still be loading): let it through until it says it opened.
    const unblock = () => {
      if (!this.opened) unblockReader(this.fifo);
    };
    unblock();
    const retry = setInterval(unblock, UNBLOCK_RETRY_MS);
    try {
      if (await settlesWithin(this.done, timeoutMs)) return;
      for (const pid of readAllStats().keys()) if (this.isTracer(pid)) tryKill(pid);
      if (await settlesWithin(this.done, 1000)) return;
      this.post({ t: 'finish' });
      if (!(await settlesWithin(this.done, 2000))) this.callbacks.onGap?.('the process tracer did not finish; process facts after this point are missing');
    } finally {
      clearInterval(retry);
      await this.worker.terminate();
      rmSync(this.dir, { recursive: true, force: true });
    }
  }

  private onMessage(msg: Exclude<FromWorker, { t: 'done' | 'ready' }>): void {
    if (msg.t === 'opened') this.opened = true;
    else if (msg.t === 'gap') this.callbacks.onGap?.(msg.reason, msg.count);
    else {
      const settling: PromiseLike<unknown>[] = [];
      try {
        for (const f of msg.facts) {
          const r = f.k === 'start' ? this.callbacks.onStart?.(f.p) : this.callbacks.onExit?.(f.p);
          if (isPromiseLike(r)) settling.push(r);
        }
      } finally {
        const ack = () => this.ack(msg.bytes);
        if (settling.length) void Promise.allSettled(settling).then(ack);
        else ack();
      }
    }
  }

  private ack(bytes: number): void {
    this.unacked += bytes;
    if (this.unacked < this.ackBytes) return;
    this.post({ t: 'ack', bytes: this.unacked });
    this.unacked = 0;
  }

  private post(msg: ToWorker): void {
    try {
      this.worker.postMessage(msg);
    } catch {
      // the worker is gone: finish() reports what that lost
    }
  }
}

/** Lets a reader blocked in open() of the FIFO return (then read EOF): opens and closes the write end. */
function unblockReader(fifo: string): void {
  try {
    closeSync(openSync(fifo, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK));
  } catch {
    // ENXIO: no reader is blocked in open (not there yet, or already reading); ENOENT: already opened.
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | undefined)?.then === 'function';
}

/** Whether `p` settles within `ms`; `ms` ≤ 0 still gives it a millisecond (p-timeout refuses 0, which finish(0) asks for). */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return pTimeout(p.then(() => true), { milliseconds: Math.max(1, ms), fallback: () => false });
}

function tryKill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
