import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { inertLine } from './inert-text.js';

/** Fixed number formatting for text outputs: at most 4 decimals, no exponent, no trailing zeros. */
export function formatNumber(n: number | null): string {
  if (n === null) return '';
  const fixed = n.toFixed(4).replace(/\.?0+$/, '');
  return fixed === '-0' ? '0' : fixed;
}

/** RFC 4180: quote a field containing a comma, quote, CR or LF; double inner quotes. */
export function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

/**
 * What a spreadsheet reads as the start of a formula (OWASP CSV injection), full-width forms included
 * (some spreadsheets fold them); OWASP's other two, tab and CR, are already shown escaped by inertLine.
 */
const FORMULA_START = /^[=+\-@\uff1d\uff0b\uff0d\uff20]/;
const PLAIN_NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

/**
 * A cell a spreadsheet shows as text, never evaluates: recorded strings (a requested model name such
 * as `=HYPERLINK(…)`) that would start a formula get a leading `'`; numbers such as -3.5 stay numbers.
 * Control characters are shown escaped (inert-text.ts), so `cat results.csv` is safe too.
 */
export function csvCell(value: string): string {
  const inert = inertLine(value);
  return csvField(FORMULA_START.test(inert) && !PLAIN_NUMBER.test(inert) ? `'${inert}` : inert);
}

export const RESULTS_COLUMNS = [
  'run_id', 'timestamp', 'task', 'agent', 'driver_model', 'base_model', 'baseline', 'best_score',
  'improvement', 'submissions', 'duration_s', 'success', 'workspace',
] as const;

/** A run analysis plus its workspace path (from WorkspacePrepared; not part of RunAnalysis yet). */
export type ResultsRun = RunAnalysis;

const byText = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);

/**
 * The paper's results.csv: one row per run ordered by timestamp (RunScheduled's occurredAt) then
 * run id; CRLF line ends per RFC 4180. best_score and improvement are empty when the run has no
 * graded submission; success is `true` exactly when the failure class is `success`.
 */
export function resultsCsv(runs: readonly ResultsRun[]): string {
  const sorted = [...runs].sort((p, q) => byText(p.scheduledAt ?? '', q.scheduledAt ?? '') || byText(p.runId, q.runId));
  const lines = [RESULTS_COLUMNS.join(',')];
  for (const a of sorted) {
    const cells = [
      a.runId, a.scheduledAt ?? '', a.task ?? '', a.agent ?? '', a.driver ?? '', a.baseModel ?? '',
      formatNumber(a.baseline), formatNumber(a.best), formatNumber(a.improvement), String(a.submissions.length),
      formatNumber(a.durationS), String(a.failure.class === 'success'), a.workspace ?? '',
    ];
    lines.push(cells.map(csvCell).join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
}
