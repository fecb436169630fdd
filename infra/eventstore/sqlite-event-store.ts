import { mkdirSync, realpathSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { openWhileLocked } from '../sqlite/open-retry.js';
import { firstRevision, isStoredAlready, lastRevision, prepareAppend } from '../../modules/ledger/append-rules.js';
import { EventStoreUnavailableError, WrongExpectedRevisionError } from '../../modules/ledger/errors.js';
import type {
  AppendResult,
  EventStore,
  ExpectedRevision,
  ReadAllOptions,
  ReadStreamOptions,
  RecordedEvent,
  StoredEvent,
  Subscription,
} from '../../modules/ledger/event-store.port.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { decodeEvent } from '../../modules/ledger/events/envelope.js';

/** Rows per read query: bounds memory for huge runs and keeps each read snapshot short. */
const PAGE_SIZE = 500;
/** Appends written in one group-commit transaction at most. */
const MAX_BATCH = 1000;
/** How often a live subscription looks for events committed by other processes. */
const POLL_MS = 250;
const BUSY_TIMEOUT_MS = 5000;

// Errors that mean the database (file, disk, lock) is unusable rather than that one append is wrong.
const UNAVAILABLE_CODES = /^SQLITE_(FULL|IOERR|BUSY|LOCKED|CANTOPEN|READONLY|CORRUPT|NOTADB|NOMEM|PROTOCOL|PERM)/;

interface PendingAppend {
  stream: string;
  events: readonly A2rlEvent[];
  bytes: Buffer[];
  expected: ExpectedRevision;
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

/** An all-stream row: position, stream, revision, data. */
type AllRow = [number, string, number, Buffer];

type Outcome = { ok: AppendResult } | { error: unknown };

interface EventRow {
  position: number;
  stream: string;
  revision: number;
  data: Buffer;
  /** Selected by stream reads only (RecordedEvent.stored). */
  id?: string;
  type?: string;
}

/**
 * The embedded EventStore: one SQLite file in WAL mode with `synchronous=FULL`, so an acknowledged
 * append has been fsynced. Concurrent appends are group-committed: everything queued before the
 * next `setImmediate` is written in one `BEGIN IMMEDIATE` transaction (one fsync), each append
 * checked on its own inside it, so one conflict never fails its neighbours.
 *
 * Positions are the table's rowid in decimal. With SQLite's single writer, rowid order is commit
 * order, which makes `readAll` gap-free. Callers must treat positions as opaque.
 */
export class SqliteEventStore implements EventStore {
  readonly backend = 'sqlite' as const;

  private readonly queue: PendingAppend[] = [];
  private drainScheduled = false;
  private closed = false;
  private readonly committed = { transactions: 0, appends: 0 };
  /** Wakes live subscriptions after each commit made through this instance. */
  private readonly waiters = new Set<() => void>();
  private readonly subscriptions = new Set<SqliteSubscription>();

  private readonly headStmt = this.db.prepare<[string], { revision: number }>(
    'SELECT revision FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1',
  );
  private readonly rangeStmt = this.db.prepare<[string, number, number], { position: number; id: string; data: Buffer }>(
    'SELECT position, id, data FROM events WHERE stream = ? AND revision BETWEEN ? AND ? ORDER BY revision',
  );
  private readonly insertStmt = this.db.prepare<[string, number, string, string, Buffer]>(
    'INSERT INTO events (stream, revision, id, type, data) VALUES (?, ?, ?, ?, ?)',
  );
  private readonly streamPageStmt = this.db.prepare<[string, number, number], EventRow>(
    'SELECT position, stream, revision, data, id, type FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?',
  );
  private readonly storedPageStmt = this.db
    .prepare<[string, number, number], [number, Buffer, string, string]>('SELECT revision, data, id, type FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?')
    .raw(true);
  // GLOB rather than LIKE: case-sensitive, and '_' is not a wildcard. The unary `+` keeps SQLite
  // from using the (stream, revision) index for the filter, so it walks the primary key in order
  // instead of re-sorting every page.
  // Rows as arrays (`raw`): the all-stream is what a rebuild reads, and arrays cost less to build
  // than objects with named keys, row after row.
  private readonly allPageStmt = this.db
    .prepare<[number, number], AllRow>("SELECT position, stream, revision, data FROM events WHERE position > ? AND +stream GLOB 'run-*' ORDER BY position LIMIT ?")
    .raw(true);
  // Campaign streams are a sliver of the ledger: this one walks the partial index events_campaign
  // (its WHERE must match the index's word for word), not the run events in between.
  private readonly campaignPageStmt = this.db
    .prepare<[number, number], AllRow>("SELECT position, stream, revision, data FROM events WHERE position > ? AND stream GLOB 'campaign-*' ORDER BY position LIMIT ?")
    .raw(true);
  // Nested use of a better-sqlite3 transaction function runs in a SAVEPOINT: a failing insert undoes
  // only its own append, never its neighbours in the batch.
  private readonly insertAll = this.db.transaction((p: PendingAppend): number => {
    const first = Number(firstRevision(p.expected));
    let position = 0;
    p.events.forEach((event, i) => {
      position = Number(this.insertStmt.run(p.stream, first + i, event.id, event.type, p.bytes[i]).lastInsertRowid);
    });
    return position;
  });
  private readonly writeBatch = this.db.transaction((batch: PendingAppend[]): Outcome[] =>
    batch.map((p) => {
      try {
        return { ok: this.appendInTransaction(p) };
      } catch (error) {
        if (isUnavailable(error)) throw error; // the whole batch rolls back; nothing is acknowledged
        return { error };
      }
    }),
  );

  private constructor(private readonly db: Database.Database) {}

  /** The database file's real path (one file is one ledger). */
  async identity(): Promise<string> {
    return `sqlite:${realpathSync(this.db.name)}`;
  }

  /** Opens (creating if needed, parent directories included) the ledger database at `file`. */
  static async open(file: string): Promise<SqliteEventStore> {
    try {
      mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
      return new SqliteEventStore(await openWhileLocked(async () => SqliteEventStore.openDatabase(file)));
    } catch (error) {
      throw new EventStoreUnavailableError('sqlite', `cannot open ${file}: ${(error as Error).message}`, { cause: error });
    }
  }

  /** One try at opening `file` in WAL with the events table; a process opening it at the same time can make it fail as locked. */
  private static openDatabase(file: string): Database.Database {
    let db: Database.Database | undefined;
    try {
      db = new Database(file);
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      const mode = db.pragma('journal_mode = WAL', { simple: true });
      if (mode !== 'wal') throw new Error(`journal_mode is "${String(mode)}", WAL is required (an on-disk file, not :memory:)`);
      db.pragma('synchronous = FULL');
      db.exec(`CREATE TABLE IF NOT EXISTS events (
        position INTEGER PRIMARY KEY,
        stream   TEXT    NOT NULL,
        revision INTEGER NOT NULL,
        id       TEXT    NOT NULL UNIQUE,
        type     TEXT    NOT NULL,
        data     BLOB    NOT NULL,
        UNIQUE (stream, revision)
      ) STRICT`);
      db.exec(`CREATE INDEX IF NOT EXISTS events_campaign ON events (position) WHERE stream GLOB 'campaign-*'`);
      return db;
    } catch (error) {
      db?.close();
      throw error;
    }
  }

  /** Write transactions committed and appends acknowledged by this instance (group commit shows as appends > transactions). */
  stats(): { transactions: number; appends: number } {
    return { ...this.committed };
  }

  append(stream: string, events: readonly A2rlEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    let bytes: Buffer[];
    try {
      bytes = prepareAppend(stream, events, expected);
      this.assertOpen();
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ stream, events, bytes, expected, resolve, reject });
      if (!this.drainScheduled) {
        this.drainScheduled = true;
        setImmediate(() => this.drain());
      }
    });
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    let from = Number(options.fromRevision ?? 0n);
    let left = options.maxCount ?? Infinity;
    while (left > 0) {
      const rows = this.query(() => this.streamPageStmt.all(stream, from, Math.min(PAGE_SIZE, left)));
      for (const row of rows) yield toRecorded(row);
      if (rows.length < PAGE_SIZE) return;
      from = rows[rows.length - 1].revision + 1;
      left -= rows.length;
    }
  }

  async *readStreamStored(stream: string, options: ReadStreamOptions = {}): AsyncIterable<StoredEvent> {
    let from = Number(options.fromRevision ?? 0n);
    let left = options.maxCount ?? Infinity;
    while (left > 0) {
      const rows = this.query(() => this.storedPageStmt.all(stream, from, Math.min(PAGE_SIZE, left)));
      for (const [revision, bytes, id, type] of rows) yield { stream, revision: BigInt(revision), bytes, stored: { id, type } };
      if (rows.length < PAGE_SIZE) return;
      from = rows[rows.length - 1][0] + 1;
      left -= rows.length;
    }
  }

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    for await (const page of this.readAllPages(options)) for (const recorded of page) yield recorded;
  }

  async *readAllPages(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent[]> {
    let after = parsePosition(options.after);
    let left = options.maxCount ?? Infinity;
    const page = options.category === 'campaign' ? this.campaignPageStmt : this.allPageStmt;
    while (left > 0) {
      const rows = this.query(() => page.all(after, Math.min(PAGE_SIZE, left)));
      if (rows.length) yield rows.map(fromAllRow);
      if (rows.length < PAGE_SIZE) return;
      after = rows[rows.length - 1][0];
      left -= rows.length;
    }
  }

  subscribeAll(options: { after?: string | null } = {}): Subscription {
    const sub = new SqliteSubscription(this, parsePosition(options.after), () => this.subscriptions.delete(sub));
    this.subscriptions.add(sub);
    return sub;
  }

  async streamRevision(stream: string): Promise<bigint | null> {
    const head = this.query(() => this.headStmt.get(stream));
    return head === undefined ? null : BigInt(head.revision);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.drain(); // appends already accepted are written (or rejected) before the file closes
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    this.db.close();
  }

  /** @internal One page of the run streams after `position` (what subscriptions read). */
  page(after: number, limit: number): AllRow[] {
    return this.query(() => this.allPageStmt.all(after, limit));
  }

  /** @internal Resolves on the next commit by this instance, or after `ms` (to see other processes' commits). */
  waitForCommit(ms: number): { promise: Promise<void>; cancel(): void } {
    let wake!: () => void;
    const promise = new Promise<void>((resolve) => (wake = resolve));
    const timer = setTimeout(() => wake(), ms);
    const waiter = () => wake();
    this.waiters.add(waiter);
    void promise.then(() => {
      clearTimeout(timer);
      this.waiters.delete(waiter);
    });
    return { promise, cancel: waiter };
  }

  /** Writes queued appends in batches of up to MAX_BATCH, one transaction (one fsync) per batch. */
  private drain(): void {
    this.drainScheduled = false;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, MAX_BATCH);
      let outcomes: Outcome[];
      try {
        this.assertOpen();
        outcomes = this.writeBatch.immediate(batch);
      } catch (error) {
        const failure = toUnavailable(error, `append batch of ${batch.length} failed and was rolled back`);
        for (const p of batch) p.reject(failure);
        continue;
      }
      this.committed.transactions += 1;
      outcomes.forEach((outcome, i) => {
        if ('ok' in outcome) {
          this.committed.appends += 1;
          batch[i].resolve(outcome.ok);
        } else {
          batch[i].reject(outcome.error);
        }
      });
      for (const wake of [...this.waiters]) wake();
    }
  }

  /** Checks one append against the stream head read inside the write transaction, then inserts or dedupes. */
  private appendInTransaction(p: PendingAppend): AppendResult {
    const head = this.headStmt.get(p.stream);
    const actual = head === undefined ? null : BigInt(head.revision);
    const atExpected = p.expected === 'no_stream' ? actual === null : actual === p.expected;
    const first = firstRevision(p.expected);
    const last = lastRevision(p.expected, p.events.length);
    if (atExpected) {
      // One INSERT is atomic on its own; only multi-event appends pay for a SAVEPOINT.
      const position =
        p.events.length === 1
          ? Number(this.insertStmt.run(p.stream, Number(first), p.events[0].id, p.events[0].type, p.bytes[0]).lastInsertRowid)
          : this.insertAll(p);
      return { nextExpectedRevision: last, position: String(position), deduplicated: false };
    }
    // A retry of an append that already committed: same ids and bytes at the same revisions.
    const stored = this.rangeStmt.all(p.stream, Number(first), Number(last));
    if (!isStoredAlready(stored, p.events, p.bytes)) throw new WrongExpectedRevisionError(p.stream, p.expected, actual);
    return { nextExpectedRevision: last, position: String(stored[stored.length - 1].position), deduplicated: true };
  }

  private query<T>(read: () => T): T {
    this.assertOpen();
    try {
      return read();
    } catch (error) {
      throw toUnavailable(error, 'read failed');
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new EventStoreUnavailableError('sqlite', `the store for ${this.db.name} is closed`);
  }
}

