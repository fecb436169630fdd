import { closeSync, constants as fsConstants, open, openSync, rmSync, writeSync } from 'node:fs';
import { Socket, type SocketConstructorOpts } from 'node:net';
import { dirname } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import type { ProcessExit, ProcessStart } from './process-monitor.js';
import { ExecCapturer, type CapturedFile } from './exec-capture.js';
import { StraceState, type ExecHooks } from './process-tracer-state.js';

/**
 * The process tracer's worker thread: drains strace's FIFO, runs the state machine and posts the
 * facts to the main thread (protocol in process-tracer.ts). Nothing here waits for the main thread,
 * so a blocked harness event loop never blocks strace, and through strace the agent. The one bound:
 * when more than `maxPendingBytes` of facts are posted but not yet acknowledged, reading stops until
 * the main thread catches up — strace then blocks on the full pipe and the agent slows, but no fact
 * is dropped.
 */

export interface TracerWorkerData {
  fifo: string;
  /** The FIFO's read end, non-blocking, opened by the main thread: this thread owns it from the start (see `input`). */
  inputFd: number;
  intervalMs: number;
  maxPendingBytes: number;
  execHoldMs?: number;
  /** a2rl-trace's control FIFO: each held exec is let go by writing "PID HOLD\n" there. */
  control?: string;
}

export type TracerFact = { k: 'start'; p: ProcessStart } | { k: 'exit'; p: ProcessExit };

export type ToWorker = { t: 'root'; pid: number; cwd: string } | { t: 'ack'; bytes: number } | { t: 'finish' };

export type FromWorker =
  | { t: 'ready' }
  | { t: 'opened' }
  | { t: 'facts'; facts: TracerFact[]; bytes: number }
  | { t: 'gap'; reason: string; count?: number }
  | { t: 'done' };

/** Facts per message: large enough to amortise postMessage, small enough to keep callbacks flowing. */
const MAX_BATCH = 512;

const port = parentPort!;
const { fifo, inputFd, intervalMs, maxPendingBytes, execHoldMs, control } = workerData as TracerWorkerData;
const post = (msg: FromWorker) => port.postMessage(msg);

let state: StraceState | undefined;
/** Lines read before the main thread named the root (it does so right after spawn). */
let early: string[] = [];
let batch: TracerFact[] = [];
let batchBytes = 0;
let flushQueued = false;
/** Bytes of facts posted and not yet acknowledged by the main thread. */
let pending = 0;
/**
 * The FIFO's read end (non-blocking), watched by this thread's event loop (a pipe handle: epoll): it is
 * read as soon as strace writes, without polling, and an idle FIFO holds neither a threadpool thread
 * (a blocking fs read did, and with it the harness's exit while the agent lived) nor this thread's CPU
 * (polling an empty pipe cost ~30 us a wake-up, ~2.5 ms an exec). The socket owns the descriptor and
 * closes it, once. The main thread opened it: Node closes, when a worker thread exits, every
 * descriptor that thread opened with fs and did not close with fs, so a descriptor this thread opened
 * was closed a second time at its exit, by then often a number the harness had reused (a blob being
 * stored lost its descriptor: EBADF, and a model call's record with it). Created paused: with no
 * writer yet, reading would end at once.
 */
let input: Socket | undefined = new Socket({ fd: inputFd, readable: true, writable: false, pauseOnCreate: true } as SocketConstructorOpts);
input.on('error', (e) => {
  if (!done) post({ t: 'gap', reason: `reading strace's output failed: ${e.message}` });
});
/**
 * strace's output ended before this thread read the main thread's 'root' (posted right after the
 * spawn, but a message and the FIFO's end wait in this loop's queue in no set order, and a traced
 * command can be over before a descheduled thread looks): its lines wait for 'root', or 'finish'.
 */
