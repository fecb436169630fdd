import { finished } from 'node:stream/promises';
import type BetterSqlite3 from 'better-sqlite3';
import type { PoolClient } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { ColumnMetadata } from 'typeorm/metadata/ColumnMetadata.js';
import type { KeyedRow } from '../../projections/projection.js';

/** Rows (or keys) per statement on SQLite. Remainders are split into powers of two, so every
 *  projection uses few statement shapes, each prepared once. */
export const ROWS_PER_STATEMENT = 256;
/** Rows (or keys) per statement on PostgreSQL, where a statement binds them all as one parameter. */
const ROWS_PER_JSON = 5000;

/** A projection is not usable with the runner (duplicate name, entity not registered, composite key, unsupported database). */
export class InvalidProjectionError extends Error {
  override readonly name = 'InvalidProjectionError';
}

/**
 * Bulk load/insert/upsert of one entity's rows with SQL built once from its metadata. Called inside
 * the runner's transaction (`manager`), so rows commit together with the checkpoint.
 */
export interface RowTable {
  load(manager: EntityManager, keys: string[]): Promise<Map<string, KeyedRow>>;
  /** Rows whose keys are not in the table (cheaper than an upsert, which must check). */
  insert(manager: EntityManager, rows: object[]): Promise<void>;
  upsert(manager: EntityManager, rows: object[]): Promise<void>;
  /** Every row, ordered by key in code-unit order. */
  all(manager: EntityManager): Promise<KeyedRow[]>;
}

/** The RowTable of `entity` for the DataSource's database: SQLite (better-sqlite3) or PostgreSQL. */
export function rowTable(dataSource: DataSource, entity: Function): RowTable {
  const sql = tableSql(dataSource, entity);
  const type = dataSource.driver.options.type;
  if (type === 'better-sqlite3') return sqliteRowTable(dataSource, sql);
  if (type === 'postgres') return postgresRowTable(sql);
  throw new InvalidProjectionError(`read models on "${type}" are not supported (SQLite through better-sqlite3, or PostgreSQL)`);
}

/** What both dialects need of an entity: quoted names, the SELECT, the conflict clause, value conversion. */
interface TableSql {
  dataSource: DataSource;
  columns: ColumnMetadata[];
  table: string;
  keyColumn: string;
  list: string;
  select: string;
  insertInto: string;
  onConflict: string;
  /** A row's values in column order, as the driver stores them. */
  values(row: object): unknown[];
  /** The value of the row's `i`th column, as the driver stores it. */
  valueAt(row: object, i: number): unknown;
  /** The rows' values one after the other (a multi-row statement's parameters). */
  valuesOf(rows: object[]): unknown[];
  /** A row from the database's column values. */
  hydrate(raw: Record<string, unknown>): KeyedRow;
  keyOf(row: KeyedRow): string;
}

