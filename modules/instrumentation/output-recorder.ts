import { createHash } from 'node:crypto';
import PQueue from 'p-queue';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { LimitReached } from '../ledger/events/catalog.js';
import type { Recorder } from '../ledger/recorder.js';
import { systemClock, type ObservationClock, type Observer } from './observer.js';

export type OutputStream = 'stdout' | 'stderr';

export interface OutputRecorderOptions {
  artifacts: ArtifactStore;
  record: Recorder;
  /** A chunk is cut at this size… */
  maxChunkBytes?: number;
  /** …or this long after its first byte arrived, whichever comes first. */
  maxDelayMs?: number;
  /** A chunk's observedAt is when it was cut. */
  clock?: ObservationClock;
  /** Bytes archived per stream (`RunLimits.outputBytesPerStream`); later bytes are counted, not stored. Absent or null: unlimited. */
  maxBytesPerStream?: number | null;
  /** Told once per stream when it reaches `maxBytesPerStream` (the LimitReached fact is recorded in any case). */
  onLimit?: (limit: string, data: LimitReached) => unknown;
}

interface Pending {
  parts: Buffer[];
  size: number;
  timer?: NodeJS.Timeout;
}

/** Bytes of one stream: taken for archiving (stored or pending), and dropped past the limit. */
interface Tally {
  taken: number;
  dropped: number;
}

/**
 * Turns the agent's stdout/stderr into bounded chunks: each chunk goes to the artifact store and is
 * recorded as `AgentOutput`. Chunks of both streams are stored and recorded one at a time, in the
 * order they were cut. Byte boundaries are arbitrary (a chunk may end inside a line or a UTF-8
 * sequence); concatenating a stream's chunks in event order gives its exact bytes.
 *
 * Limit: past `maxBytesPerStream` bytes of a stream, its bytes are counted and let go (nothing is
 * buffered): the first byte over records `LimitReached` (after the stream's last archived chunk),
 * and `stop()` records an `ObservationGap` for observer 'output' whose `count` is the bytes of that
 * stream not archived. The stored chunks are then exactly the stream's first `maxBytesPerStream` bytes.
 */
export class OutputRecorder implements Observer {
  private readonly maxChunkBytes: number;
  private readonly maxDelayMs: number;
  private readonly pending: Record<OutputStream, Pending> = { stdout: { parts: [], size: 0 }, stderr: { parts: [], size: 0 } };
  /** Chunks are stored and recorded one at a time, in the order they were cut. */
  private readonly chunks = new PQueue({ concurrency: 1 });
  private readonly clock: ObservationClock;
  private readonly maxBytes: number;
  private readonly tally: Record<OutputStream, Tally> = { stdout: { taken: 0, dropped: 0 }, stderr: { taken: 0, dropped: 0 } };
  private failure: unknown;
  private stopped = false;

  constructor(private readonly opts: OutputRecorderOptions) {
    this.maxChunkBytes = opts.maxChunkBytes ?? 64 * 1024;
    this.maxDelayMs = opts.maxDelayMs ?? 1000;
    this.clock = opts.clock ?? systemClock;
    this.maxBytes = opts.maxBytesPerStream ?? Infinity;
  }

  /** Nothing to set up: output arrives through `write`. */
  async start(): Promise<void> {}

  /** Matches `launchAgent`'s `onOutput`. */
  readonly write = (stream: OutputStream, chunk: Buffer): void => {
    if (this.stopped) throw new Error('OutputRecorder: write after stop()');
    const tally = this.tally[stream];
    const room = Math.max(0, this.maxBytes - tally.taken);
    const kept = chunk.length <= room ? chunk : chunk.subarray(0, room);
    if (kept.length > 0) {
      tally.taken += kept.length;
      this.buffer(stream, kept);
    }
    if (kept.length < chunk.length) {
      const first = tally.dropped === 0;
      tally.dropped += chunk.length - kept.length;
      if (first) this.reachLimit(stream);
    }
  };

