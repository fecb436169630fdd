import PQueue from 'p-queue';
import type { A2rlEvent, EventData, EventType } from '../ledger/events/catalog.js';
import type { RunRedaction } from './run-redaction.js';

/** What the run recorder needs of the ledger: an atomic append of several events of one run. */
export interface RunLedger {
  recordMany(runId: string, items: Array<[EventType, EventData<EventType>]>): Promise<A2rlEvent[]>;
}

/** Something that wants to see every event once it is durable, in seq order (the signer, the tally). */
export type EventListener = (event: A2rlEvent) => void;

export interface RunRecorderOptions {
  runId: string;
  ledger: RunLedger;
  /**
   * Wraps each batch append (the tree-head signer holds appends back while it signs a head and
   * feeds the stored events to its Merkle tree). Default: the append itself.
   */
  append?: (append: () => Promise<A2rlEvent[]>) => Promise<A2rlEvent[]>;
  /** Checks an event before it is queued (the lifecycle rules); throws to refuse it. */
  guard?: (type: EventType, data: EventData<EventType>) => void;
  /** Most events appended in one transaction (default 500). */
  maxBatch?: number;
  /** Keeps the run's secrets out of every event recorded here (see `redactWith`). */
  redaction?: RunRedaction;
}

/** The run's last events: nothing but tree heads may follow them, so their SecretRedacted facts go first. */
const CLOSING = new Set<EventType>(['RunCompleted', 'RunInterrupted']);

interface Pending {
  item: [EventType, EventData<EventType>];
  resolve: (event: A2rlEvent) => void;
  reject: (err: unknown) => void;
}

/**
 * The one ordered writer of a run's events. Events are stored in the order `record` was called,
 * whoever called it (observers, the grading API, the run service). Calls made while a batch is
 * being appended are gathered and appended together in the next one — one transaction and one
 * fsync for a burst of thousands of observations, instead of one each — so observers never wait
 * for the disk one event at a time. `record` resolves once its event is durable.
 *
 * A failed append fails the events of that batch (and is kept as the run's recording error); later
 * events are still attempted, since the ledger rereads its head after an error.
 */
export class RunRecorder {
  private readonly queued: Pending[] = [];
  private readonly writer = new PQueue({ concurrency: 1 });
  private readonly listeners: EventListener[] = [];
  private readonly maxBatch: number;
  private failure: unknown;
  private redactionInUse: RunRedaction | undefined;

  constructor(private readonly opts: RunRecorderOptions) {
    this.maxBatch = opts.maxBatch ?? 500;
    this.redactionInUse = opts.redaction;
  }

  /** What keeps secrets out of this run's events, if anything does. */
  get redaction(): RunRedaction | undefined {
    return this.redactionInUse;
  }

  /**
   * Redacts every event recorded from now on (set before the first one): secrets and key shapes in
   * the data are replaced, blob references follow blobs stored redacted, and each redaction is
   * recorded as a SecretRedacted fact queued right after its event (before it for RunCompleted and
   * RunInterrupted, which end the run).
   */
  redactWith(redaction: RunRedaction): void {
    this.redactionInUse = redaction;
  }

  /** Called with every event once it is durable, in seq order. */
  onRecorded(listener: EventListener): void {
    this.listeners.push(listener);
  }

  /** Queues one event of the run; resolves with the stored event once it is durable. */
  readonly record = <T extends EventType>(type: T, data: EventData<T>): Promise<A2rlEvent> => {
    let items: Array<[EventType, EventData<EventType>]>;
    let main: number;
    try {
      ({ items, main } = this.withFacts(type, data));
      // The guard judges each event in the order it is stored.
      for (const [t, d] of items) this.opts.guard?.(t, d);
    } catch (err) {
      // A refused event is a harness bug: the run must not close as if all were recorded.
      this.failure ??= err;
      return Promise.reject(err);
    }
    const stored = items.map((item) => {
      const queued = new Promise<A2rlEvent>((resolve, reject) => this.queued.push({ item, resolve, reject }));
      // Observers often record without waiting; a failure is still seen by settle(), so it must not
      // also surface as an unhandled rejection.
      queued.catch(() => undefined);
      return queued;
    });
    // One drain per call, but a drain that finds the queue empty does nothing: a burst collapses
    // into as few batches as the appends take turns.
    void this.writer.add(() => this.drain());
    return stored[main];
  };

  /**
   * The event as it may be stored, with its SecretRedacted facts (after it, or before a closing
   * event); `main` is the event's index among them.
   */
  private withFacts<T extends EventType>(type: T, data: EventData<T>): { items: Array<[EventType, EventData<EventType>]>; main: number } {
    if (!this.redactionInUse) return { items: [[type, data as EventData<EventType>]], main: 0 };
    const redacted = this.redactionInUse.redactEvent(type, data);
    const event: [EventType, EventData<EventType>] = [type, redacted.data as EventData<EventType>];
    const facts = redacted.facts.map((f): [EventType, EventData<EventType>] => ['SecretRedacted', f]);
    return CLOSING.has(type) ? { items: [...facts, event], main: facts.length } : { items: [event, ...facts], main: 0 };
  }

  /** Events queued and not yet durable. */
  get backlog(): number {
    return this.queued.length + this.writer.pending;
  }

  /** Waits until everything recorded so far is durable; throws the first recording error of the run. */
  async settle(): Promise<void> {
    await this.writer.onIdle();
    if (this.failure !== undefined) throw this.failure;
  }

  private async drain(): Promise<void> {
    while (this.queued.length > 0) {
      const batch = this.queued.splice(0, this.maxBatch);
      const append = () => this.opts.ledger.recordMany(this.opts.runId, batch.map((p) => p.item));
      let events: A2rlEvent[];
      try {
        events = await (this.opts.append ? this.opts.append(append) : append());
      } catch (err) {
        this.failure ??= err;
        for (const p of batch) p.reject(err);
        continue;
      }
      events.forEach((event, i) => {
        for (const listener of this.listeners) listener(event);
        batch[i].resolve(event);
      });
    }
  }
}