function tableSql(dataSource: DataSource, entity: Function): TableSql {
  if (!dataSource.hasMetadata(entity)) {
    throw new InvalidProjectionError(`entity ${entity.name} is not registered with the read-model DataSource`);
  }
  const meta = dataSource.getMetadata(entity);
  if (meta.primaryColumns.length !== 1) throw new InvalidProjectionError(`entity ${entity.name} must have exactly one primary column`);
  if (meta.relations.length || meta.embeddeds.length) throw new InvalidProjectionError(`entity ${entity.name} must be flat (no relations or embeddeds)`);
  const driver = dataSource.driver;
  const q = (name: string) => driver.escape(name);
  const table = meta.tablePath.split('.').map(q).join('.');
  const columns = meta.columns;
  const key = meta.primaryColumns[0];
  const list = columns.map((c) => q(c.databaseName)).join(', ');
  const updates = columns.filter((c) => c !== key).map((c) => `${q(c.databaseName)} = EXCLUDED.${q(c.databaseName)}`).join(', ');
  // Per column, the driver's conversion to the stored value, or null where it is the value itself
  // (asked once here, not once per value: a rebuild writes every row of every projection).
  const convert = columns.map((c) => (storedAsIs(c) ? null : (value: unknown) => driver.preparePersistentValue(value, c)));
  const properties = columns.map((c) => c.propertyName);
  const valueAt = (row: Record<string, unknown>, i: number) => {
    const value = row[properties[i]];
    const to = convert[i];
    return to === null ? value : to(value);
  };
  return {
    dataSource,
    columns,
    table,
    keyColumn: q(key.databaseName),
    list,
    select: `SELECT ${list} FROM ${table}`,
    insertInto: `INSERT INTO ${table} (${list})`,
    onConflict: `ON CONFLICT (${q(key.databaseName)}) DO UPDATE SET ${updates}`,
    values: (row) => columns.map((_, i) => valueAt(row as Record<string, unknown>, i)),
    valueAt: (row, i) => valueAt(row as Record<string, unknown>, i),
    valuesOf(rows) {
      const out: unknown[] = new Array(rows.length * columns.length);
      let n = 0;
      for (const row of rows) for (let i = 0; i < columns.length; i++) out[n++] = valueAt(row as Record<string, unknown>, i);
      return out;
    },
    hydrate(raw) {
      const row: Record<string, unknown> = {};
      for (const c of columns) row[c.propertyName] = driver.prepareHydratedValue(raw[c.databaseName], c);
      return row as unknown as KeyedRow;
    },
    keyOf: (row) => String((row as unknown as Record<string, unknown>)[key.propertyName]),
  };
}

/** Column types both drivers store as the value given (their preparePersistentValue returns it unchanged). */
const AS_IS_TYPES = new Set<unknown>(['varchar', 'text', 'integer', 'bigint', 'double precision']);

/** Whether the driver stores this column's values unchanged: a plain type and no transformer. */
function storedAsIs(column: ColumnMetadata): boolean {
  return !column.transformer && AS_IS_TYPES.has(column.type);
}

/**
 * SQLite: statements prepared once on better-sqlite3's connection, run directly. TypeORM's SQLite
 * driver has that one connection, so they run inside the transaction the runner opened through
 * `manager`; going around TypeORM's `query` spares its per-call work (parameter copies, logging,
 * events) on every statement of a rebuild.
 */
function sqliteRowTable(dataSource: DataSource, sql: TableSql): RowTable {
  const connection = () => (dataSource.driver as unknown as { databaseConnection: BetterSqlite3.Database }).databaseConnection;
  const tuples = (n: number) => Array.from({ length: n }, () => `(${sql.columns.map(() => '?').join(', ')})`).join(', ');
  const loadSql = memo((n) => `${sql.select} WHERE ${sql.keyColumn} IN (${Array(n).fill('?').join(', ')})`);
  const insertSql = memo((n) => `${sql.insertInto} VALUES ${tuples(n)}`);
  const upsertSql = memo((n) => `${insertSql(n)} ${sql.onConflict}`);
  const write = (rows: object[], text: (n: number) => string) => {
    for (const chunk of chunks(rows)) statement(connection(), text(chunk.length)).run(sql.valuesOf(chunk));
  };
  const hydrateAll = (raws: unknown[]) => (raws as Record<string, unknown>[]).map(sql.hydrate);
  return {
    async load(_manager, keys) {
      const rows = new Map<string, KeyedRow>();
      for (const chunk of chunks(keys)) {
        for (const row of hydrateAll(statement(connection(), loadSql(chunk.length)).all(chunk))) rows.set(sql.keyOf(row), row);
      }
      return rows;
    },
    insert: async (_manager, rows) => write(rows, insertSql),
    upsert: async (_manager, rows) => write(rows, upsertSql),
    all: async () => sortedByKey(hydrateAll(statement(connection(), sql.select).all()), sql.keyOf),
  };
}

/** Prepared statements per connection and SQL text: each prepared once, for as long as its connection lives. */
const prepared = new WeakMap<BetterSqlite3.Database, Map<string, BetterSqlite3.Statement>>();

