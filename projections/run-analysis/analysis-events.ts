import { artifactKey } from '../../modules/artifacts/artifact-store.port.js';
import type { A2rlEvent, EventData } from '../../modules/ledger/events/catalog.js';
import { eventId } from '../../modules/ledger/events/ids.js';

/**
 * Whether the run analysis (analyze.ts and what it calls) and the report model read this event for
 * what it says: not the signed tree heads, most of a long run's events. The agent's output chunks
 * are kept (their metadata only, a few hundred bytes each): the report's output section counts them
 * and reads the last ones of each stream.
 */
export function readByAnalysis(event: A2rlEvent): boolean {
  return event.type !== 'TreeHeadSigned';
}

/**
 * A run's events folded in seq order into what the analysis and the report read: the events
 * readByAnalysis keeps, plus the run's first and last events (its id, clock origin, last seq), and
 * how many there were. `analyzeRun(events, blobs, count)` over them equals analyzeRun over the whole
 * run (modules/audit/analysis-events.spec.ts), in the memory of the kept events only.
 *
 * Each kept event is held compactly (heldEvent): most as a row of a table per data shape
 * (FlatTables: each field in a column, the data built when read), the others as an object. What is
 * derived from other fields (the id from the run and seq, a blob's key from its sha256) is not
 * stored again, times are kept as numbers where their ISO string is exactly that number's, and
 * repeated strings and command lines are held once. On a long run these are most of what
 * `verify --rebuild` holds.
 *
 * With `outputTailBytes`, the agent's stdout chunks (most of a long run's events; the analysis
 * reads stderr only, the report counts stdout and shows its end) are held only as the last ones
 * whose recorded sizes reach that many bytes; the others are counted in `omittedOutput`, which the
 * report adds to the stream's counts (ReportInput.omittedOutput). The report is then the whole
 * run's, unless a blob of the kept chunks is missing (verify reports that blob on its own): it
 * then reads no further back than the kept chunks.
 */
export class AnalysisEvents {
  private events: A2rlEvent[] = [];
  count = 0;
  /** stdout chunks left out (with outputTailBytes). */
  readonly omittedOutput: { stdout?: { chunks: number; bytes: number } } = {};
  /** The last event when readByAnalysis dropped it (it is appended by `finish`). */
  private pending: A2rlEvent | null = null;
  /** The stdout chunks held (with outputTailBytes), oldest first from `tailStart`, and their recorded bytes. */
  private tail: A2rlEvent[] = [];
  private tailStart = 0;
  private tailBytes = 0;
  private readonly strings = new StringPool();
  private tables: FlatTables | undefined;

  constructor(private readonly options: { outputTailBytes?: number } = {}) {}

  add(event: A2rlEvent): void {
    this.count += 1;
    if (this.events.length && this.options.outputTailBytes !== undefined && isStdout(event)) {
      this.pending = null;
      this.keepInTail(this.held(event), event.data.chunk.size);
    } else if (this.events.length === 0 || readByAnalysis(event)) {
      this.events.push(this.events.length ? this.held(event) : event);
      this.pending = null;
    } else this.pending = event;
  }

  private held(event: A2rlEvent): A2rlEvent {
    const runId = this.events[0].runId;
    return heldEvent(event, runId, this.strings, (this.tables ??= new FlatTables(runId, this.strings)));
  }

  /** The kept events in seq order, ending with the run's last event. */
  finish(): A2rlEvent[] {
    this.mergeTail();
    if (this.pending) this.events.push(this.pending);
    this.pending = null;
    return this.events;
  }

