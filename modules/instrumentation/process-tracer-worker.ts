import { open, closeSync, createReadStream, rmSync, type ReadStream } from 'node:fs';
import { dirname } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import type { ProcessExit, ProcessStart } from './process-monitor.js';
import { StraceState } from './process-tracer-state.js';

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
const { fifo, intervalMs, maxPendingBytes } = workerData as TracerWorkerData;
const post = (msg: FromWorker) => port.postMessage(msg);

let state: StraceState | undefined;
/** Lines read before the main thread named the root (it does so right after spawn). */
let early: string[] = [];
let batch: TracerFact[] = [];
let batchBytes = 0;
let flushQueued = false;
/** Bytes of facts posted and not yet acknowledged by the main thread. */
let pending = 0;
let input: ReadStream | undefined;
let paused = false;
let rest: Buffer = Buffer.alloc(0);
let done = false;

const sink = {
  start: (p: ProcessStart) => queue({ k: 'start', p }, 64 + p.cwd.length + (p.executable?.length ?? 0) + p.argv.reduce((n, a) => n + a.length + 4, 0)),
  exit: (p: ProcessExit) => queue({ k: 'exit', p }, 64),
};

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
  if (!paused && pending > maxPendingBytes && input) {
    paused = true;
    input.pause();
  }
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
  input?.destroy();
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
  // 'done' lets the main thread terminate this worker: only once the socket has closed its
  // descriptor, or a close still pending at termination can hit a number the process reused.
  if (input && !input.closed) input.once('close', () => post({ t: 'done' }));
  else post({ t: 'done' });
}

port.on('message', (msg: ToWorker) => {
  if (msg.t === 'root') {
    state = new StraceState(sink, msg.pid, msg.cwd, process.pid);
    const lines = early;
    early = [];
    for (const line of lines) state.line(line);
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
}, intervalMs);

// Opening a FIFO for reading blocks until the writer (strace) opens it: done on the threadpool, so
// the main thread's 'finish' (and its unblocking open of the write end) can still arrive. Once the
// open is issued, strace may start: it will not wait for a reader that is still loading.
open(fifo, 'r', (err, fd) => {
  if (err) {
    post({ t: 'gap', reason: `cannot read strace's output: ${err.message}` });
    return complete('eof');
  }
  if (done) return closeSync(fd);
  post({ t: 'opened' });
  // Both ends are open: the name is no longer needed, and without it nobody else can write in.
  rmSync(dirname(fifo), { recursive: true, force: true });
  // An fs stream, not a net.Socket over the descriptor: a Socket's pipe handle in a worker thread
  // could close the descriptor a second time when the worker was terminated (seen as EBADF on
  // unrelated files of the harness). Reads wait on the threadpool; the stream closes the fd once.
  input = createReadStream('', { fd, highWaterMark: 256 * 1024 });
  input.on('data', (chunk) => onData(chunk as Buffer));
  input.on('error', (e) => post({ t: 'gap', reason: `reading strace's output failed: ${e.message}` }));
  input.on('close', () => complete('eof'));
});
post({ t: 'ready' });