let endedBeforeRoot = false;
input.on('close', () => {
  if (!state && !done) {
    endedBeforeRoot = true; // complete() then finds no socket and says 'done' itself
    input = undefined;
    return;
  }
  complete('eof'); // strace closed its output (it has exited), the read failed, or finish() closed it
  input = undefined;
  post({ t: 'done' });
});
let paused = false;
let rest: Buffer = Buffer.alloc(0);
let done = false;

const capturer = new ExecCapturer();
/** sha256 of every file whose bytes went to the main thread: later facts refer to them (keptEarlier). */
const handedOver = new Set<string>();
const hooks: ExecHooks = {
  capture: (pid, path, argv) => capturer.capture(pid, path, argv),
  captureKnown: (identity, exe) => capturer.captureKnown(identity, exe),
  resume: (pid) => {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // gone (killed while stopped)
    }
  },
};

const sink = {
  start: (p: ProcessStart) => {
    const exe = p.exe && handOver(p.exe);
    const script = p.script && { ...handOver(p.script), via: p.script.via };
    const fact: ProcessStart = { ...p, ...(exe ? { exe } : {}), ...(script ? { script } : {}) };
    const content = (exe?.content?.byteLength ?? 0) + (script?.content?.byteLength ?? 0);
    queue({ k: 'start', p: fact }, 64 + content + p.cwd.length + (p.executable?.length ?? 0) + p.argv.reduce((n, a) => n + a.length + 4, 0));
  },
  exit: (p: ProcessExit) => queue({ k: 'exit', p }, 64),
  gap: (reason: string) => post({ t: 'gap', reason }),
};

/** A captured file's bytes travel to the main thread once per content. */
function handOver(file: CapturedFile): CapturedFile {
  if (!file.content || !file.sha256) return file;
  if (!handedOver.has(file.sha256)) {
    handedOver.add(file.sha256);
    return file;
  }
  const { content: _bytes, ...rest } = file;
  return { ...rest, keptEarlier: true };
}

function queue(fact: TracerFact, bytes: number): void {
  batch.push(fact);
  batchBytes += bytes;
  if (batch.length >= MAX_BATCH) flush();
  else if (!flushQueued) {
    flushQueued = true;
    setImmediate(flush);
  }
}

function flush(): void {
  flushQueued = false;
  if (batch.length === 0) return;
  post({ t: 'facts', facts: batch, bytes: batchBytes });
  pending += batchBytes;
  batch = [];
  batchBytes = 0;
  if (!paused && pending > maxPendingBytes && input !== undefined) {
    paused = true;
    input.pause(); // strace blocks on the full pipe once the socket's buffer is full too
  }
}

function onLine(line: string): void {
  if (!state) {
    early.push(line);
    return;
  }
  state.line(line);
  // Programs learnt by that line's capture: a2rl-trace lets their next execs go at once (exec-capture.ts).
  const known = capturer.takeKnown();
  if (known.length > 0 && controlFd !== undefined) letGo(known.join(''));
  // a2rl-trace holds the process until this line: by now its exec line has been read and captured.
  const held = controlFd !== undefined ? HELD_LINE.exec(line) : null;
  if (held) {
    letGo(`${held[1]} ${held[2]}\n`);
    state.released(Number(held[1]));
  }
}

/**
 * a2rl-trace's control FIFO, opened read-write (so this open never blocks and the tracer, which
 * opens the read end later, sees EOF only once this thread has closed it or is gone) and
 * non-blocking: a full pipe (thousands of processes held at once) queues here instead of blocking
 * the thread that must keep reading the tracer's output. Closing it lets every held process go.
 */
let controlFd: number | undefined = control ? openSync(control, fsConstants.O_RDWR | fsConstants.O_NONBLOCK) : undefined;
const HELD_LINE = /^(\d+)\s+\d+\.\d+\s+--- held at exec (\d+) ---$/;
let unsent = '';

function letGo(record: string): void {
  unsent += record;
  sendLetGo();
}

