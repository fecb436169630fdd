import { createHash } from 'node:crypto';
import PQueue from 'p-queue';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { Recorder } from '../runs/run-context.js';
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
}

interface Pending {
  parts: Buffer[];
  size: number;
  timer?: NodeJS.Timeout;
}

/**
 * Turns the agent's stdout/stderr into bounded chunks: each chunk goes to the artifact store and is
 * recorded as `AgentOutput`. Chunks of both streams are stored and recorded one at a time, in the
 * order they were cut. Byte boundaries are arbitrary (a chunk may end inside a line or a UTF-8
 * sequence); concatenating a stream's chunks in event order gives its exact bytes.
 */
export class OutputRecorder implements Observer {
  private readonly maxChunkBytes: number;
  private readonly maxDelayMs: number;
  private readonly pending: Record<OutputStream, Pending> = { stdout: { parts: [], size: 0 }, stderr: { parts: [], size: 0 } };
  /** Chunks are stored and recorded one at a time, in the order they were cut. */
  private readonly chunks = new PQueue({ concurrency: 1 });
  private readonly clock: ObservationClock;
  private failure: unknown;
  private stopped = false;

  constructor(private readonly opts: OutputRecorderOptions) {
    this.maxChunkBytes = opts.maxChunkBytes ?? 64 * 1024;
    this.maxDelayMs = opts.maxDelayMs ?? 1000;
    this.clock = opts.clock ?? systemClock;
  }

  /** Nothing to set up: output arrives through `write`. */
  async start(): Promise<void> {}

  /** Matches `launchAgent`'s `onOutput`. */
  readonly write = (stream: OutputStream, chunk: Buffer): void => {
    if (this.stopped) throw new Error('OutputRecorder: write after stop()');
    const p = this.pending[stream];
    p.parts.push(chunk);
    p.size += chunk.length;
    while (p.size >= this.maxChunkBytes) {
      const all = Buffer.concat(p.parts, p.size);
      this.cut(stream, all.subarray(0, this.maxChunkBytes));
      const rest = all.subarray(this.maxChunkBytes);
      p.parts = rest.length > 0 ? [rest] : [];
      p.size = rest.length;
    }
    if (p.size === 0) {
      clearTimeout(p.timer);
      p.timer = undefined;
    } else {
      p.timer ??= setTimeout(() => this.cutPending(stream), this.maxDelayMs);
    }
  };

  /** Cuts whatever is buffered and waits until every chunk so far is stored and recorded. */
  async flush(): Promise<void> {
    this.cutPending('stdout');
    this.cutPending('stderr');
    await this.chunks.onIdle();
    if (this.failure !== undefined) throw this.failure;
  }

  /** Final flush; later writes are refused. Rejects with the first storage/recording error, if any. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.flush();
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
    void this.chunks.add(async () => {
      if (this.failure !== undefined) return; // stop at the first error rather than record with gaps
      try {
        const sha256 = createHash('sha256').update(body).digest('hex');
        const stored = await this.opts.artifacts.put(body, { sha256, size: body.length });
        await this.opts.record('AgentOutput', { stream, chunk: { sha256, size: body.length, key: stored.key }, observedAt });
      } catch (err) {
        this.failure = err;
      }
    });
  }
}
