import Database from 'better-sqlite3';

/**
 * A stream's stored events read in pages with nothing made per event: `a2rl verify`'s read of a
 * long run from an SQLite ledger (modules/audit/record-scan.ts). Reading row by row makes a Buffer
 * and two strings an event, which costs more than checking it; here SQLite joins a page's rows
 * itself (group_concat), so a page is one Buffer and four strings whatever its size.
 *
 * It opens the ledger file read-only on its own connection and knows the table the SQLite adapter
 * writes (infra/eventstore/sqlite-event-store.ts: events(position, stream, revision, id, type,
 * data)); it writes nothing. Nothing here is trusted: the reader of the pages checks that they add
 * up (counts, lengths, revisions) and what the bytes say.
 */

/** Events of one stream, in revision order, as stored. */
export interface RawEventPage {
  /** How many rows the page has. */
  count: number;
  /**
   * The rows' stored bytes back to back, each preceded by one separator byte (the reader may
   * overwrite it: leaf hashes are SHA-256(0x00 ‖ bytes)). Row i starts at 1 + Σ_{j<i}(lengths[j] + 1).
   */
  bytes: Buffer;
  lengths: number[];
  revisions: number[];
  /** The store's id and type columns; null where the store keeps none beside the bytes. */
  ids: string[] | null;
  types: string[] | null;
}

/**
 * Rows a page joins: about 0.4 MB for events of a few hundred bytes. Larger pages cost no less time
 * and more memory (4,096 rows: peak RSS 263 MB rather than 215 MB for `a2rl verify` of 1M events).
 */
export const RAW_PAGE_ROWS = 1024;

type PageRow = [number, Buffer | null, string | null, string | null, string | null, string | null];

export class SqliteRawScan {
  // The subquery walks the (stream, revision) index, so the rows arrive in revision order without a
  // sort; the revisions are returned too, so a page whose rows came in another order is caught.
  private readonly pageStmt = this.db
    .prepare<[string, number, number], PageRow>(
      `SELECT count(*), CAST(' ' || group_concat(data, ' ') AS BLOB), group_concat(length(data), ','), group_concat(revision, ','), group_concat(id, ','), group_concat(type, ',')
       FROM (SELECT revision, data, id, type FROM events WHERE stream = ? AND revision >= ? AND revision < ? ORDER BY revision)`,
    )
    .raw(true);

  private constructor(private readonly db: Database.Database) {}

  /** Opens the SQLite ledger file at `file` for reading (it must exist). */
  static open(file: string): SqliteRawScan {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      return new SqliteRawScan(db);
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /** Revisions [from, from + count) of `stream`, `rows` at a time (fewer where rows are missing). */
  *pages(stream: string, from: number, count: number, rows = RAW_PAGE_ROWS): Generator<RawEventPage> {
    for (let at = from; at < from + count; at += rows) {
      const [n, bytes, lengths, revisions, ids, types] = this.pageStmt.get(stream, at, Math.min(at + rows, from + count))!;
      if (n === 0 || bytes === null) {
        yield { count: 0, bytes: Buffer.alloc(0), lengths: [], revisions: [], ids: [], types: [] };
        continue;
      }
      yield { count: n, bytes, lengths: numbers(lengths), revisions: numbers(revisions), ids: ids?.split(',') ?? [], types: types?.split(',') ?? [] };
    }
  }

  close(): void {
    this.db.close();
  }
}

/**
 * A list of decimals joined with commas, as split(',').map(Number) reads it: plain digits are read
 * here without a string each, anything else (never what SQLite joins from integers) as before.
 */
function numbers(list: string | null): number[] {
  if (list === null) return [];
  const values: number[] = [];
  let value = 0;
  let digits = 0;
  for (let i = 0; i <= list.length; i++) {
    const c = i < list.length ? list.charCodeAt(i) : 44;
    if (c === 44 && digits > 0 && digits <= 15) {
      values.push(value);
      value = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57) {
      value = value * 10 + (c - 48);
      digits += 1;
    } else {
      return list.split(',').map(Number);
    }
  }
  return values;
}
