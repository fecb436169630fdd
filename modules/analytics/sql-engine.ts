import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { DuckDBInstance, JSDuckDBValueConverter, StatementType, type DuckDBAppender, type DuckDBConnection } from '@duckdb/node-api';
import type { Cell, ColumnType, TableData } from './table-schemas.js';

// The embedded analytical engine (DuckDB, docs/analysis.md "SQL"). Every query runs on a fresh
// in-memory database into which the tables are copied (appended row by row, never attached): the
// engine reads no file, loads no extension and reaches no network, so a query sees only the copies.

/** Limits of one query; exceeding one is an error naming it, not a truncated answer. */
export interface QueryLimits {
  /** Wall-clock limit of the query itself (the copy-in is not counted): the query is interrupted. */
  timeoutMs: number;
  /** At most this many result rows. */
  maxRows: number;
  /** At most this many bytes of result (the values as JSON). */
  maxBytes: number;
  /** DuckDB's own memory limit for the query's database (e.g. '512MB'). */
  maxMemory: string;
}

export const DEFAULT_LIMITS: QueryLimits = { timeoutMs: 30_000, maxRows: 100_000, maxBytes: 64 * 1024 * 1024, maxMemory: '1GB' };

export class QueryError extends Error {
  override readonly name = 'QueryError';
}

export interface QueryResult {
  columns: { name: string; type: string }[];
  /** Values as JSON values: integers beyond 2^53 as decimal strings, dates as ISO strings, blobs as hex. */
  rows: unknown[][];
}

/**
 * The settings of a query's database: external access off (no file, URL or extension), no automatic
 * extension install or load, then the configuration locked so the SQL cannot turn any of it back on.
 */
function lockedConfig(limits: QueryLimits): Record<string, string> {
  return {
    enable_external_access: 'false',
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'false',
    allow_community_extensions: 'false',
    max_memory: limits.maxMemory,
    threads: '2',
    lock_configuration: 'true',
  };
}

async function load(connection: DuckDBConnection, tables: readonly TableData[]): Promise<void> {
  for (const t of tables) {
    const cols = t.spec.columns.map((c) => `${quoteIdent(c.name)} ${c.type}`).join(', ');
    await connection.run(`CREATE TABLE ${quoteIdent(t.spec.name)} (${cols})`);
    const appender = await connection.createAppender(t.spec.name);
    try {
      for (const row of t.rows) {
        t.spec.columns.forEach((c, i) => append(appender, c.type, row[i], `${t.spec.name}.${c.name}`));
        appender.endRow();
      }
      appender.flushSync();
    } finally {
      appender.closeSync();
    }
  }
}

function append(a: DuckDBAppender, type: ColumnType, v: Cell | undefined, where: string): void {
  if (v === null || v === undefined) return a.appendNull();
  switch (type) {
    case 'VARCHAR':
      return a.appendVarchar(String(v));
    case 'INTEGER':
      return a.appendInteger(Number(v));
    case 'BIGINT':
      return a.appendBigInt(BigInt(v as number | bigint));
    case 'DOUBLE':
      return a.appendDouble(Number(v));
    case 'BOOLEAN':
      if (typeof v !== 'boolean') throw new Error(`${where}: not a boolean`);
      return a.appendBoolean(v);
  }
}

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** A query's database: the tables copied into a fresh in-memory DuckDB with the locked configuration. */
async function openDatabase(tables: readonly TableData[], limits: QueryLimits) {
  const instance = await DuckDBInstance.create(':memory:', lockedConfig(limits));
  const connection = await instance.connect();
  try {
    await load(connection, tables);
  } catch (err) {
    connection.closeSync();
    instance.closeSync();
    throw err;
  }
  return {
    connection,
    close: () => {
      connection.closeSync();
      instance.closeSync();
    },
  };
}

/**
 * Answers one read-only statement (SELECT, WITH … SELECT, DESCRIBE, SUMMARIZE, SHOW, EXPLAIN) over
 * the tables, within the limits. Anything else, or more than one statement, is refused before it runs.
 */
