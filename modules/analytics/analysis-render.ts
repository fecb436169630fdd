import { canonicalJson } from '../ledger/events/canonical-json.js';
import { escapeXml } from '../reports/charts.js';
import { inertLine, inertText } from '../reports/inert-text.js';
import { csvCell, formatNumber } from '../reports/results-csv.js';
import type { AnalysisReport, AnalysisTable, Cell } from './analysis-tables.js';

// `a2rl analysis tables` outputs. Text cells cite runs by reference (R1, R2, …; the run list at the
// end maps each to its run id), JSON and CSV by run id. Names come from recorded data: md escapes
// Markdown, HTML escapes XML, CSV writes cells as results.csv does, and every text output is inert.

export const ANALYSIS_FORMATS = ['md', 'csv', 'json', 'html'] as const;
export type AnalysisFormat = (typeof ANALYSIS_FORMATS)[number];

export function renderAnalysis(report: AnalysisReport, format: AnalysisFormat): string {
  switch (format) {
    case 'json':
      return `${canonicalJson(report)}\n`;
    case 'csv':
      return analysisCsv(report);
    case 'md':
      return inertText(analysisMarkdown(report));
    case 'html':
      return analysisHtml(report);
  }
}

function valueText(v: Cell['value']): string {
  if (v === null) return '-';
  if (typeof v === 'number') return formatNumber(v);
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  return v;
}

function refsOf(report: AnalysisReport): Map<string, string> {
  return new Map(report.runs.map((r) => [r.runId, r.ref]));
}

/** R1–R4,R7: consecutive references as ranges. */
function citeText(runs: readonly string[], refs: Map<string, string>): string {
  const nums = runs.map((id) => Number(refs.get(id)?.slice(1))).filter((n) => Number.isFinite(n)).sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < nums.length; ) {
    let j = i;
    while (j + 1 < nums.length && nums[j + 1] === nums[j] + 1) j++;
    parts.push(j > i ? `R${nums[i]}–R${nums[j]}` : `R${nums[i]}`);
    i = j + 1;
  }
  return parts.join(',');
}