  /** Holds a stdout chunk, then lets go of the oldest ones while the newer ones still reach outputTailBytes. */
  private keepInTail(event: A2rlEvent, size: number): void {
    this.tail.push(event);
    this.tailBytes += size;
    for (;;) {
      const oldest = this.tail[this.tailStart] as Extract<A2rlEvent, { type: 'AgentOutput' }>;
      if (this.tailBytes - oldest.data.chunk.size < this.options.outputTailBytes!) break;
      this.tailBytes -= oldest.data.chunk.size;
      const left = (this.omittedOutput.stdout ??= { chunks: 0, bytes: 0 });
      left.chunks += 1;
      left.bytes += oldest.data.chunk.size;
      this.tailStart += 1;
    }
    if (this.tailStart > 1024 && this.tailStart * 2 > this.tail.length) {
      this.tail = this.tail.slice(this.tailStart);
      this.tailStart = 0;
    }
  }

  /** The held stdout chunks put in seq order among the other kept events (both are in seq order). */
  private mergeTail(): void {
    const tail = this.tail.slice(this.tailStart);
    if (!tail.length) return;
    const merged: A2rlEvent[] = [];
    let t = 0;
    for (const e of this.events) {
      while (t < tail.length && tail[t].seq < e.seq) merged.push(tail[t++]);
      merged.push(e);
    }
    for (; t < tail.length; t++) merged.push(tail[t]);
    this.events = merged;
    [this.tail, this.tailStart, this.tailBytes] = [[], 0, 0];
  }
}

const isStdout = (event: A2rlEvent): event is Extract<A2rlEvent, { type: 'AgentOutput' }> => event.type === 'AgentOutput' && event.data.stream === 'stdout';

/**
 * An event as held for the analysis: the same fields, but the id (a UUIDv5 of runId/seq, which
 * the envelope's validation enforces) computed when read, and the run's id shared. Own enumerable
 * fields differ from the stored event's (no `id`): held events are read, never re-encoded.
 */
class HeldEvent {
  constructor(
    readonly type: A2rlEvent['type'],
    readonly runId: string,
    readonly seq: number,
    /** occurredAt as epoch milliseconds where its ISO form is exactly that (a number in the object, not a 24-character string), else the string. */
    private readonly at: number | string,
    readonly schemaVersion: number,
    readonly data: unknown,
  ) {}

  get id(): string {
    return eventId(this.runId, this.seq);
  }

  get occurredAt(): string {
    return typeof this.at === 'number' ? new Date(this.at).toISOString() : this.at;
  }
}

/** An ISO timestamp as the number HeldEvent keeps, when it turns back into exactly the same string. */
function compactTime(iso: string): number | string {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) && new Date(ms).toISOString() === iso ? ms : iso;
}

/** A blob reference whose key is its content address: the key computed when read. */
class HeldBlob {
  constructor(readonly sha256: string, readonly size: number) {}

  get key(): string {
    return artifactKey(this.sha256);
  }
}

type Chunk = EventData<'AgentOutput'>['chunk'];
const SHA256 = /^[0-9a-f]{64}$/;

function heldEvent(event: A2rlEvent, runId: string, strings: StringPool, tables: FlatTables): A2rlEvent {
  if (event.runId !== runId || event.id !== eventId(runId, event.seq)) return event; // not this run's, or not as validated: held as it is
  const flat = event.type === 'AgentOutput' ? null : tables.hold(event); // an output chunk's blob reference is held compactly below
  if (flat) return flat;
  const data = event.type === 'AgentOutput' ? { ...event.data, chunk: heldChunk(event.data.chunk) } : strings.shared(event.data);
  return new HeldEvent(event.type, runId, event.seq, compactTime(event.occurredAt), event.schemaVersion, data) as unknown as A2rlEvent;
}

/**
 * Fields whose values repeat across a run's events: a file's path and content hashes (a change's
 * `previousSha256` is the previous change's `sha256`, a blob's key follows from its hash), a
 * process's working directory and executable. Each event parsed from the stream has its own copy
 * of every string; held events share one.
 */
