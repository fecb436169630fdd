import Database from 'better-sqlite3';
import type { AppendResult, ExpectedRevision } from '../../modules/ledger/event-store.port.js';
import { firstRevision, isStoredAlready, lastRevision } from '../../modules/ledger/revisions.js';

// The write side of the SQLite ledger, shared by the store (its types and error rules) and the writer
// thread (sqlite-writer-worker.ts, which runs `SqliteWriter`). Kept apart from the event catalog so
// the thread starts in milliseconds.

export const BUSY_TIMEOUT_MS = 5000;

// Errors that mean the database (file, disk, lock) is unusable rather than that one append is wrong.
const UNAVAILABLE_CODES = /^SQLITE_(FULL|IOERR|BUSY|LOCKED|CANTOPEN|READONLY|CORRUPT|NOTADB|NOMEM|PROTOCOL|PERM)/;

/** One append as it crosses to the writer thread: its events' bytes are slices of the batch's one buffer. */
export interface WireAppend {
  stream: string;
  expected: ExpectedRevision;
  ids: string[];
  types: string[];
  /** Byte length of each event, in order, within the batch buffer. */
  lengths: number[];
}

export interface WireBatch {
  appends: WireAppend[];
  /** Every event's bytes of the batch, back to back (transferred, not copied). */
  bytes: Uint8Array;
}

/** A failed append or batch as it crosses back: the error's fields, rebuilt on the other side. */
export interface WireError {
  code?: string;
  message: string;
}

/** What became of one append: written (or found already written), a conflict, or another error. */
export type WireOutcome = { ok: AppendResult } | { conflict: { actual: bigint | null } } | { failed: WireError };

/** The writer's answer to a batch: one outcome per append, or nothing written because the database is unusable. */
export type WireResult = { outcomes: WireOutcome[] } | { unavailable: WireError };

export function isUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UNAVAILABLE_CODES.test(code);
}

export function toWireError(error: unknown): WireError {
  const code = (error as { code?: unknown } | null)?.code;
  return { ...(typeof code === 'string' ? { code } : {}), message: (error as Error)?.message ?? String(error) };
}

/** An Error carrying the code of a WireError, as the SQLite driver throws them. */
export function fromWireError(wire: WireError): Error {
  return Object.assign(new Error(wire.message), wire.code === undefined ? {} : { code: wire.code });
}

/**
 * One connection that writes batches, each in one `BEGIN IMMEDIATE` transaction (one fsync under
 * `synchronous=FULL`), each append checked on its own inside it, so one conflict never fails its
 * neighbours; an error that makes the database unusable rolls the whole batch back.
 */
export class SqliteWriter {
  private readonly db: Database.Database;
  private readonly headStmt;
  private readonly rangeStmt;
  private readonly insertStmt;
  private readonly insertAll;
  private readonly writeBatch;

  constructor(file: string) {
    this.db = new Database(file, { fileMustExist: true });
    this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    this.db.pragma('synchronous = FULL'); // per connection; WAL mode is the file's, set by the store
    this.headStmt = this.db.prepare<[string], { revision: number }>('SELECT revision FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1');
    this.rangeStmt = this.db.prepare<[string, number, number], { position: number; id: string; data: Buffer }>(
      'SELECT position, id, data FROM events WHERE stream = ? AND revision BETWEEN ? AND ? ORDER BY revision',
    );
    this.insertStmt = this.db.prepare<[string, number, string, string, Uint8Array]>('INSERT INTO events (stream, revision, id, type, data) VALUES (?, ?, ?, ?, ?)');
    // Nested use of a better-sqlite3 transaction function runs in a SAVEPOINT: a failing insert undoes
    // only its own append, never its neighbours in the batch.
    this.insertAll = this.db.transaction((a: WireAppend, bytes: Uint8Array[]): number => {
      const first = Number(firstRevision(a.expected));
      let position = 0;
      a.ids.forEach((id, i) => {
        position = Number(this.insertStmt.run(a.stream, first + i, id, a.types[i], bytes[i]).lastInsertRowid);
      });
      return position;
    });
    this.writeBatch = this.db.transaction((appends: WireAppend[], bytes: Uint8Array[][]): WireOutcome[] =>
      appends.map((a, i) => {
        try {
          return this.appendInTransaction(a, bytes[i]);
        } catch (error) {
          if (isUnavailable(error)) throw error; // the whole batch rolls back; nothing is acknowledged
          return { failed: toWireError(error) };
        }
      }),
    );
  }

  write(batch: WireBatch): WireResult {
    try {
      return { outcomes: this.writeBatch.immediate(batch.appends, sliceBytes(batch)) };
    } catch (error) {
      return { unavailable: toWireError(error) };
    }
  }

  close(): void {
    this.db.close();
  }

  /** Checks one append against the stream head read inside the write transaction, then inserts or dedupes. */
  private appendInTransaction(a: WireAppend, bytes: Uint8Array[]): WireOutcome {
    const head = this.headStmt.get(a.stream);
    const actual = head === undefined ? null : BigInt(head.revision);
    const atExpected = a.expected === 'no_stream' ? actual === null : actual === a.expected;
    const first = firstRevision(a.expected);
    const last = lastRevision(a.expected, a.ids.length);
    if (atExpected) {
      // One INSERT is atomic on its own; only multi-event appends pay for a SAVEPOINT.
      const position =
        a.ids.length === 1 ? Number(this.insertStmt.run(a.stream, Number(first), a.ids[0], a.types[0], bytes[0]).lastInsertRowid) : this.insertAll(a, bytes);
      return { ok: { nextExpectedRevision: last, position: String(position), deduplicated: false } };
    }
    // A retry of an append that already committed: same ids and bytes at the same revisions.
    const stored = this.rangeStmt.all(a.stream, Number(first), Number(last));
    if (!isStoredAlready(stored, a.ids.map((id) => ({ id })), bytes)) return { conflict: { actual } };
    return { ok: { nextExpectedRevision: last, position: String(stored[stored.length - 1].position), deduplicated: true } };
  }
}

/** Packs appends' event bytes into one fresh buffer (a Buffer may be a slice of a shared pool: posting it would copy the pool). */
export function packBytes(perAppend: ReadonlyArray<readonly Uint8Array[]>): Uint8Array {
  let total = 0;
  for (const list of perAppend) for (const b of list) total += b.byteLength;
  const all = new Uint8Array(total);
  let at = 0;
  for (const list of perAppend) {
    for (const b of list) {
      all.set(b, at);
      at += b.byteLength;
    }
  }
  return all;
}

function sliceBytes(batch: WireBatch): Uint8Array[][] {
  let at = 0;
  return batch.appends.map((a) =>
    a.lengths.map((n) => {
      const view = Buffer.from(batch.bytes.buffer, batch.bytes.byteOffset + at, n);
      at += n;
      return view;
    }),
  );
}