function mdText(text: string): string {
  return text.replace(/(\r?\n)+/g, ' ').replace(/([\\`*_[\]<>|])/g, '\\$1').replace(/&(?=#?\w+;)/g, '\\&');
}

export function analysisMarkdown(report: AnalysisReport): string {
  const refs = refsOf(report);
  const out = [`# Analysis tables: campaign ${mdText(report.campaignId)}`, '', 'Each value cites the runs it was computed from (R…, listed at the end).', ''];
  for (const t of report.tables) {
    out.push(`## ${mdText(t.title)}`, '');
    if (!t.rows.length) {
      out.push('(no rows)', '');
      continue;
    }
    out.push(`| ${t.columns.map(mdText).join(' | ')} |`, `| ${t.columns.map(() => '---').join(' | ')} |`);
    for (const row of t.rows) {
      out.push(`| ${row.map((c, i) => (i < t.keys ? mdText(valueText(c.value)) : `${mdText(valueText(c.value))}${c.runs.length ? ` (${citeText(c.runs, refs)})` : ''}`)).join(' | ')} |`);
    }
    out.push('');
  }
  out.push('## Runs', '', '| ref | run | task | agent | driver | seed | level | state |', '| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of report.runs) out.push(`| ${r.ref} | ${[r.runId, r.task, r.agent, r.driver, r.seed === null ? null : String(r.seed), r.level, r.state].map((v) => mdText(v ?? '-')).join(' | ')} |`);
  return `${out.join('\n')}\n`;
}

/** One line per value cell: table, the row's keys (as key=value pairs), column, value, runs (run ids joined by ';'). */
export function analysisCsv(report: AnalysisReport): string {
  const lines = ['table,row,column,value,runs'];
  for (const t of report.tables) {
    for (const row of t.rows) {
      const keys = row.slice(0, t.keys).map((c, i) => `${t.columns[i]}=${valueText(c.value)}`).join(';');
      row.slice(t.keys).forEach((c, i) => {
        const v = c.value === null ? '' : typeof c.value === 'number' ? formatNumber(c.value) : String(c.value);
        lines.push([t.id, keys, t.columns[t.keys + i], v, c.runs.join(';')].map(csvCell).join(','));
      });
    }
  }
  return `${lines.join('\r\n')}\r\n`;
}

// ---- HTML ----

const n1 = (x: number) => x.toFixed(1);
const esc = (s: string) => escapeXml(inertLine(s));

function htmlTable(t: AnalysisTable, refs: Map<string, string>): string {
  const head = `<tr>${t.columns.map((c) => `<th>${esc(c)}</th>`).join('')}</tr>`;
  const body = t.rows
    .map((row) => `<tr>${row.map((c, i) => (i < t.keys ? `<th scope="row">${esc(valueText(c.value))}</th>` : `<td>${esc(valueText(c.value))}${c.runs.length ? ` <small title="${esc(c.runs.join(' '))}">${esc(citeText(c.runs, refs))}</small>` : ''}</td>`)).join('')}</tr>`)
    .join('\n');
  return `<h2>${esc(t.title)}</h2>\n${t.rows.length ? `<table>\n${head}\n${body}\n</table>` : '<p>(no rows)</p>'}`;
}

/** Improvement per row with its 95% interval (whisker), and the task's noise floor as a band. */
function improvementChart(t: AnalysisTable): string {
  const rows = t.rows.filter((r) => typeof r[8].value === 'number');
  if (!rows.length) return '';
  const col = (name: string) => t.columns.indexOf(name);
  const [base, best, lo, hi, imp, fl, flo, fhi] = ['baseline', 'best (mean)', 'best 95% CI low', 'best 95% CI high', 'improvement', 'noise floor', 'floor 95% CI low', 'floor 95% CI high'].map(col);
  const num = (r: Cell[], i: number) => (typeof r[i].value === 'number' ? (r[i].value as number) : null);
  // Everything relative to the row's baseline: improvement, its interval, and the floor's interval.
  const points = rows.map((r) => {
    const b = num(r, base) ?? 0;
    return { label: `${valueText(r[0].value)} · ${valueText(r[1].value)} · ${valueText(r[2].value)}`, imp: num(r, imp)!, lo: num(r, lo) === null ? null : num(r, lo)! - b, hi: num(r, hi) === null ? null : num(r, hi)! - b, flo: num(r, flo) === null ? null : num(r, flo)! - b, fhi: num(r, fhi) === null ? null : num(r, fhi)! - b, best: num(r, best), floor: num(r, fl) };
  });
  const values = points.flatMap((p) => [p.imp, p.lo, p.hi, p.flo, p.fhi, 0].filter((v): v is number => v !== null));
  const min = Math.min(...values);
  const max = Math.max(...values);
  const span = max - min || 1;
  const W = 720, L = 260, R = 20, ROW = 26, TOP = 24;
  const x = (v: number) => L + ((v - min) / span) * (W - L - R);
  const H = TOP + points.length * ROW + 28;
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="improvement per task, agent and driver">`,
    `<text x="${L}" y="14" font-size="12">improvement over the baseline (points): mean, 95% interval, noise floor band (grey)</text>`,
    `<line x1="${n1(x(0))}" y1="${TOP}" x2="${n1(x(0))}" y2="${TOP + points.length * ROW}" stroke="#888" stroke-dasharray="3,3"/>`];
  points.forEach((p, i) => {
    const y = TOP + i * ROW + ROW / 2;
    parts.push(`<text x="${L - 8}" y="${n1(y + 4)}" font-size="11" text-anchor="end">${esc(p.label)}</text>`);
    if (p.flo !== null && p.fhi !== null) parts.push(`<rect x="${n1(x(p.flo))}" y="${n1(y - 9)}" width="${n1(Math.max(1, x(p.fhi) - x(p.flo)))}" height="18" fill="#ddd"/>`);
    if (p.lo !== null && p.hi !== null) parts.push(`<line x1="${n1(x(p.lo))}" y1="${n1(y)}" x2="${n1(x(p.hi))}" y2="${n1(y)}" stroke="#246" stroke-width="2"/>`);
    parts.push(`<circle cx="${n1(x(p.imp))}" cy="${n1(y)}" r="4" fill="#246"><title>${esc(`${p.label}: ${formatNumber(p.imp)}`)}</title></circle>`);
  });
  const axisY = TOP + points.length * ROW + 14;
  for (const v of [min, (min + max) / 2, max]) parts.push(`<text x="${n1(x(v))}" y="${axisY}" font-size="10" text-anchor="middle">${esc(formatNumber(Math.round(v * 100) / 100))}</text>`);
  parts.push('</svg>');
  return parts.join('\n');
}

/** Stacked horizontal bars: one per row of a count table (routes per task, failure classes per agent × driver). */
function stackedChart(t: AnalysisTable, first: number, last: number, label: string): string {
  if (!t.rows.length) return '';
  const cats = t.columns.slice(first, last);
  const palette = ['#246', '#4a8', '#c84', '#a46', '#68c', '#888', '#cb4', '#4cc', '#c4c', '#8a4', '#a66', '#66a', '#aaa', '#444'];
  const W = 720, L = 260, R = 20, ROW = 24, TOP = 20;
  const totals = t.rows.map((r) => r.slice(first, last).reduce((s, c) => s + (typeof c.value === 'number' ? c.value : 0), 0));
  const max = Math.max(1, ...totals);
  const H = TOP + t.rows.length * ROW + 16 + Math.ceil(cats.length / 4) * 16;
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(label)}">`, `<text x="${L}" y="12" font-size="12">${esc(label)}</text>`];
  t.rows.forEach((r, i) => {
    const y = TOP + i * ROW;
    parts.push(`<text x="${L - 8}" y="${n1(y + 15)}" font-size="11" text-anchor="end">${esc(r.slice(0, t.keys).map((c) => valueText(c.value)).join(' · '))}</text>`);
    let at = L;
    r.slice(first, last).forEach((c, k) => {
      const v = typeof c.value === 'number' ? c.value : 0;
      if (!v) return;
      const w = (v / max) * (W - L - R);
      parts.push(`<rect x="${n1(at)}" y="${n1(y + 3)}" width="${n1(w)}" height="16" fill="${palette[k % palette.length]}"><title>${esc(`${cats[k]}: ${v}`)}</title></rect>`);
      at += w;
    });
  });
  cats.forEach((cat, k) => {
    const y = TOP + t.rows.length * ROW + 12 + Math.floor(k / 4) * 16;
    const xk = L + (k % 4) * 160;
    parts.push(`<rect x="${xk}" y="${y - 9}" width="10" height="10" fill="${palette[k % palette.length]}"/><text x="${xk + 14}" y="${y}" font-size="10">${esc(cat)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

export function analysisHtml(report: AnalysisReport): string {
  const refs = refsOf(report);
  const byId = new Map(report.tables.map((t) => [t.id, t]));
  const improvement = byId.get('improvement')!;
  const routes = byId.get('routes')!;
  const failures = byId.get('failures')!;
  const figures = [
    improvementChart(improvement),
    stackedChart(routes, 1, routes.columns.length - 1, 'executed routes per task (runs)'),
    stackedChart(failures, 3, failures.columns.length, 'failure classes per agent × driver (runs)'),
  ].filter(Boolean);
  const runs = `<h2>Runs</h2>\n<table>\n<tr><th>ref</th><th>run</th><th>task</th><th>agent</th><th>driver</th><th>seed</th><th>level</th><th>state</th></tr>\n${report.runs
    .map((r) => `<tr>${[r.ref, r.runId, r.task, r.agent, r.driver, r.seed === null ? null : String(r.seed), r.level, r.state].map((v) => `<td>${esc(v ?? '-')}</td>`).join('')}</tr>`)
    .join('\n')}\n</table>`;
  return [
    '<!DOCTYPE html>',
    '<html lang="en"><head><meta charset="utf-8">',
    `<title>${esc(`Analysis tables: campaign ${report.campaignId}`)}</title>`,
    '<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;font-size:13px}small{color:#666}</style>',
    '</head><body>',
    `<h1>${esc(`Analysis tables: campaign ${report.campaignId}`)}</h1>`,
    '<p>Each value cites the runs it was computed from (R…, listed at the end; hover for run ids).</p>',
    ...figures,
    ...report.tables.map((t) => htmlTable(t, refs)),
    runs,
    '</body></html>',
    '',
  ].join('\n');
}
