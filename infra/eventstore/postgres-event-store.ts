import pg from 'pg';
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
  StreamCategory,
  Subscription,
} from '../../modules/ledger/event-store.port.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { decodeEvent } from '../../modules/ledger/events/envelope.js';

/** Rows per read query: bounds memory for huge runs and keeps each read short. */
const PAGE_SIZE = 500;
/**
 * How often a live subscription re-reads without a notification. NOTIFY wakes it on commit, but an
 * event only becomes readable once every older transaction has ended (see `readAll`), which sends
 * no notification of its own.
 */
const POLL_MS = 250;
const CONNECT_TIMEOUT_MS = 10_000;
/**
 * Pooled connections by default (`?pool=` in the URL overrides): every concurrent append holds one
 * for its round trip, so fewer connections than writers queue appends in the client and lose
 * PostgreSQL's group commit. Connections are opened on demand, so a quiet process keeps few.
 */
const DEFAULT_POOL_SIZE = 20;
const MAX_POOL_SIZE = 1000;
const DEFAULT_SCHEMA = 'a2rl';
// Short enough that the NOTIFY channel `<schema>_appended` fits PostgreSQL's 63-byte identifiers.
const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,49}$/;

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);
// SQLSTATE: class 08 connection exceptions; server shutting down / starting; too many connections.
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[123]|53300)$/;
const CONNECTION_LOST = /Connection terminated|is not queryable|timeout exceeded when trying to connect/;

interface EventRow {
  transaction_id: string;
  global_position: string;
  stream: string;
  revision: string;
  data: Buffer;
  /** Selected by stream reads only (RecordedEvent.stored). */
  id?: string;
  type?: string;
}

interface Cursor {
  transactionId: string;
  globalPosition: string;
}

const START: Cursor = { transactionId: '0', globalPosition: '0' };

/**
 * EventStore on PostgreSQL. One `events` table (canonical JSON stored as `bytea`, so the bytes
 * round-trip exactly) plus a `streams` table holding each stream's head revision; the head row is
 * the per-stream lock that serialises writers and makes the expected-revision check exact.
 *
 * All-stream order: `global_position` (a sequence) is handed out before commit, so sequence order is
 * not commit order and a reader walking it would skip a transaction that commits late. Instead every
 * row records the writing transaction's id (`xid8`) and the all-stream is read in
 * `(transaction_id, global_position)` order, only up to the oldest transaction still running
 * (`pg_snapshot_xmin`). Nothing can later appear before a position already read, so checkpoints
 * never skip events. Positions are `"<transaction_id>:<global_position>"`; treat them as opaque.
 *
 * Cost of that rule: a long write transaction anywhere in the cluster (xids are cluster-wide)
 * delays readAll/subscribeAll until it ends. Appends and stream reads are not affected.
 */
export class PostgresEventStore implements EventStore {
  readonly backend = 'postgres' as const;