function statement(connection: BetterSqlite3.Database, text: string): BetterSqlite3.Statement {
  let statements = prepared.get(connection);
  if (!statements) prepared.set(connection, (statements = new Map()));
  let found = statements.get(text);
  if (!found) statements.set(text, (found = connection.prepare(text)));
  return found;
}

/**
 * PostgreSQL takes a whole batch as one parameter: keys as an array, rows as a JSON array that the
 * server turns into the table's row type. One short statement, parsed in no time, instead of a
 * VALUES list of thousands of parameters; and JSON.stringify costs far less than pg's escaping.
 */
function postgresRowTable(sql: TableSql): RowTable {
  const loadSql = `${sql.select} WHERE ${sql.keyColumn} = ANY($1)`;
  const insertSql = `${sql.insertInto} SELECT ${sql.list} FROM json_populate_recordset(NULL::${sql.table}, $1::json)`;
  const upsertSql = `${insertSql} ${sql.onConflict}`;
  const names = sql.columns.map((c) => c.databaseName);
  const asJson = (row: object) => {
    const out: Record<string, unknown> = {};
    for (let i = 0; i < names.length; i++) out[names[i]] = jsonValue(sql.valueAt(row, i));
    return out;
  };
  // An entity whose columns are all of plain types (storedAsIs) is written as one array per column
  // through unnest instead: the server reads arrays of text faster than it fills records from JSON
  // objects by name (measured: 99k workspace-revision rows in 1.4 s against 1.8-2.0 s at load 10).
  const arrays = sql.columns.every(storedAsIs) ? sql.columns.map((c) => `$${sql.columns.indexOf(c) + 1}::${sql.dataSource.driver.normalizeType(c)}[]`) : null;
  const insertArrays = arrays && `${sql.insertInto} SELECT * FROM unnest(${arrays.join(', ')})`;
  const statements = new Map([
    [insertSql, insertArrays],
    [upsertSql, insertArrays && `${insertArrays} ${sql.onConflict}`],
  ]);
  const copySql = arrays && `COPY ${sql.table} (${sql.list}) FROM STDIN`;
  const write = async (manager: EntityManager, rows: object[], statement: string) => {
    const byArrays = statements.get(statement);
    const copyOn = copySql && statement === insertSql ? manager.queryRunner : undefined;
    for (const chunk of slices(rows, ROWS_PER_JSON)) {
      if (copyOn) await copyRows(copyOn, copySql!, copyText(chunk, sql));
      else if (byArrays) await manager.query(byArrays, sql.columns.map((_, i) => arrayLiteral(chunk, (row) => sql.valueAt(row, i))));
      else await manager.query(statement, [JSON.stringify(chunk.map(asJson))]);
    }
  };
  return {
    async load(manager, keys) {
      const rows = new Map<string, KeyedRow>();
      for (const chunk of slices(keys, ROWS_PER_JSON)) {
        for (const raw of (await manager.query(loadSql, [chunk])) as Record<string, unknown>[]) {
          const row = sql.hydrate(raw);
          rows.set(sql.keyOf(row), row);
        }
      }
      return rows;
    },
    insert: (manager, rows) => write(manager, rows, insertSql),
    upsert: (manager, rows) => write(manager, rows, upsertSql),
    all: async (manager) => sortedByKey(((await manager.query(sql.select)) as Record<string, unknown>[]).map(sql.hydrate), sql.keyOf),
  };
}

/**
 * New rows of a plain-typed entity go in with COPY … FROM STDIN (text format), the server's bulk path:
 * 99k workspace-revision rows took 0.80-0.95 s against 1.20-1.41 s through unnest, with ~0.6 of the
 * client's CPU (docs/architecture.md). It runs on the pg client of the runner's transaction, so the
 * rows still commit with the checkpoint; an upsert, which must check, stays an INSERT … ON CONFLICT.
 */