/** Catch-up then live over the all-stream; tracks the last delivered position, so no gap and no duplicate. */
class SqliteSubscription implements Subscription {
  private closed = false;
  private pendingWait: { cancel(): void } | null = null;
  private readonly iterator: AsyncGenerator<RecordedEvent>;

  constructor(
    private readonly store: SqliteEventStore,
    private after: number,
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
    this.pendingWait?.cancel(); // a next() waiting for new events resolves done
    await this.iterator.return(undefined);
  }

  private async *run(): AsyncGenerator<RecordedEvent> {
    try {
      while (!this.closed) {
        const rows = this.store.page(this.after, PAGE_SIZE);
        for (const row of rows) {
          if (this.closed) return;
          this.after = row[0];
          yield fromAllRow(row);
        }
        if (rows.length === PAGE_SIZE || this.closed) continue;
        const wait = this.store.waitForCommit(POLL_MS);
        this.pendingWait = wait;
        await wait.promise;
        this.pendingWait = null;
      }
    } finally {
      this.closed = true;
      this.pendingWait?.cancel();
      this.onClose();
    }
  }
}

function toRecorded(row: EventRow): RecordedEvent {
  const stored = row.type === undefined ? {} : { stored: { id: row.id!, type: row.type } };
  return { stream: row.stream, revision: BigInt(row.revision), position: String(row.position), event: decodeEvent(row.data), bytes: row.data, ...stored }; // the driver's own Buffer, one per row: no copy
}

function fromAllRow([position, stream, revision, data]: AllRow): RecordedEvent {
  return { stream, revision: BigInt(revision), position: String(position), event: decodeEvent(data), bytes: data }; // the driver's own Buffer: no copy
}

function parsePosition(position: string | null | undefined): number {
  if (position === null || position === undefined) return 0;
  if (!/^(0|[1-9]\d{0,15})$/.test(position)) {
    throw new RangeError(`"${position}" is not a position of the sqlite event store (positions are opaque: pass back only what the store returned)`);
  }
  return Number(position);
}

function isUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UNAVAILABLE_CODES.test(code);
}

function toUnavailable(error: unknown, context: string): unknown {
  if (error instanceof EventStoreUnavailableError) return error;
  if (!isUnavailable(error)) return error;
  const { code, message } = error as { code: string; message: string };
  const hint = code.startsWith('SQLITE_FULL')
    ? ' (disk full)'
    : code.startsWith('SQLITE_BUSY')
      ? ` (database locked by another writer for more than ${BUSY_TIMEOUT_MS} ms)`
      : '';
  return new EventStoreUnavailableError('sqlite', `${context}: ${code}${hint}: ${message}`, { cause: error });
}