function sendLetGo(): void {
  if (controlFd === undefined || unsent === '') return;
  try {
    const n = writeSync(controlFd, unsent);
    unsent = unsent.slice(n);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') {
      post({ t: 'gap', reason: `cannot let held processes go: ${(err as Error).message}` });
      closeControl();
    }
  }
}

function closeControl(): void {
  if (controlFd === undefined) return;
  closeSync(controlFd);
  controlFd = undefined;
}

/** libuv reads a stream into buffers of this size: a shorter chunk means the FIFO was emptied. */
const READ_SIZE = 64 * 1024;

function onData(chunk: Buffer): void {
  let data = rest.length ? Buffer.concat([rest, chunk]) : chunk;
  let nl: number;
  while ((nl = data.indexOf(0x0a)) !== -1) {
    onLine(data.toString('utf8', 0, nl));
    data = data.subarray(nl + 1);
  }
  rest = Buffer.from(data);
  // Everything strace wrote before this read is processed (pid pairing waits for that).
  if (chunk.length < READ_SIZE) state?.drained(Date.now());
}

/** strace's output ended (`eof`) or the main thread gave up on it (`finish`): final facts, then done. */
function complete(why: 'eof' | 'finish'): void {
  if (done) return;
  done = true;
  clearInterval(timer);
  if (rest.length) onLine(rest.toString('utf8'));
  if (!state) {
    if (early.length) post({ t: 'gap', reason: `${early.length} tracer lines arrived for a launch that never started` });
  } else {
    const unseen = state.finish(Date.now());
    if (state.unparsable > 0) post({ t: 'gap', reason: `${state.unparsable} process tracer output lines could not be parsed`, count: state.unparsable });
    if (unseen > 0) {
      const cause = why === 'eof' ? 'the process tracer stopped' : "the process tracer's output was abandoned";
      post({ t: 'gap', reason: `${cause} before reporting how ${unseen} program(s) ended; they are recorded as ended without status`, count: unseen });
    }
  }
  flush();
  closeControl(); // anything still held is let go by the tracer
  // 'done' lets the main thread terminate this worker: only once the socket has closed the
  // descriptor, so that no handle is left for the termination to close.
  closeInput();
}

port.on('message', (msg: ToWorker) => {
  if (msg.t === 'root') {
    state = new StraceState(sink, msg.pid, msg.cwd, process.pid, hooks, control ? 'ptrace' : execHoldMs);
    const lines = early;
    early = [];
    for (const line of lines) onLine(line);
    if (endedBeforeRoot) complete('eof');
  } else if (msg.t === 'ack') {
    pending -= msg.bytes;
    if (paused && pending <= maxPendingBytes / 2) {
      paused = false;
      input?.resume();
    }
  } else complete('finish');
});

const timer = setInterval(() => {
  state?.tick(Date.now());
  flush();
  sendLetGo();
}, intervalMs);

// Waiting for the writer: opening the FIFO for reading blocks until strace opens it, done on the
// threadpool so that the main thread's 'finish' (and its unblocking open of the write end) can still
// arrive. Only then is `input` read: before, it would read the end of a FIFO nobody writes yet.
open(fifo, 'r', (err, blocking) => {
  if (err) {
    post({ t: 'gap', reason: `cannot read strace's output: ${err.message}` });
    return complete('eof');
  }
  closeSync(blocking);
  if (done || !input) return;
  input.on('data', onData);
  input.resume();
  post({ t: 'opened' });
  // Both ends are open: the name is no longer needed, and without it nobody else can write in.
  rmSync(dirname(fifo), { recursive: true, force: true });
});

let closed = false;
/** Ends reading: the socket closes its descriptor and then says 'done' (at once when there is none). */
function closeInput(): void {
  if (closed) return;
  closed = true;
  if (input) input.destroy();
  else post({ t: 'done' });
}

post({ t: 'ready' });
