import PQueue from 'p-queue';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { A2rlEvent, EventData, EventType } from '../ledger/events/catalog.js';
import { causedBy, ShellCallIndex } from '../ledger/events/causation.js';
import type { Recorder } from '../ledger/recorder.js';
import { FileWatcher } from './file-watcher.js';
import type { ObservationClock, Observer } from './observer.js';
import { OutputRecorder } from './output-recorder.js';
import type { CapturedFile } from './exec-capture.js';
import { processExitedFact, processStartedFact, type ProcessExit, type ProcessStart } from './process-monitor.js';
import type { RunRecorder } from './run-recorder.js';
import type { LimitReached } from '../ledger/events/catalog.js';
import type { LimitName, RunLimits } from '../sandbox/limits.js';
import { RedactingArtifactStore } from './redacting-artifact-store.js';
import { RunRedaction } from './run-redaction.js';
import type { KnownSecret } from './secret-redactor.js';

export interface InstrumentationOptions {
  /** The workspace root the file observer watches. */
  root: string;
  recorder: RunRecorder;
  /**
   * Values to keep out of the ledger (run token, gateway token, credentials: `knownSecrets()`). Given
   * (even empty), the recorder redacts them and key shapes from every event, and the file watcher and
   * output recorder archive blobs redacted; more can be added later with `redaction.add`.
   */
  secrets?: KnownSecret[];
  artifacts: ArtifactStore;
  clock: ObservationClock;
  /**
   * The run's limits the observers enforce: diskBytes and fileBytes (file watcher),
   * outputBytesPerStream (output recorder). A limit absent (or the whole object) is unlimited.
   */
  limits?: Partial<RunLimits>;
  /** Called once when a limit asks for the agent to be stopped (diskBytes); every limit reached is a LimitReached fact either way. */
  onLimit?: (limit: LimitName, data: LimitReached) => void;
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
    this.redaction = this.redactionOf(opts);
    // Checkpoints are archived by the grading API through the plain store: never redacted.
    const observed = (this.store = this.redaction ? new RedactingArtifactStore(opts.artifacts, this.redaction) : opts.artifacts);
    const gap = (observer: EventData<'ObservationGap'>['observer']) => (reason: string, count?: number) =>
      void this.record('ObservationGap', { observer, reason: reason.slice(0, 4000), ...(count !== undefined ? { count } : {}), observedAt: opts.clock().toISOString() });
    const stop = opts.onLimit;
    const onLimit = stop && ((limit: string, data: LimitReached) => void (limit === 'diskBytes' && stop(limit, data)));
    const { diskBytes, fileBytes, outputBytesPerStream } = opts.limits ?? {};
    this.files = new FileWatcher({ root: opts.root, artifacts: observed, record: opts.recorder.record, onGap: gap('files'), diskBytes, fileBytes, onLimit });
    this.output = new OutputRecorder({ artifacts: observed, record: this.record, clock: opts.clock, maxBytesPerStream: outputBytesPerStream, onLimit });
    this.observers = [this.files, this.output];
    this.onProcessGap = gap('processes');
  }

  /** The store of everything the agent produced (files, output, model calls): redacting when the run has secrets. */
  readonly store: ArtifactStore;

  /** What keeps the run's secrets out of its events and archived blobs (null: nothing is redacted). */
  readonly redaction: RunRedaction | null;

  /** Where the process tracer reports gaps in what it could observe. */
  readonly onProcessGap: (reason: string, count?: number) => void;

  /** Records one event of the run in order, after the file record is brought up to date where needed. */
  readonly record = <T extends EventType>(type: T, data: EventData<T> | (() => Promise<EventData<T>>)): Promise<A2rlEvent> => {
    const barrier = this.barrier(type);
    const queued = this.lane.add(async () => {
      if (barrier) await barrier();
      // Boxed: the lane must not wait for durability, only for the barrier (and data still being made).
      return { stored: this.opts.recorder.record(type, typeof data === 'function' ? await data() : data) };
    });
    const stored = queued.then((q) => q!.stored);
    stored.catch(() => undefined); // fire-and-forget callers: the failure surfaces in settle()
    // A model call's shell commands, noted as it is queued: a process queued after it may have been started by one.
    if (type === 'LlmCallRecorded' && typeof data !== 'function') this.shellCalls.noteCalls(stored, (data as EventData<'LlmCallRecorded'>).toolCalls);
    return stored;
  };

  /**
   * Process tracer callbacks: facts in the order the tracer saw them. The promises go back to the
   * tracer, whose bounded buffer counts a fact as taken once it is durable (its back-pressure).
   */
  readonly processes = {
    onStart: (p: ProcessStart) => this.recordProcessStart(p),
    onExit: (p: ProcessExit) => this.recordProcessExit(p),
    onGap: (reason: string, count?: number) => this.onProcessGap(reason, count),
  };

  /** The shell commands of the run's model calls queued so far (what a process's start is matched to). */
  private readonly shellCalls = new ShellCallIndex();

  /** Each live pid's ProcessStarted as it is stored: what its exit names as its cause. */
  private readonly starts = new Map<number, Promise<A2rlEvent>>();

  /** Content keys of the files processes ran, by original sha256 (each content is stored once per run). */
  private readonly executedKeys = new Map<string, Promise<string | undefined>>();

  /**
   * A ProcessStarted with the files it ran: their bytes (captured at exec) go to the store right
   * away, and the fact takes its place in the lane now, so it stays in the order the tracer saw it;
   * the lane waits for the puts only when it reaches it.
   */
  private recordProcessStart(p: ProcessStart): Promise<A2rlEvent> {
    const files = [p.exe, p.script].filter((f): f is CapturedFile => f !== undefined);
    for (const f of files) if (f.content && f.sha256 && !this.executedKeys.has(f.sha256)) this.executedKeys.set(f.sha256, this.storeExecuted(f.content, f.sha256));
    const keys = Promise.all(files.map(async (f) => [f.sha256, f.sha256 ? await this.executedKeys.get(f.sha256) : undefined] as const));
    // Only calls queued before this start: their place in the lane is ahead of it, so waiting for one to be stored cannot wait for this.
    const callsBefore = this.shellCalls.noted;
    const started = this.record('ProcessStarted', async () => {
      const known = new Map(await keys);
      const fact = processStartedFact(p, (f) => (f.sha256 ? known.get(f.sha256) : undefined));
      const cause = await this.shellCalls.startedBy(fact.argv, callsBefore);
      return cause ? { ...fact, causedBy: cause } : fact;
    });
    this.starts.set(p.pid, started);
    return started;
  }

  /**
   * A ProcessExited naming its start (by pid: the latest start of that pid). The lane waits for the
   * start to be durable only when it reaches the exit — usually long done; for a process that lived
   * less than one append, one batch.
   */
  private recordProcessExit(p: ProcessExit): Promise<A2rlEvent> {
    const start = this.starts.get(p.pid);
    this.starts.delete(p.pid);
    return this.record('ProcessExited', async () => {
      const stored = start ? await start.catch(() => undefined) : undefined;
      return { ...processExitedFact(p), ...causedBy(stored, { pid: p.pid }) };
    });
  }

  /** Stores captured bytes through the run's (redacting) store; undefined when that failed (recorded as 'content not stored'). */
  private async storeExecuted(content: Uint8Array, sha256: string): Promise<string | undefined> {
    try {
      const body = Buffer.from(content.buffer, content.byteOffset, content.byteLength);
      return (await this.store.put(body, { sha256, size: body.byteLength })).key;
    } catch {
      return undefined;
    }
  }

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

  /** The recorder's redaction, extended with `secrets`; one is made (and given to the recorder) if it has none. */
  private redactionOf(opts: InstrumentationOptions): RunRedaction | null {
    const existing = opts.recorder.redaction;
    if (!opts.secrets) return existing ?? null;
    if (existing) {
      existing.add(opts.secrets);
      return existing;
    }
    const redaction = new RunRedaction({ secrets: opts.secrets, clock: opts.clock });
    opts.recorder.redactWith(redaction);
    return redaction;
  }

  private barrier(type: EventType): (() => Promise<void>) | null {
    if (!this.started) return null;
    if (type === 'ProcessStarted') return () => this.files.flush();
    if (type === 'SubmissionReceived') return () => this.files.reconcile();
    return null;
  }
}