  private closed = false;
  private readonly subscriptions = new Set<PostgresSubscription>();
  /** The NOTIFY in flight, and whether appends committed since it was sent (see `announce`). */
  private announcing: Promise<void> | null = null;
  private announceAgain = false;
  private readonly sql: ReturnType<typeof statements>;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly connectionString: string,
    private readonly schema: string,
    /** host:port, for error messages. */
    private readonly server: string,
  ) {
    this.sql = statements(quoteIdent(schema), quoteIdent(channelOf(schema)));
  }

  /**
   * Connects and creates the schema and tables if missing. The schema is `options.schema`, else the
   * URL's `?schema=` parameter, else `a2rl`; the pool size is `options.pool`, else `?pool=`, else
   * DEFAULT_POOL_SIZE. Both parameters are removed before the URL reaches pg.
   */
  static async open(url: string, options: { schema?: string; pool?: number } = {}): Promise<PostgresEventStore> {
    const parsed = new URL(url);
    const schema = options.schema ?? parsed.searchParams.get('schema') ?? DEFAULT_SCHEMA;
    if (!SCHEMA_NAME.test(schema)) {
      throw new RangeError(`invalid postgres schema name "${schema}" (letters, digits and _, at most 50 characters)`);
    }
    const max = options.pool ?? poolSize(parsed.searchParams.get('pool'));
    parsed.searchParams.delete('schema');
    parsed.searchParams.delete('pool');
    const server = `${decodeURIComponent(parsed.hostname) || 'localhost'}:${parsed.port || '5432'}`;
    const connectionString = parsed.toString();
    const pool = new pg.Pool({ connectionString, max, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    // An idle pooled connection that dies emits 'error' on the pool; without a listener that would
    // crash the process. The next query gets a fresh connection or reports the outage itself.
    pool.on('error', () => {});
    const store = new PostgresEventStore(pool, connectionString, schema, server);
    try {
      await store.migrate();
    } catch (error) {
      await pool.end().catch(() => {});
      throw new EventStoreUnavailableError('postgres', `cannot open schema "${schema}" at ${server}: ${messageOf(error)}`, { cause: error });
    }
    return store;
  }

  async append(stream: string, events: readonly A2rlEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    const bytes = prepareAppend(stream, events, expected);
    this.assertOpen();
    // If the connection dies around COMMIT the outcome is unknown; retrying the same append settles it.
    const failed = `append to ${stream} was not acknowledged (retry the same append: it dedupes if it was stored)`;
    try {
      const appended = await this.appendOnce(stream, events, bytes, expected);
      if (appended) {
        this.announce();
        return appended;
      }
    } catch (error) {
      if (!isUniqueViolation(error)) throw this.unavailable(error, failed);
    }
    // A racing writer got in first. The head row makes this unreachable between writers of this
    // adapter; the unique constraint is the backstop, and the answer is the same: dedupe or conflict.
    try {
      return await this.transaction((client) => this.resolveConflict(client, stream, events, bytes, expected));
    } catch (error) {
      throw this.unavailable(error, failed);
    }
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    let from = options.fromRevision ?? 0n;
    let left = options.maxCount ?? Infinity;
    while (left > 0) {
      const rows = await this.query<EventRow>(this.sql.streamPage, [stream, String(from), Math.min(PAGE_SIZE, left)]);
      for (const row of rows) yield toRecorded(row);
      if (rows.length < PAGE_SIZE) return;
      from = BigInt(rows[rows.length - 1].revision) + 1n;
      left -= rows.length;
    }
  }

  async *readStreamStored(stream: string, options: ReadStreamOptions = {}): AsyncIterable<StoredEvent> {
    let from = options.fromRevision ?? 0n;
    let left = options.maxCount ?? Infinity;
    while (left > 0) {
      const rows = await this.query<EventRow>(this.sql.streamPage, [stream, String(from), Math.min(PAGE_SIZE, left)]);
      for (const row of rows) yield { stream: row.stream, revision: BigInt(row.revision), bytes: row.data, stored: { id: row.id!, type: row.type! } };
      if (rows.length < PAGE_SIZE) return;
      from = BigInt(rows[rows.length - 1].revision) + 1n;
      left -= rows.length;
    }
  }

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    for await (const page of this.readAllPages(options)) for (const recorded of page) yield recorded;
  }

  async *readAllPages(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent[]> {
    let after = parsePosition(options.after);
    let left = options.maxCount ?? Infinity;
    const category = options.category ?? 'run';
    // One page read ahead: the next page's query is in flight while this one's rows are decoded and
    // consumed (a rebuild's projections), so the server's work and ours overlap instead of taking
    // turns. Each page is its own query after the last row's cursor, exactly as without read-ahead.
    let next: Promise<EventRow[]> | null = left > 0 ? this.page(after, Math.min(PAGE_SIZE, left), category) : null;
    try {
      while (next) {
        const rows: EventRow[] = await next;
        next = null;
        left -= rows.length;
        if (rows.length === PAGE_SIZE && left > 0) {
          after = cursorOf(rows[rows.length - 1]);
          next = this.page(after, Math.min(PAGE_SIZE, left), category);
        }
        if (rows.length) yield rows.map(toRecorded);
      }
    } finally {
      next?.catch(() => undefined); // a reader that stopped early leaves a page unread: not an unhandled rejection
    }
  }

  subscribeAll(options: { after?: string | null } = {}): Subscription {
    this.assertOpen();
    const sub = new PostgresSubscription(this, parsePosition(options.after), () => this.subscriptions.delete(sub));
    this.subscriptions.add(sub);
    return sub;
  }

  async streamRevision(stream: string): Promise<bigint | null> {
    const rows = await this.query<{ revision: string }>(this.sql.head, [stream]);
    return rows.length === 0 ? null : BigInt(rows[0].revision);
  }

  /** The cluster's system identifier, the database's oid and the schema: the same by any host name or port that reaches them. */
  async identity(): Promise<string> {
    const { rows } = await this.pool.query<{ system: string; db: string }>(
      'SELECT (SELECT system_identifier FROM pg_control_system())::text AS system, (SELECT oid FROM pg_database WHERE datname = current_database())::text AS db',
    );
    return `postgres:${rows[0].system}:${rows[0].db}:${this.schema}`;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    await this.announcing;
    await this.pool.end();
  }

  /** @internal One page of the category's streams after `after`, only below the oldest running transaction. */
  page(after: Cursor, limit: number, category: StreamCategory = 'run'): Promise<EventRow[]> {
    return this.query<EventRow>(category === 'campaign' ? this.sql.campaignPage : this.sql.allPage, [after.transactionId, after.globalPosition, limit]);
  }

  /** @internal A dedicated connection listening for appends to this schema (caller ends it). */
  async listen(onAppend: () => void, onError: (error: Error) => void): Promise<pg.Client> {
    this.assertOpen();
    const client = new pg.Client({ connectionString: this.connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    client.on('notification', onAppend);
    client.on('error', onError);
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdent(channelOf(this.schema))}`);
      return client;
    } catch (error) {
      await client.end().catch(() => {});
      throw this.unavailable(error, 'cannot listen for appends');
    }
  }

  /** @internal Maps connection failures to EventStoreUnavailableError naming the server. */
  unavailable(error: unknown, context: string): unknown {
    if (error instanceof EventStoreUnavailableError || !isConnectionFailure(error)) return error;
    return new EventStoreUnavailableError('postgres', `${context}: ${this.server}: ${messageOf(error)}`, { cause: error });
  }

  /**
   * The append as one statement, so one round trip and its own transaction: claiming the head row
   * (created for 'no_stream', else advanced from `expected`) locks it until commit, so a concurrent
   * writer of the same stream waits and then finds the head moved (READ COMMITTED re-checks the
   * updated row); the events are inserted only when the claim succeeded. Null when it did not.
   * A single event (the harness's usual append) binds plain values, not one-element arrays: pg
   * sends a Buffer as binary, but a bytea[] as hex text that both ends must convert.
   */
  private async appendOnce(stream: string, events: readonly A2rlEvent[], bytes: Buffer[], expected: ExpectedRevision): Promise<AppendResult | null> {
    const first = firstRevision(expected);
    const last = lastRevision(expected, events.length);
    const single = events.length === 1;
    const statement = this.sql.append[`${single ? 'one' : 'many'}${expected === 'no_stream' ? 'New' : 'At'}`];
    const { rows } = await this.pool.query<{ claimed: number; position: string | null }>({
      ...statement,
      values: [
        stream,
        String(first),
        single ? events[0].id : events.map((e) => e.id),
        single ? events[0].type : events.map((e) => e.type),
        single ? bytes[0] : bytes,
        String(last),
        ...(expected === 'no_stream' ? [] : [String(expected)]),
      ],
    });
    const row = rows[0];
    if (!row || row.claimed === 0 || row.position === null) return null;
    return { nextExpectedRevision: last, position: row.position, deduplicated: false };
  }

  /** The stream is not at `expected`: a retry of an already stored append dedupes, anything else conflicts. */
  private async resolveConflict(
    client: pg.PoolClient,
    stream: string,
    events: readonly A2rlEvent[],
    bytes: Buffer[],
    expected: ExpectedRevision,
  ): Promise<AppendResult> {
    const first = firstRevision(expected);
    const last = lastRevision(expected, events.length);
    const head = await client.query<{ revision: string }>(this.sql.head, [stream]);
    const actual = head.rows.length === 0 ? null : BigInt(head.rows[0].revision);
    const stored = await client.query<{ id: string; data: Buffer } & EventRow>(this.sql.range, [stream, String(first), String(last)]);
    if (!isStoredAlready(stored.rows, events, bytes)) throw new WrongExpectedRevisionError(stream, expected, actual);
    return { nextExpectedRevision: last, position: positionOf(cursorOf(stored.rows[stored.rows.length - 1])), deduplicated: true };
  }

  /**
   * Wakes the subscribers (of every process) after appends commit: one NOTIFY per commit group, not
   * one per append. A NOTIFY inside the append would take PostgreSQL's cluster-wide notify lock
   * until its commit is flushed, so appends would commit one by one instead of sharing a WAL flush.
   * Here appends that commit while a NOTIFY is in flight are covered by one more NOTIFY after it.
   * It commits asynchronously (a notification needs no durability) and its failure is ignored:
   * subscribers also poll (POLL_MS), so a lost wake-up only delays them.
   */
  private announce(): void {
    if (this.closed) return;
    if (this.announcing) {
      this.announceAgain = true;
      return;
    }
    this.announcing = (async () => {
      do {
        this.announceAgain = false;
        await this.pool.query(this.sql.notify).catch(() => undefined);
      } while (this.announceAgain && !this.closed);
      this.announcing = null;
    })();
  }

  /** Runs `work` in one transaction on a pooled connection; rolls back on any error. */
  private async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    // A dead socket also emits 'error' on the checked-out client (the failing query reports it too);
    // unheard, that event would crash the process.
    const onError = (error: Error) => (broken = error);
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch((e: Error) => (broken = e));
      throw error;
    } finally {
      client.removeListener('error', onError);
      client.release(broken);
    }
  }

  private async query<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<R[]> {
    this.assertOpen();
    try {
      return (await this.pool.query<R>(text, values)).rows;
    } catch (error) {
      throw this.unavailable(error, 'read failed');
    }
  }

  /** Idempotent DDL, serialised by an advisory lock so concurrent first opens do not race. */
  private async migrate(): Promise<void> {
    const s = quoteIdent(this.schema);
    await this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`a2rl-eventstore:${this.schema}`]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
      await client.query(`CREATE TABLE IF NOT EXISTS ${s}.events (
        global_position bigserial PRIMARY KEY,
        transaction_id  xid8   NOT NULL DEFAULT pg_current_xact_id(),
        stream          text   NOT NULL,
        revision        bigint NOT NULL,
        id              uuid   NOT NULL UNIQUE,
        type            text   NOT NULL,
        data            bytea  NOT NULL,
        UNIQUE (stream, revision)
      )`);
      // CREATE INDEX IF NOT EXISTS takes a SHARE lock on the table before it sees the index exists, so
      // it would wait behind any open append of another process (and that process's next append
      // behind it): an index is created only when it is missing, which the advisory lock makes final.
      const missing = async (index: string) => (await client.query<{ r: string | null }>('SELECT to_regclass($1) AS r', [`${s}.${quoteIdent(index)}`])).rows[0].r === null;
      if (await missing('events_commit_order')) await client.query(`CREATE INDEX events_commit_order ON ${s}.events (transaction_id, global_position)`);
      // Campaign streams are a sliver of the ledger: their reads walk this partial index, not the run events.
      if (await missing('events_campaign_commit_order')) {
        await client.query(`CREATE INDEX events_campaign_commit_order ON ${s}.events (transaction_id, global_position) WHERE stream LIKE 'campaign-%'`);
      }
      await client.query(`CREATE TABLE IF NOT EXISTS ${s}.streams (
        stream   text   PRIMARY KEY,
        revision bigint NOT NULL
      )`);
    });
  }

  private assertOpen(): void {
    if (this.closed) throw new EventStoreUnavailableError('postgres', `the store for ${this.server} is closed`);
  }
}

/** Catch-up then live over the all-stream; tracks the last delivered position, so no gap and no duplicate. */
class PostgresSubscription implements Subscription {
  private closed = false;
  private notified = false;
  private wake: (() => void) | null = null;
  private listenError: Error | null = null;
  private listener: Promise<pg.Client> | null = null;
  private readonly iterator: AsyncGenerator<RecordedEvent>;

  constructor(
    private readonly store: PostgresEventStore,
    private after: Cursor,
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
    this.onClose(); // also when iteration never started, so the generator's finally never runs
    await Promise.all([this.iterator.return(undefined), this.release()]);
  }

  private async *run(): AsyncGenerator<RecordedEvent> {
    try {
      // Listen before the first read, so an append committed during catch-up still wakes us.
      this.listener = this.store.listen(
        () => this.signal(),
        (error) => {
          this.listenError = error;
          this.signal();
        },
      );
      await this.listener;
      while (!this.closed) {
        if (this.listenError) throw this.store.unavailable(this.listenError, 'subscription lost its connection');
        this.notified = false;
        const rows = await this.store.page(this.after, PAGE_SIZE);
        for (const row of rows) {
          if (this.closed) return;
          this.after = cursorOf(row);
          yield toRecorded(row);
        }
        if (rows.length < PAGE_SIZE) await this.idle();
      }
    } catch (error) {
      if (!this.closed) throw error;
    } finally {
      this.closed = true;
      await this.release();
      this.onClose();
    }
  }

  /** Waits for a notification, the poll interval, or close(), whichever comes first. */
  private async idle(): Promise<void> {
    if (this.notified || this.closed) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => this.wake?.(), POLL_MS);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
    });
  }

  private signal(): void {
    this.notified = true;
    this.wake?.();
  }

  private async release(): Promise<void> {
    const listener = this.listener;
    this.listener = null;
    if (!listener) return;
    const client = await listener.catch(() => null);
    await client?.end().catch(() => {});
  }
}

/** Rows of a batch: numbered in batch order, so the last event gets the highest global_position. */
const MANY_ROWS = `SELECT $1, $2::bigint + u.ord - 1, u.id, u.type, u.data
      FROM unnest($3::uuid[], $4::text[], $5::bytea[]) WITH ORDINALITY AS u(id, type, data, ord)
      WHERE EXISTS (SELECT 1 FROM claim)
      ORDER BY u.ord`;
const ONE_ROW = `SELECT $1, $2::bigint, $3::uuid, $4::text, $5::bytea WHERE EXISTS (SELECT 1 FROM claim)`;

/** Claims the head with `claim`, then inserts the `rows` only if it succeeded. */
function appendStatement(s: string, claim: string, rows: string): string {
  return `WITH claim AS (${claim}),
    inserted AS (
      INSERT INTO ${s}.events (stream, revision, id, type, data)
      ${rows}
      RETURNING global_position
    )
    SELECT (SELECT count(*) FROM claim)::int AS claimed,
      pg_current_xact_id()::text || ':' || max(global_position)::text AS position
    FROM inserted`;
}

/**
 * The four append statements (one event or many; a new stream or one at an expected revision),
 * named so that each pooled connection parses and plans them once. Names are per store, and each
 * store has its own pool, so two schemas never share a name on one connection.
 */
function appendStatements(s: string): Record<`${'one' | 'many'}${'New' | 'At'}`, { name: string; text: string }> {
  const claimNew = `INSERT INTO ${s}.streams (stream, revision) VALUES ($1, $6) ON CONFLICT (stream) DO NOTHING RETURNING 1`;
  const claimAt = `UPDATE ${s}.streams SET revision = $6 WHERE stream = $1 AND revision = $7 RETURNING 1`;
  return {
    oneNew: { name: 'a2rl_append_one_new', text: appendStatement(s, claimNew, ONE_ROW) },
    oneAt: { name: 'a2rl_append_one_at', text: appendStatement(s, claimAt, ONE_ROW) },
    manyNew: { name: 'a2rl_append_many_new', text: appendStatement(s, claimNew, MANY_ROWS) },
    manyAt: { name: 'a2rl_append_many_at', text: appendStatement(s, claimAt, MANY_ROWS) },
  };
}

function statements(s: string, channel: string) {
  // pg returns bigint and xid8 as decimal strings, which is what positions and BigInt() want.
  const columns = 'transaction_id, global_position, stream, revision, data';
  return {
    head: `SELECT revision FROM ${s}.streams WHERE stream = $1`,
    // Appends bind $1 stream, $2 first revision, $3-$5 id(s)/type(s)/bytes, $6 last revision, $7 expected revision.
    append: appendStatements(s),
    // Two statements in one simple query: one implicit transaction, so SET LOCAL covers the NOTIFY.
    notify: `SET LOCAL synchronous_commit TO OFF; NOTIFY ${channel}`,
    range: `SELECT ${columns}, id FROM ${s}.events WHERE stream = $1 AND revision BETWEEN $2 AND $3 ORDER BY revision`,
    streamPage: `SELECT ${columns}, id, type FROM ${s}.events WHERE stream = $1 AND revision >= $2 ORDER BY revision LIMIT $3`,
    // The run category: the commit-order index, with the stream filter applied to the rows it walks.
    // Written as "neither a campaign nor the access stream" (the same set: appends accept only run-,
    // campaign- and access- streams) because the planner rates NOT LIKE as keeping most rows; it
    // rates LIKE as keeping few, and before the first ANALYZE of a fresh table it then sorts
    // everything after the cursor for every page instead of walking the index (a rebuild became quadratic).
    allPage: allPage(s, `stream NOT LIKE 'campaign-%' AND stream NOT LIKE 'access-%'`),
    // The campaign category: the partial index events_campaign_commit_order (same predicate, word for word).
    campaignPage: allPage(s, `stream LIKE 'campaign-%'`),
  };
}

/** All-stream page in commit order, below the oldest running transaction, of the streams `streams` selects. */
function allPage(s: string, streams: string): string {
  return `SELECT transaction_id, global_position, stream, revision, data FROM ${s}.events
      WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint)
        AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
        AND ${streams}
      ORDER BY transaction_id, global_position LIMIT $3`;
}

/** `?pool=`: absent means the default; anything but a whole number in range is refused. */
function poolSize(value: string | null): number {
  if (value === null) return DEFAULT_POOL_SIZE;
  const n = /^\d{1,4}$/.test(value) ? Number(value) : NaN;
  if (!(n >= 1 && n <= MAX_POOL_SIZE)) throw new RangeError(`invalid postgres pool size "?pool=${value}" (a whole number of connections, 1 to ${MAX_POOL_SIZE})`);
  return n;
}

function channelOf(schema: string): string {
  return `${schema}_appended`;
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function toRecorded(row: EventRow): RecordedEvent {
  const stored = row.type === undefined ? {} : { stored: { id: row.id!, type: row.type } };
  return { stream: row.stream, revision: BigInt(row.revision), position: positionOf(cursorOf(row)), event: decodeEvent(row.data), bytes: row.data, ...stored }; // the driver's own Buffer, one per row: no copy
}

function cursorOf(row: Pick<EventRow, 'transaction_id' | 'global_position'>): Cursor {
  return { transactionId: row.transaction_id, globalPosition: row.global_position };
}

function positionOf(cursor: Cursor): string {
  return `${cursor.transactionId}:${cursor.globalPosition}`;
}

function parsePosition(position: string | null | undefined): Cursor {
  if (position === null || position === undefined) return START;
  const m = /^(0|[1-9]\d{0,19}):(0|[1-9]\d{0,18})$/.exec(position);
  if (!m) {
    throw new RangeError(`"${position}" is not a position of the postgres event store (positions are opaque: pass back only what the store returned)`);
  }
  return { transactionId: m[1], globalPosition: m[2] };
}

function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '23505';
}

function isConnectionFailure(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code))) return true;
  return typeof message === 'string' && CONNECTION_LOST.test(message);
}

function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return error.errors.map(messageOf).join('; ');
  if (error instanceof Error) return error.message || (error as { code?: string }).code || error.name;
  return String(error);
}
