import { existsSync, lstatSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { csvCell } from '../reports/results-csv.js';
import type { TableData } from './table-schemas.js';
import { writeParquet, type TableFormat } from './sql-engine.js';

export const TABLE_FORMATS: readonly TableFormat[] = ['parquet', 'csv'];

export interface WrittenTable {
  table: string;
  file: string;
  rows: number;
}

/**
 * Writes `<dir>/<table>.<format>` for each table. The directory is created when missing; a file
 * already there is not replaced (one line naming it), nor is a link followed.
 */
export async function exportTables(tables: readonly TableData[], dir: string, format: TableFormat): Promise<WrittenTable[]> {
  if (existsSync(dir) && !lstatSync(dir).isDirectory()) throw new Error(`-o ${dir}: not a directory`);
  const files = tables.map((t) => path.resolve(dir, `${t.spec.name}.${format}`));
  const taken = files.find((f) => existsSync(f) || isLink(f));
  if (taken) throw new Error(`${taken} already exists: give an empty or new directory`);
  mkdirSync(dir, { recursive: true });
  if (format === 'parquet') await writeParquet(tables, dir);
  else tables.forEach((t, i) => writeFileSync(files[i], tableCsv(t), { flag: 'wx' }));
  return tables.map((t, i) => ({ table: t.spec.name, file: files[i], rows: t.rows.length }));
}

function isLink(file: string): boolean {
  try {
    return lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}

/** RFC 4180 (CRLF), the header the column names, cells as results.csv writes them; empty for null. */
export function tableCsv(t: TableData): string {
  const lines = [t.spec.columns.map((c) => c.name).join(',')];
  for (const row of t.rows) lines.push(row.map((v) => (v === null ? '' : csvCell(String(v)))).join(','));
  return `${lines.join('\r\n')}\r\n`;
}
