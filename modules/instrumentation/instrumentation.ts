import PQueue from 'p-queue';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { A2rlEvent, EventData, EventType } from '../ledger/events/catalog.js';
import type { Recorder } from '../runs/run-context.js';
import { FileWatcher } from './file-watcher.js';
import type { ObservationClock, Observer } from './observer.js';
import { OutputRecorder } from './output-recorder.js';
import { processExitedFact, processStartedFact, type ProcessExit, type ProcessStart } from './process-monitor.js';
import type { RunRecorder } from './run-recorder.js';

export interface InstrumentationOptions {
  /** The workspace root the file observer watches. */
  root: string;
  recorder: RunRecorder;
  artifacts: ArtifactStore;
  clock: ObservationClock;
}

/**
 * The observers of one run and the order their facts reach the ledger in.
 *
 * File changes go straight to the run recorder. Everything else (processes, output, submissions,
 * lifecycle) goes through one ordered lane, so it is stored in the order it was reported; the lane
 * brings the file record up to date first where a reader will ask "which code was this": before a
 * ProcessStarted the changes already notified are recorded (cheap), before a SubmissionReceived the
 * whole workspace is reconciled. The lane only waits for those barriers, never for the disk: the
 * recorder batches whatever is queued.
 */
export class Instrumentation {
  readonly files: FileWatcher;
  readonly output: OutputRecorder;
  private readonly lane = new PQueue({ concurrency: 1 });
  private readonly observers: Observer[];
  private started = false;

  constructor(private readonly opts: InstrumentationOptions) {
    const gap = (observer: EventData<'ObservationGap'>['observer']) => (reason: string, count?: number) =>
      void this.record('ObservationGap', { observer, reason: reason.slice(0, 4000), ...(count !== undefined ? { count } : {}), observedAt: opts.clock().toISOString() });
    this.files = new FileWatcher({ root: opts.root, artifacts: opts.artifacts, record: opts.recorder.record, onGap: gap('files') });
    this.output = new OutputRecorder({ artifacts: opts.artifacts, record: this.record, clock: opts.clock });
    this.observers = [this.files, this.output];
    this.onProcessGap = gap('processes');
  }

  /** Where the process tracer reports gaps in what it could observe. */
  readonly onProcessGap: (reason: string, count?: number) => void;

  /** Records one event of the run in order, after the file record is brought up to date where needed. */
  readonly record: Recorder = <T extends EventType>(type: T, data: EventData<T>): Promise<A2rlEvent> => {
    const barrier = this.barrier(type);
    const queued = this.lane.add(async () => {
      if (barrier) await barrier();
      // Boxed: the lane must not wait for durability, only for the barrier.
      return { stored: this.opts.recorder.record(type, data) };
    });
    const stored = queued.then((q) => q!.stored);
    stored.catch(() => undefined); // fire-and-forget callers: the failure surfaces in settle()
    return stored;
  };

  /**
   * Process tracer callbacks: facts in the order the tracer saw them. The promises go back to the
   * tracer, whose bounded buffer counts a fact as taken once it is durable (its back-pressure).
   */
  readonly processes = {
    onStart: (p: ProcessStart) => this.record('ProcessStarted', processStartedFact(p)),
    onExit: (p: ProcessExit) => this.record('ProcessExited', processExitedFact(p)),
    onGap: (reason: string, count?: number) => this.onProcessGap(reason, count),
  };

  async start(): Promise<void> {
    for (const observer of this.observers) await observer.start();
    this.started = true;
  }

  /** Stops every observer (final states recorded) and waits until everything is durable. */
  async stop(): Promise<void> {
    let failure: unknown;
    await this.lane.onIdle(); // the agent is gone: its last process facts pass their barriers first
    if (this.started) {
      for (const observer of this.observers) await observer.stop().catch((err: unknown) => (failure ??= err));
    }
    await this.lane.onIdle();
    await this.opts.recorder.settle().catch((err: unknown) => (failure ??= err));
    if (failure !== undefined) throw failure;
  }

  private barrier(type: EventType): (() => Promise<void>) | null {
    if (!this.started) return null;
    if (type === 'ProcessStarted') return () => this.files.flush();
    if (type === 'SubmissionReceived') return () => this.files.reconcile();
    return null;
  }
}
