import { firstRevision, isStoredAlready, lastRevision, prepareAppend } from '../../modules/ledger/append-rules.js';
import { EventStoreUnavailableError, WrongExpectedRevisionError } from '../../modules/ledger/errors.js';
import type {
  AppendResult,
  EventStore,
  ExpectedRevision,
  ReadAllOptions,
  ReadStreamOptions,
  RecordedEvent,
  Subscription,
} from '../../modules/ledger/event-store.port.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { decodeEvent } from '../../modules/ledger/events/envelope.js';
import { CAMPAIGN_STREAM_PREFIX, RUN_STREAM_PREFIX } from '../../modules/ledger/events/ids.js';

interface StoredRow {
  stream: string;
  revision: bigint;
  id: string;
  /** Canonical bytes as appended; copied out on every read so no reader can alter the ledger. */
  data: Buffer;
}

/**
 * The storage behind one or more MemoryEventStore instances: the all-stream is an array in commit
 * order, and a row's position is its 1-based index. Several stores opened on the same ledger see
 * each other's appends, as several processes do on one SQLite file.
 */
let ledgersMade = 0;

export class MemoryLedger {
  /** This process's number for the ledger (its identity: nothing outlives the process). */
  readonly id = ++ledgersMade;
  /** @internal */ readonly rows: StoredRow[] = [];
  /** @internal Row indexes of each stream, in revision order (index i holds revision i). */
  readonly streams = new Map<string, number[]>();
  /** @internal Wakes live subscriptions of every store on this ledger after each commit. */
  readonly waiters = new Set<() => void>();

  /** Number of events stored (all streams). */
  get size(): number {
    return this.rows.length;
  }
}

/**
 * In-memory EventStore for unit tests and throwaway runs, with the exact semantics of the durable
 * adapters (same contract suite): the shared append rules, exact expected revisions, dedupe of
 * retried appends by id and canonical bytes, canonical bytes kept as stored and decoded (upcast) on
 * every read, gap-free `readAll` in commit order (run or campaign streams), catch-up-then-live
 * subscriptions (run streams).
 *
 * An append commits synchronously inside `append()` (JavaScript runs one append at a time), so
 * racing writers get exactly one winner, like a transaction would give them. Nothing survives the
 * process: positions are only meaningful for the ledger that issued them.
 */
export class MemoryEventStore implements EventStore {
  readonly backend = 'memory' as const;

  private closed = false;
  private readonly subscriptions = new Set<MemorySubscription>();

  /** A store on `ledger` (a fresh, private one when omitted). */
  constructor(readonly ledger: MemoryLedger = new MemoryLedger()) {}

  append(stream: string, events: readonly A2rlEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    try {
      const bytes = prepareAppend(stream, events, expected);
      this.assertOpen();
      return Promise.resolve(this.commit(stream, events, bytes, expected));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    this.assertOpen();
    const indexes = this.ledger.streams.get(stream) ?? [];
    const from = Number(options.fromRevision ?? 0n);
    const to = Math.min(indexes.length, from + (options.maxCount ?? Infinity));
    for (let revision = from; revision < to; revision++) {
      this.assertOpen();
      yield toRecorded(this.ledger.rows[indexes[revision]], indexes[revision]);
    }
  }

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    this.assertOpen();
    const after = parsePosition(options.after, this.ledger);
    const prefix = options.category === 'campaign' ? CAMPAIGN_STREAM_PREFIX : RUN_STREAM_PREFIX;
    // Bounded by the end at the time of the call: a reader that appends while it reads still ends.
    const end = this.ledger.rows.length;
    let left = options.maxCount ?? Infinity;
    for (let i = after; i < end && left > 0; i++) {
      this.assertOpen();
      if (!this.ledger.rows[i].stream.startsWith(prefix)) continue;
      left -= 1;
      yield toRecorded(this.ledger.rows[i], i);
    }
  }

  subscribeAll(options: { after?: string | null } = {}): Subscription {
    this.assertOpen();
    const sub = new MemorySubscription(this.ledger, parsePosition(options.after, this.ledger), () => this.subscriptions.delete(sub));
    this.subscriptions.add(sub);
    return sub;
  }

  async identity(): Promise<string> {
    return `memory:${process.pid}:${this.ledger.id}`;
  }

  async streamRevision(stream: string): Promise<bigint | null> {
    this.assertOpen();
    const indexes = this.ledger.streams.get(stream);
    return indexes === undefined ? null : BigInt(indexes.length - 1);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
  }

