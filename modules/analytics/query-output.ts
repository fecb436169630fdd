import { csvCell } from '../reports/results-csv.js';
import { inertLine } from '../reports/inert-text.js';
import type { QueryResult } from './sql-engine.js';

// How `a2rl query` and GET /query show a result. Values come from recorded data (paths, model
// names, payloads), so text and CSV are inert as composed (modules/reports/inert-text.ts); JSON keeps
// the values and is escaped for a terminal by the caller (src/commands/terminal.ts).

const text = (v: unknown): string => (v === null ? '' : typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v));

/** Columns padded to their widest cell, a header line, then the row count. */
export function resultTable(r: QueryResult): string {
  const cells = [r.columns.map((c) => inertLine(c.name)), ...r.rows.map((row) => row.map((v) => inertLine(text(v))))];
  const widths = r.columns.map((_, c) => Math.max(...cells.map((row) => row[c].length)));
  const lines = cells.map((row) => row.map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c]))).join('  ').trimEnd());
  return `${lines.join('\n')}\n(${r.rows.length} row${r.rows.length === 1 ? '' : 's'})\n`;
}

/** RFC 4180 with CRLF line ends; cells as results.csv writes them (no formula starts, controls escaped). */
export function resultCsv(r: QueryResult): string {
  const lines = [r.columns.map((c) => csvCell(c.name)).join(','), ...r.rows.map((row) => row.map((v) => csvCell(text(v))).join(','))];
  return `${lines.join('\r\n')}\r\n`;
}

/** {columns: [{name, type}], rows: [[…]]}: one JSON object. */
export function resultJson(r: QueryResult): string {
  return `${JSON.stringify(r)}\n`;
}