export async function runQuery(tables: readonly TableData[], sql: string, limits: QueryLimits = DEFAULT_LIMITS): Promise<QueryResult> {
  const db = await openDatabase(tables, limits);
  let timedOut = false;
  try {
    let extracted;
    try {
      extracted = await db.connection.extractStatements(sql);
    } catch (err) {
      throw new QueryError(firstLine(err));
    }
    if (extracted.count !== 1) throw new QueryError(`give exactly one SQL statement (got ${extracted.count})`);
    let prepared;
    try {
      prepared = await extracted.prepare(0);
    } catch (err) {
      throw new QueryError(firstLine(err));
    }
    if (!READ_ONLY.has(prepared.statementType)) throw new QueryError(`only read-only queries are answered (SELECT, WITH, DESCRIBE, SUMMARIZE, SHOW, EXPLAIN); got a ${StatementType[prepared.statementType] ?? 'other'} statement`);
    const timeout = setTimeout(() => {
      timedOut = true;
      db.connection.interrupt();
    }, limits.timeoutMs);
    try {
      const result = await prepared.stream();
      const columns = result.columnNames().map((name, i) => ({ name, type: result.columnType(i).toString() }));
      const rows: unknown[][] = [];
      let bytes = 0;
      for (;;) {
        const chunk = await result.fetchChunk();
        if (!chunk || chunk.rowCount === 0) break;
        for (const row of chunk.convertRows(JSDuckDBValueConverter)) {
          if (rows.length >= limits.maxRows) throw new QueryError(`the result has more than ${limits.maxRows} rows (the row limit); aggregate, filter or add LIMIT`);
          const values = row.map(jsonValue);
          bytes += Buffer.byteLength(JSON.stringify(values));
          if (bytes > limits.maxBytes) throw new QueryError(`the result is over ${limits.maxBytes} bytes (the size limit); select fewer columns or rows`);
          rows.push(values);
        }
      }
      return { columns, rows };
    } catch (err) {
      if (err instanceof QueryError) throw err;
      if (timedOut) throw new QueryError(`the query ran past its time limit (${limits.timeoutMs / 1000} s) and was stopped`);
      throw new QueryError(firstLine(err));
    } finally {
      clearTimeout(timeout);
    }
  } finally {
    db.close();
  }
}

// DESCRIBE, SHOW and SUMMARIZE are SELECTs to DuckDB; PRAGMA and SET are not answered (the configuration is locked anyway).
const READ_ONLY = new Set<number>([StatementType.SELECT, StatementType.EXPLAIN]);

function firstLine(err: unknown): string {
  return ((err as Error)?.message ?? String(err)).split('\n')[0];
}

/** A DuckDB value (as the JS converter gives it) as a JSON value. */
function jsonValue(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
  if (typeof v === 'number') return Number.isFinite(v) ? v : String(v);
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? null : v.toISOString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (Array.isArray(v)) return v.map(jsonValue);
  if (typeof v === 'object') return Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, jsonValue(x)]));
  return v;
}

export type TableFormat = 'parquet' | 'csv';

/**
 * Writes each table to `<dir>/<table>.parquet` through DuckDB's own Parquet writer. This database has
 * file access, since it must write; it runs no SQL but ours, and its configuration is locked.
 */
export async function writeParquet(tables: readonly TableData[], dir: string): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const instance = await DuckDBInstance.create(':memory:', {
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'false',
    threads: '2',
    lock_configuration: 'true',
  });
  const connection = await instance.connect();
  try {
    await load(connection, tables);
    const files: string[] = [];
    for (const t of tables) {
      const file = path.resolve(dir, `${t.spec.name}.parquet`);
      // Ordered as built (run id, then seq); a fixed row group size keeps the layout stable.
      await connection.run(`COPY ${quoteIdent(t.spec.name)} TO '${file.replace(/'/g, "''")}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 100000)`);
      files.push(file);
    }
    return files;
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}
