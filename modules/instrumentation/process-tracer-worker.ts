import { closeSync, constants, open, openSync, readSync, rmSync } from 'node:fs';
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
  intervalMs: number;
  maxPendingBytes: number;
  execHoldMs?: number;
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
/** How soon an empty pipe is read again while nothing waits on the reader. */
const IDLE_POLL_MS = 2;
/**
 * While a process is stopped at its exec until the worker resumes it, or within HOT_AFTER_DATA_MS
 * of strace's last output (an exec's lines come in bursts, and the next exec usually follows within
 * a millisecond), an empty pipe is read again after this long, the worker thread sleeping in between
 * (Atomics.wait) instead of waiting for a timer (1-2 ms): each exec's hold costs the agent a fraction
 * of a millisecond. At most HOT_SLICE_MS at a time, then the worker's event loop runs.
 */
const HOT_POLL_MS = 0.05;
const HOT_AFTER_DATA_MS = 3;
const HOT_SLICE_MS = 20;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

const port = parentPort!;
const { fifo, intervalMs, maxPendingBytes, execHoldMs } = workerData as TracerWorkerData;
const post = (msg: FromWorker) => port.postMessage(msg);

let state: StraceState | undefined;
/** Lines read before the main thread named the root (it does so right after spawn). */
let early: string[] = [];
let batch: TracerFact[] = [];
let batchBytes = 0;
let flushQueued = false;
/** Bytes of facts posted and not yet acknowledged by the main thread. */
let pending = 0;
/** The FIFO's read end, non-blocking; closed once, by whoever finds it idle after `done`. */
let input: number | undefined;
/** When strace's output was last read (performance.now()). */
let lastData = -Infinity;
const readBuffer = Buffer.allocUnsafe(256 * 1024);
let paused = false;
let rest: Buffer = Buffer.alloc(0);
let done = false;

const capturer = new ExecCapturer();
/** sha256 of every file whose bytes went to the main thread: later facts refer to them (keptEarlier). */
const handedOver = new Set<string>();
const hooks: ExecHooks = {
  capture: (pid, path, argv) => capturer.capture(pid, path, argv),
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
  if (!paused && pending > maxPendingBytes && input !== undefined) paused = true; // pump() stops reading
}

function onLine(line: string): void {
  if (state) state.line(line);
  else early.push(line);
}

function onData(chunk: Buffer): void {
  let data = rest.length ? Buffer.concat([rest, chunk]) : chunk;
  let nl: number;
  while ((nl = data.indexOf(0x0a)) !== -1) {
    onLine(data.toString('utf8', 0, nl));
    data = data.subarray(nl + 1);
  }
  rest = Buffer.from(data);
}

/** strace's output ended (`eof`) or the main thread gave up on it (`finish`): final facts, then done. */
function complete(why: 'eof' | 'finish'): void {
  if (done) return;
  done = true;
  clearInterval(timer);
  if (rest.length) onLine(rest.toString('utf8'));
  if (!state) {
    if (early.length) post({ t: 'gap', reason: `${early.length} strace lines arrived for a launch that never started` });
  } else {
    const unseen = state.finish(Date.now());
    if (state.unparsable > 0) post({ t: 'gap', reason: `${state.unparsable} strace output lines could not be parsed`, count: state.unparsable });
    if (unseen > 0) {
      const cause = why === 'eof' ? 'strace stopped' : 'strace output was abandoned';
      post({ t: 'gap', reason: `${cause} before reporting how ${unseen} program(s) ended; they are recorded as ended without status`, count: unseen });
    }
  }
  flush();
  // 'done' lets the main thread terminate this worker: only once the descriptor is closed (reads
  // are synchronous, so none is in flight), so none is left behind.
  closeInput();
}

port.on('message', (msg: ToWorker) => {
  if (msg.t === 'root') {
    state = new StraceState(sink, msg.pid, msg.cwd, process.pid, hooks, execHoldMs);
    const lines = early;
    early = [];
    for (const line of lines) state.line(line);
  } else if (msg.t === 'ack') {
    pending -= msg.bytes;
    if (paused && pending <= maxPendingBytes / 2) {
      paused = false;
      pump();
    }
  } else complete('finish');
});

const timer = setInterval(() => {
  state?.tick(Date.now());
  flush();
}, intervalMs);

// Opening a FIFO for reading blocks until the writer (strace) opens it: done on the threadpool, so
// the main thread's 'finish' (and its unblocking open of the write end) can still arrive. Once the
// open is issued, strace may start: it will not wait for a reader that is still loading.
open(fifo, 'r', (err, blocking) => {
  if (err) {
    post({ t: 'gap', reason: `cannot read strace's output: ${err.message}` });
    return complete('eof');
  }
  // strace holds the write end now. Reads go through a second, non-blocking descriptor: a blocking
  // read of an idle FIFO would hold a threadpool thread (the whole process's) until strace writes,
  // and keep the harness from exiting while the agent lives. (A net.Socket over the descriptor
  // avoided that, but closed it a second time in this thread: EBADF on the harness's own files.)
  try {
    input = done ? undefined : openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  } finally {
    closeSync(blocking);
  }
  if (input === undefined) return;
  post({ t: 'opened' });
  // Both ends are open: the name is no longer needed, and without it nobody else can write in.
  rmSync(dirname(fifo), { recursive: true, force: true });
  pump();
});

/**
 * Reads what strace wrote, synchronously on the non-blocking descriptor (no threadpool round trip);
 * an empty pipe is polled again shortly (see HOT_POLL_MS), end of file completes.
 */
function pump(): void {
  if (input === undefined) return;
  if (done) return closeInput();
  if (paused) return; // resumed by an ack
  const sliceEnd = performance.now() + HOT_SLICE_MS;
  for (;;) {
    let n: number;
    try {
      n = readSync(input, readBuffer, 0, readBuffer.length, null);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') {
        post({ t: 'gap', reason: `reading strace's output failed: ${(err as Error).message}` });
        return complete('eof');
      }
      const t = performance.now();
      const holding = state?.holding(Date.now()) ?? false;
      if (t < sliceEnd && (holding || t - lastData < HOT_AFTER_DATA_MS)) {
        Atomics.wait(sleeper, 0, 0, HOT_POLL_MS);
        continue;
      }
      return void setTimeout(pump, holding ? 0 : IDLE_POLL_MS);
    }
    if (n === 0) return complete('eof'); // strace closed its output: it has exited
    lastData = performance.now();
    onData(Buffer.from(readBuffer.subarray(0, n)));
    return void setImmediate(pump);
  }
}

let closed = false;
function closeInput(): void {
  if (closed) return;
  closed = true;
  if (input !== undefined) closeSync(input);
  input = undefined;
  post({ t: 'done' });
}

post({ t: 'ready' });
