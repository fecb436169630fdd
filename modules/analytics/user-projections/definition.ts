import type { ColumnType } from '../table-schemas.js';

// A user projection (docs/analysis.md "User projections"): one self-contained ES module, written by
// an operator, exporting
//   name         table name: [a-z][a-z0-9_]{0,62}, not a built-in table's
//   version      integer ≥ 1; a new version rebuilds the table from zero
//   columns      { column: 'VARCHAR' | 'INTEGER' | 'BIGINT' | 'DOUBLE' | 'BOOLEAN' }, in table order
//   initialState a JSON value, or a function returning one
//   evolve       (state, event) → state: pure, called once per run event in commit order
//   rows         (state) → [{ column: value }]: the table's rows
// (or a default export object with the same fields). It runs in a worker thread with a time limit.

export const NAME = /^[a-z][a-z0-9_]{0,62}$/;
export const COLUMN_TYPES: readonly ColumnType[] = ['VARCHAR', 'INTEGER', 'BIGINT', 'DOUBLE', 'BOOLEAN'];
export const RESERVED = new Set(['runs', 'submissions', 'llm_usage', 'events']);

export interface UserProjectionMeta {
  name: string;
  version: number;
  columns: { name: string; type: ColumnType }[];
}

/** Checks a loaded module's exports; returns its meta or throws one line saying what is wrong. */
export function checkDefinition(mod: Record<string, unknown>): UserProjectionMeta & { evolve: (s: unknown, e: unknown) => unknown; rows: (s: unknown) => unknown; initial: () => unknown } {
  const def = (mod.default && typeof mod.default === 'object' ? mod.default : mod) as Record<string, unknown>;
  const { name, version, columns, initialState, evolve, rows } = def;
  if (typeof name !== 'string' || !NAME.test(name)) throw new Error(`name must match ${NAME} (a table name), got ${JSON.stringify(name)}`);
  if (RESERVED.has(name)) throw new Error(`name "${name}" is a built-in table`);
  if (!Number.isSafeInteger(version) || (version as number) < 1) throw new Error(`version must be an integer ≥ 1, got ${JSON.stringify(version)}`);
  if (!columns || typeof columns !== 'object' || Array.isArray(columns)) throw new Error('columns must be an object {column: type}');
  const cols = Object.entries(columns as Record<string, unknown>).map(([n, t]) => {
    if (!NAME.test(n)) throw new Error(`column name must match ${NAME}, got ${JSON.stringify(n)}`);
    if (!COLUMN_TYPES.includes(t as ColumnType)) throw new Error(`column ${n}: type must be one of ${COLUMN_TYPES.join(', ')}, got ${JSON.stringify(t)}`);
    return { name: n, type: t as ColumnType };
  });
  if (!cols.length) throw new Error('columns must name at least one column');
  if (typeof evolve !== 'function') throw new Error('evolve must be a function (state, event) → state');
  if (typeof rows !== 'function') throw new Error('rows must be a function (state) → rows');
  if (initialState === undefined) throw new Error('initialState must be a JSON value or a function returning one');
  const initial = typeof initialState === 'function' ? (initialState as () => unknown) : () => structuredClone(initialState);
  return { name, version: version as number, columns: cols, evolve: evolve as never, rows: rows as never, initial };
}

/** A row object as the table's cells (column order), or throws naming the row and column. */
export function rowCells(meta: UserProjectionMeta, row: unknown, index: number): (string | number | boolean | null)[] {
  if (!row || typeof row !== 'object' || Array.isArray(row)) throw new Error(`rows()[${index}] is not an object`);
  const known = new Set(meta.columns.map((c) => c.name));
  const extra = Object.keys(row).find((k) => !known.has(k));
  if (extra !== undefined) throw new Error(`rows()[${index}] has column "${extra}", which columns does not declare`);
  return meta.columns.map((c) => {
    const v = (row as Record<string, unknown>)[c.name];
    if (v === null || v === undefined) return null;
    const bad = () => new Error(`rows()[${index}].${c.name} is not of type ${c.type}: ${shown(v)}`);
    switch (c.type) {
      case 'VARCHAR':
        if (typeof v !== 'string') throw bad();
        return v;
      case 'INTEGER':
        if (!Number.isInteger(v) || Math.abs(v as number) > 2 ** 31 - 1) throw bad();
        return v as number;
      case 'BIGINT':
        if (!Number.isSafeInteger(v)) throw bad();
        return v as number;
      case 'DOUBLE':
        if (typeof v !== 'number' || !Number.isFinite(v)) throw bad();
        return v;
      case 'BOOLEAN':
        if (typeof v !== 'boolean') throw bad();
        return v;
    }
  });
}

/** A value in an error message: its JSON (cut), or its kind when it has none. */
function shown(v: unknown): string {
  try {
    return String(JSON.stringify(v)).slice(0, 80);
  } catch {
    return typeof v;
  }
}