async function copyRows(queryRunner: QueryRunner, copySql: string, text: string): Promise<void> {
  const client = (await queryRunner.connect()) as PoolClient; // the transaction's own client
  const stream = client.query(copyFrom(copySql));
  stream.end(text);
  await finished(stream);
}

/** Rows in COPY's text format: one line each, columns tab-separated, NULL as \N. */
function copyText(rows: object[], sql: TableSql): string {
  const width = sql.columns.length;
  let out = '';
  for (const row of rows) {
    for (let i = 0; i < width; i++) {
      const value = sql.valueAt(row, i);
      if (i) out += '\t';
      if (value === null || value === undefined) out += '\\N';
      else if (typeof value === 'string') out += COPY_SPECIAL.test(value) ? value.replace(COPY_ESCAPES, copyEscape) : value;
      else out += String(value);
    }
    out += '\n';
  }
  return out;
}

/** What COPY's text format reads specially in a value: the backslash and the row and column separators. */
const COPY_SPECIAL = /[\\\t\n\r]/;
const COPY_ESCAPES = /[\\\t\n\r]/g;
const copyEscape = (c: string) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r');

/** Sorted here, not in SQL, so the order is the same code-unit order on every database collation. */
function sortedByKey(rows: KeyedRow[], keyOf: (row: KeyedRow) => string): KeyedRow[] {
  return rows.sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
}

function memo<T>(build: (n: number) => T): (n: number) => T {
  const cache = new Map<number, T>();
  return (n) => {
    let value = cache.get(n);
    if (value === undefined) cache.set(n, (value = build(n)));
    return value;
  };
}

/**
 * A PostgreSQL array literal of one column's values (those of a storedAsIs column: strings,
 * numbers, null): every element quoted, backslashes and double quotes escaped, so the element's
 * text reaches the column type's input function unchanged; NULL unquoted.
 */
function arrayLiteral(rows: object[], valueOf: (row: object) => unknown): string {
  let out = '{';
  for (let i = 0; i < rows.length; i++) {
    const value = valueOf(rows[i]);
    if (i) out += ',';
    if (value === null || value === undefined) out += 'NULL';
    else if (typeof value === 'number' || typeof value === 'bigint') out += `"${String(value)}"`;
    else out += quotedElement(String(value));
  }
  return `${out}}`;
}

/**
 * An element quoted for an array literal. JSON.stringify escapes `"` and `\` exactly so, natively and
 * without a regex; it is used only where it escapes nothing else (no control character, no lone
 * surrogate), since the array parser reads `\n` as `n`. A rebuild quotes every value of every row.
 */
function quotedElement(text: string): string {
  if (!NEEDS_ESCAPE.test(text)) return `"${text}"`;
  if (!JSON_ESCAPES_MORE.test(text)) return JSON.stringify(text);
  return `"${text.replace(ARRAY_ESCAPES, '\\$&')}"`;
}

const NEEDS_ESCAPE = /[\\"]/;
const ARRAY_ESCAPES = /[\\"]/g;
/** What JSON.stringify would escape besides `"` and `\`: control characters and lone surrogates. */
const JSON_ESCAPES_MORE = /[\u0000-\u001f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** A column value as json_populate_recordset reads it back: what JSON has no literal for goes as the type's text form. */
function jsonValue(value: unknown): unknown {
  if (typeof value === 'number') return Number.isFinite(value) ? value : String(value);
  if (typeof value === 'bigint') return String(value);
  if (Buffer.isBuffer(value)) return `\\x${value.toString('hex')}`;
  return value;
}

function slices<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Splits into slices of ROWS_PER_STATEMENT, then powers of two, to keep statement shapes few. */
function chunks<T>(items: T[]): T[][] {
  const out: T[][] = [];
  let i = 0;
  while (items.length - i >= ROWS_PER_STATEMENT) out.push(items.slice(i, (i += ROWS_PER_STATEMENT)));
  for (let size = ROWS_PER_STATEMENT / 2; size >= 1; size /= 2) {
    if (items.length - i >= size) out.push(items.slice(i, (i += size)));
  }
  return out;
}