const SHARED_FIELDS = new Set(['path', 'op', 'sha256', 'previousSha256', 'key', 'cwd', 'executable', 'stream', 'kind']);
/** Fields holding arrays of strings that repeat across events: a process's argv (the same commands run again and again). */
const SHARED_STRING_ARRAYS = new Set(['argv']);
/** Distinct strings the pool keeps at most: beyond, values are held as they are (memory bounded, results unchanged). */
const MAX_POOLED = 500_000;
/** Distinct string arrays (command lines) the pool keeps at most. */
const MAX_POOLED_ARRAYS = 50_000;

/** One copy of each repeated string value of the top-level SHARED_FIELDS of events' data. */
class StringPool {
  private readonly pool = new Map<string, string>();
  private readonly arrays = new Map<string, readonly string[]>();

  /**
   * `data` with its shared fields' strings replaced by the pool's copies: a new object when it has
   * any (equal strings compare equal in JavaScript, so which copy a field holds cannot be told).
   */
  shared<T>(data: T): T {
    if (data === null || typeof data !== 'object' || Array.isArray(data)) return data;
    let copy: Record<string, unknown> | undefined;
    for (const [field, value] of Object.entries(data)) {
      if (typeof value === 'string' && SHARED_FIELDS.has(field)) (copy ??= { ...(data as Record<string, unknown>) })[field] = this.intern(value);
      else if (SHARED_STRING_ARRAYS.has(field)) {
        const shared = this.sharedArray(value);
        if (shared !== value) (copy ??= { ...(data as Record<string, unknown>) })[field] = shared;
      }
    }
    return (copy ?? data) as T;
  }

  /**
   * An array of strings as one frozen copy shared by every equal one (a command line run again and
   * again), within the pool's bound; any other value as it is.
   */
  sharedArray(value: unknown): unknown {
    if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) return value;
    const key = JSON.stringify(value);
    const pooled = this.arrays.get(key);
    if (pooled) return pooled;
    const array = Object.freeze(value.map((v: string) => this.intern(v)));
    if (this.arrays.size < MAX_POOLED_ARRAYS) this.arrays.set(key, array);
    return array;
  }

  intern(value: string): string {
    const pooled = this.pool.get(value);
    if (pooled !== undefined) return pooled;
    if (this.pool.size < MAX_POOLED) this.pool.set(value, value);
    return value;
  }
}

function heldChunk(chunk: Chunk): Chunk {
  const { sha256, size, key } = chunk;
  return SHA256.test(sha256) && key === artifactKey(sha256) && Object.keys(chunk).length === 3 ? (new HeldBlob(sha256, size) as unknown as Chunk) : chunk;
}

/** How a data field's values are held in its column ('value': any other value, by reference). */
type Kind = 'number' | 'boolean' | 'null' | 'string' | 'time' | 'value';

/** Data shapes (event type, schema version, keys and their kinds) held in columns at most: other events are held as objects. */
const MAX_TABLES = 64;

/** How a field value is held ('time': an ISO string that is exactly its epoch milliseconds'). */
function kindOf(value: unknown): Kind {
  if (typeof value === 'number') return 'number';
  if (typeof value === 'boolean') return 'boolean';
  if (value === null) return 'null';
  if (typeof value !== 'string') return 'value';
  return typeof compactTime(value) === 'number' ? 'time' : 'string';
}

/** The events of one type and data shape: each field's values in a column (a JavaScript array of one kind of value is stored unboxed). */
interface FlatTable {
  readonly type: A2rlEvent['type'];
  readonly runId: string;
  readonly schemaVersion: number;
  readonly keys: readonly string[];
  readonly kinds: readonly Kind[];
  readonly columns: unknown[][];
  /** Each row's occurredAt, as epoch milliseconds. */
  readonly times: number[];
  /** The table's event class: its prototype refers to the table. */
  readonly Event: new (seq: number, row: number) => FlatEvent;
  rows: number;
}