  /** Checks the head and writes, or dedupes a retry; runs without yielding, so it is atomic. */
  private commit(stream: string, events: readonly A2rlEvent[], bytes: Buffer[], expected: ExpectedRevision): AppendResult {
    const indexes = this.ledger.streams.get(stream);
    const actual = indexes === undefined ? null : BigInt(indexes.length - 1);
    const first = firstRevision(expected);
    const last = lastRevision(expected, events.length);
    if (actual !== (expected === 'no_stream' ? null : expected)) {
      const stored = (indexes ?? []).slice(Number(first), Number(last) + 1).map((i) => this.ledger.rows[i]);
      if (!isStoredAlready(stored, events, bytes)) throw new WrongExpectedRevisionError(stream, expected, actual);
      return { nextExpectedRevision: last, position: positionOf(indexes![Number(last)]), deduplicated: true };
    }
    const own = indexes ?? [];
    if (indexes === undefined) this.ledger.streams.set(stream, own);
    events.forEach((event, i) => {
      own.push(this.ledger.rows.length);
      // A copy: the buffer prepareAppend returns may be the one cached for the (frozen) event object.
      this.ledger.rows.push({ stream, revision: first + BigInt(i), id: event.id, data: Buffer.from(bytes[i]) });
    });
    for (const wake of [...this.ledger.waiters]) wake();
    return { nextExpectedRevision: last, position: positionOf(this.ledger.rows.length - 1), deduplicated: false };
  }

  private assertOpen(): void {
    if (this.closed) throw new EventStoreUnavailableError('memory', 'the store is closed');
  }
}

/** Catch-up then live: walks the ledger from the checkpoint and waits for the next commit at its end. */
class MemorySubscription implements Subscription {
  private closed = false;
  private wake: (() => void) | null = null;
  private readonly iterator: AsyncGenerator<RecordedEvent>;

  constructor(
    private readonly ledger: MemoryLedger,
    private next: number,
    private readonly onClose: () => void,
  ) {
    this.iterator = this.run();
  }

  [Symbol.asyncIterator](): AsyncIterator<RecordedEvent> {
    return this.iterator;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.wake?.(); // a next() waiting for new events resolves done
    await this.iterator.return(undefined);
    this.onClose(); // the generator's finally does not run when it was never started
  }

  private async *run(): AsyncGenerator<RecordedEvent> {
    try {
      while (!this.closed) {
        if (this.next < this.ledger.rows.length) {
          const index = this.next++;
          // Run streams only (campaign streams are read with readAll's campaign category).
          if (this.ledger.rows[index].stream.startsWith(RUN_STREAM_PREFIX)) yield toRecorded(this.ledger.rows[index], index);
          continue;
        }
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          this.ledger.waiters.add(resolve);
        });
        if (this.wake) this.ledger.waiters.delete(this.wake);
        this.wake = null;
      }
    } finally {
      this.closed = true;
      if (this.wake) {
        this.ledger.waiters.delete(this.wake);
        this.wake();
      }
      this.onClose();
    }
  }
}

/** Positions are the 1-based index of the row in the ledger, in decimal (opaque to callers). */
function positionOf(index: number): string {
  return String(index + 1);
}

/** Index of the first row after `position`; refuses anything this ledger has not issued. */
function parsePosition(position: string | null | undefined, ledger: MemoryLedger): number {
  if (position === null || position === undefined) return 0;
  const n = /^[1-9]\d{0,15}$/.test(position) ? Number(position) : NaN;
  if (!(n <= ledger.rows.length)) {
    throw new RangeError(`"${position}" is not a position of this memory event store (positions are opaque: pass back only what the store returned)`);
  }
  return n;
}

function toRecorded(row: StoredRow, index: number): RecordedEvent {
  return { stream: row.stream, revision: row.revision, position: positionOf(index), event: decodeEvent(row.data), bytes: Buffer.from(row.data) };
}

/**
 * Ledgers opened by name through `openEventStore('memory://<name>')`: every open of the same name in
 * this process shares one ledger, so the app's writer and its projection runner see the same
 * events. A ledger lives as long as the process; `memory://` with no name is always a fresh one.
 */
const named = new Map<string, MemoryLedger>();

export function openMemoryEventStore(name: string): MemoryEventStore {
  if (!name) return new MemoryEventStore();
  let ledger = named.get(name);
  if (!ledger) named.set(name, (ledger = new MemoryLedger()));
  return new MemoryEventStore(ledger);
}