  private buffer(stream: OutputStream, chunk: Buffer): void {
    const p = this.pending[stream];
    p.parts.push(chunk);
    p.size += chunk.length;
    while (p.size >= this.maxChunkBytes) {
      const all = Buffer.concat(p.parts, p.size);
      const end = lineEnd(all, this.maxChunkBytes);
      this.cut(stream, all.subarray(0, end));
      const rest = all.subarray(end);
      p.parts = rest.length > 0 ? [rest] : [];
      p.size = rest.length;
    }
    if (p.size === 0) {
      clearTimeout(p.timer);
      p.timer = undefined;
    } else {
      p.timer ??= setTimeout(() => this.cutPending(stream), this.maxDelayMs);
    }
  }

  /** Cuts whatever is buffered and waits until every chunk so far is stored and recorded. */
  async flush(): Promise<void> {
    this.cutPending('stdout');
    this.cutPending('stderr');
    await this.chunks.onIdle();
    if (this.failure !== undefined) throw this.failure;
  }

  /** Final flush (and the count of bytes not archived); later writes are refused. Rejects with the first storage/recording error, if any. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cutPending('stdout');
    this.cutPending('stderr');
    for (const stream of ['stdout', 'stderr'] as const) {
      const { taken, dropped } = this.tally[stream];
      if (dropped === 0) continue;
      const reason = `${stream}: ${dropped} of its ${taken + dropped} bytes came past the outputBytesPerStream limit of ${this.maxBytes} bytes and were counted, not archived`;
      this.enqueue(() => this.opts.record('ObservationGap', { observer: 'output', reason, count: dropped, observedAt: this.clock().toISOString() }));
    }
    await this.flush();
  }

  /** The stream's first byte over the limit: its last archived chunk is cut, then the fact is recorded. */
  private reachLimit(stream: OutputStream): void {
    this.cutPending(stream);
    const { taken, dropped } = this.tally[stream];
    const data: LimitReached = {
      limit: 'outputBytesPerStream',
      value: taken + dropped,
      max: this.maxBytes,
      scope: stream, // the action (archiving of the stream stopped) is the limit's own: readers name it
      observedAt: this.clock().toISOString(),
    };
    this.enqueue(() => this.opts.record('LimitReached', data));
    try {
      const told = this.opts.onLimit?.('outputBytesPerStream', data);
      if (told instanceof Promise) told.catch((err: unknown) => (this.failure ??= err));
    } catch (err) {
      this.failure ??= err;
    }
  }

  /** Stores and records in the order cut; stops at the first error rather than record with gaps. */
  private enqueue(task: () => Promise<unknown>): void {
    void this.chunks.add(async () => {
      if (this.failure !== undefined) return;
      try {
        await task();
      } catch (err) {
        this.failure = err;
      }
    });
  }

  private cutPending(stream: OutputStream): void {
    const p = this.pending[stream];
    clearTimeout(p.timer);
    p.timer = undefined;
    if (p.size === 0) return;
    const chunk = Buffer.concat(p.parts, p.size);
    p.parts = [];
    p.size = 0;
    this.cut(stream, chunk);
  }

  private cut(stream: OutputStream, chunk: Buffer): void {
    const body = Buffer.from(chunk); // detach from buffers the caller may reuse
    const observedAt = this.clock().toISOString();
    this.enqueue(async () => {
      const sha256 = createHash('sha256').update(body).digest('hex');
      const stored = await this.opts.artifacts.put(body, { sha256, size: body.length });
      await this.opts.record('AgentOutput', { stream, chunk: { sha256, size: body.length, key: stored.key }, observedAt });
    });
  }
}

/** How far back from a full chunk's end a line break is looked for. */
const LINE_SEARCH = 8 * 1024;

/**
 * Where to cut a full chunk: after its last line break when one is near the end, so that a line (a
 * key the agent prints, say) is stored whole in one chunk and the redaction of stored blobs sees it
 * whole; else at the size limit.
 */
function lineEnd(all: Buffer, max: number): number {
  const newline = all.lastIndexOf(0x0a, max - 1);
  return newline >= max - LINE_SEARCH ? newline + 1 : max;
}