/**
 * Events held as a row of a table per shape (type, schema version, data keys and how each is held):
 * a long run's process starts and exits, rollout batches and file changes are most of its events,
 * and as objects each costs an event object, a data object, a boxed number per fraction or time and
 * a string per observation time (0.2–0.3 KB); as a row, about 0.1 KB. A number, boolean, string or
 * time is held in its column (a JavaScript array of one kind of value is stored unboxed); an object
 * or array by reference, a command line's argv shared with every event that ran the same one. The
 * data is built when read, a new object each time.
 */
class FlatTables {
  private readonly tables = new Map<string, FlatTable>();

  constructor(private readonly runId: string, private readonly strings: StringPool) {}

  /** The event as a row of its shape's table, or null when its data is not flat, its time not exactly milliseconds, or there are too many shapes. */
  hold(event: A2rlEvent): A2rlEvent | null {
    const at = compactTime(event.occurredAt);
    const data = event.data as unknown;
    if (typeof at !== 'number') return null;
    if (data === null || typeof data !== 'object' || Object.getPrototypeOf(data) !== Object.prototype) return null;
    const fields = data as Record<string, unknown>;
    const keys = Object.keys(fields);
    const kinds: Kind[] = [];
    if (keys.includes('__proto__')) return null; // an own field of that name cannot be set back by assignment
    for (const key of keys) kinds.push(kindOf(fields[key]));
    const table = this.tableFor(event, keys, kinds);
    if (!table) return null;
    keys.forEach((key, i) => this.append(table.columns[i], key, kinds[i], fields[key]));
    table.times.push(at);
    return new table.Event(event.seq, table.rows++) as unknown as A2rlEvent;
  }

  private tableFor(event: A2rlEvent, keys: string[], kinds: Kind[]): FlatTable | null {
    const shape = JSON.stringify([event.type, event.schemaVersion, keys, kinds]);
    const found = this.tables.get(shape);
    if (found || this.tables.size >= MAX_TABLES) return found ?? null;
    const Event = class extends FlatEvent {};
    const table: FlatTable = { type: event.type, runId: this.runId, schemaVersion: event.schemaVersion, keys, kinds, columns: keys.map(() => []), times: [], Event, rows: 0 };
    Object.defineProperty(Event.prototype, 'table', { value: table });
    this.tables.set(shape, table);
    return table;
  }

  private append(column: unknown[], key: string, kind: Kind, value: unknown): void {
    if (kind === 'time') column.push(Date.parse(value as string));
    else if (kind === 'string') column.push(SHARED_FIELDS.has(key) ? this.strings.intern(value as string) : value);
    else if (kind === 'value' && SHARED_STRING_ARRAYS.has(key)) column.push(this.strings.sharedArray(value));
    else if (kind !== 'null') column.push(value);
  }
}

/** An event held as a row of a FlatTable (its subclass's prototype has the table): the same fields as HeldEvent's. */
class FlatEvent {
  declare readonly table: FlatTable;
  readonly type: A2rlEvent['type'];

  constructor(
    readonly seq: number,
    private readonly row: number,
  ) {
    this.type = this.table.type;
  }

  get runId(): string {
    return this.table.runId;
  }

  get schemaVersion(): number {
    return this.table.schemaVersion;
  }

  get id(): string {
    return eventId(this.runId, this.seq);
  }

  get occurredAt(): string {
    return new Date(this.table.times[this.row]).toISOString();
  }

  /** The data, built from the row (a new object each time it is read). */
  get data(): unknown {
    const { keys, kinds, columns } = this.table;
    const data: Record<string, unknown> = {};
    for (let i = 0; i < keys.length; i++) data[keys[i]] = fieldValue(kinds[i], columns[i], this.row);
    return data;
  }
}

function fieldValue(kind: Kind, column: unknown[], row: number): unknown {
  if (kind === 'null') return null;
  if (kind === 'time') return new Date(column[row] as number).toISOString();
  return column[row];
}
