import type { RunReport, TimelineItem } from './report-model.js';

// Hand-written inline SVG charts for run reports: no scripts, no external references, coordinates
// with one decimal so the same report always yields the same bytes.

export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

const c = (n: number) => n.toFixed(1);
const WIDTH = 720;
const LEFT = 96;
const RIGHT = 16;
const PLOT = WIDTH - LEFT - RIGHT;

function xScale(endS: number): (s: number) => number {
  const span = endS > 0 ? endS : 1;
  return (s) => LEFT + (Math.min(Math.max(s, 0), span) / span) * PLOT;
}

/** Five evenly spaced time ticks (seconds) along the bottom axis. */
function timeAxis(endS: number, y: number): string {
  const x = xScale(endS);
  const parts = [`<line x1="${c(LEFT)}" y1="${c(y)}" x2="${c(LEFT + PLOT)}" y2="${c(y)}" stroke="#444"/>`];
  for (let i = 0; i <= 4; i++) {
    const s = (endS * i) / 4;
    parts.push(
      `<line x1="${c(x(s))}" y1="${c(y)}" x2="${c(x(s))}" y2="${c(y + 4)}" stroke="#444"/>`,
      `<text x="${c(x(s))}" y="${c(y + 16)}" font-size="11" text-anchor="middle">${c(s)} s</text>`,
    );
  }
  return parts.join('');
}

/** Score per submission over time, the baseline (dashed) and the best-so-far step line. */
export function scoreChart(report: RunReport): string {
  const height = 240;
  const top = 16;
  const bottom = height - 36;
  const x = xScale(report.timeline.endS);
  const y = (score: number) => bottom - (Math.min(Math.max(score, 0), 100) / 100) * (bottom - top);
  const parts = [
    `<svg width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="score trajectory" font-family="sans-serif">`,
    `<rect x="0" y="0" width="${WIDTH}" height="${height}" fill="#fff"/>`,
  ];
  for (const score of [0, 50, 100]) {
    parts.push(
      `<line x1="${c(LEFT)}" y1="${c(y(score))}" x2="${c(LEFT + PLOT)}" y2="${c(y(score))}" stroke="#ddd"/>`,
      `<text x="${c(LEFT - 6)}" y="${c(y(score) + 4)}" font-size="11" text-anchor="end">${score}</text>`,
    );
  }
  if (report.scores.baseline !== null) {
    const by = y(report.scores.baseline);
    parts.push(
      `<line x1="${c(LEFT)}" y1="${c(by)}" x2="${c(LEFT + PLOT)}" y2="${c(by)}" stroke="#888" stroke-dasharray="4 3"/>`,
      `<text x="${c(LEFT + 4)}" y="${c(by - 4)}" font-size="11" fill="#666">baseline ${escapeXml(String(report.scores.baseline))}</text>`,
    );
  }
  let best: number | null = null;
  const steps: string[] = [];
  for (const s of report.submissions) {
    if (s.status === 'graded' && (best === null || s.score > best)) {
      if (best !== null) steps.push(`${c(x(s.atS))},${c(y(best))}`);
      best = s.score;
      steps.push(`${c(x(s.atS))},${c(y(best))}`);
    }
  }
  if (best !== null) steps.push(`${c(LEFT + PLOT)},${c(y(best))}`);
  if (steps.length) parts.push(`<polyline points="${steps.join(' ')}" fill="none" stroke="#2a7" stroke-width="1.5"/>`);
  for (const s of report.submissions) {
    const px = x(s.atS);
    const py = y(s.score);
    const title = `<title>${escapeXml(`#${s.index} ${s.submissionId}: ${s.status} score ${s.score} at ${s.atS} s [seq ${s.evidence.join(', ')}]`)}</title>`;
    parts.push(
      s.valid
        ? `<circle cx="${c(px)}" cy="${c(py)}" r="4" fill="#2a7">${title}</circle>`
        : `<path d="M${c(px - 4)} ${c(py - 4)}L${c(px + 4)} ${c(py + 4)}M${c(px - 4)} ${c(py + 4)}L${c(px + 4)} ${c(py - 4)}" stroke="#c33" stroke-width="2">${title}</path>`,
    );
  }
  if (!report.submissions.length) parts.push(`<text x="${c(LEFT + PLOT / 2)}" y="${c((top + bottom) / 2)}" font-size="13" text-anchor="middle" fill="#666">no submissions</text>`);
  parts.push(`<text x="12" y="${c((top + bottom) / 2)}" font-size="11">score</text>`, timeAxis(report.timeline.endS, bottom), '</svg>');
  return parts.join('');
}

const BASE_LANES: { lane: TimelineItem['lane']; color: string }[] = [
  { lane: 'submissions', color: '#2a7' },
  { lane: 'rollouts', color: '#a5c' },
  { lane: 'files', color: '#37c' },
  { lane: 'training', color: '#e80' },
  { lane: 'evaluation', color: '#0aa' },
  { lane: 'install', color: '#999' },
  { lane: 'agent-tool', color: '#c9b' },
  { lane: 'other', color: '#bbb' },
];

/** A tooltip's text at most this long: a chart names what ran, the report's tables and events hold the whole value. */
export const TOOLTIP_CHARS = 160;
const tooltip = (text: string) => (text.length > TOOLTIP_CHARS ? `${text.slice(0, TOOLTIP_CHARS)}… (${text.length - TOOLTIP_CHARS} more characters)` : text);

/** One lane per activity: process bars by kind, ticks for file changes and rollouts, submission dots; model calls for LLM-driven runs. */
export function timelineChart(report: RunReport): string {
  const LANES = report.llm ? [...BASE_LANES.slice(0, 1), { lane: 'model-calls' as const, color: '#36a' }, ...BASE_LANES.slice(1)] : BASE_LANES;
  const laneHeight = 22;
  const top = 8;
  const height = top + LANES.length * laneHeight + 36;
  const bottom = top + LANES.length * laneHeight;
  const endS = report.timeline.endS;
  const x = xScale(endS);
  const parts = [
    `<svg width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="timeline" font-family="sans-serif">`,
    `<rect x="0" y="0" width="${WIDTH}" height="${height}" fill="#fff"/>`,
  ];
  LANES.forEach(({ lane, color }, i) => {
    const y0 = top + i * laneHeight;
    parts.push(
      `<text x="${c(LEFT - 6)}" y="${c(y0 + 15)}" font-size="11" text-anchor="end">${lane}</text>`,
      `<line x1="${c(LEFT)}" y1="${c(y0 + laneHeight)}" x2="${c(LEFT + PLOT)}" y2="${c(y0 + laneHeight)}" stroke="#eee"/>`,
    );
    for (const item of report.timeline.items.filter((it) => it.lane === lane)) {
      const title = `<title>${escapeXml(`${tooltip(item.label)} at ${item.startS} s [seq ${item.seq}]`)}</title>`;
      const sx = x(item.startS);
      if (lane === 'submissions') {
        parts.push(`<circle cx="${c(sx)}" cy="${c(y0 + 11)}" r="4" fill="${color}">${title}</circle>`);
      } else if (lane === 'files' || lane === 'rollouts') {
        parts.push(`<rect x="${c(sx - 0.75)}" y="${c(y0 + 4)}" width="1.5" height="14" fill="${color}">${title}</rect>`);
      } else {
        const w = Math.max(1.5, x(item.endS ?? endS) - sx);
        parts.push(`<rect x="${c(sx)}" y="${c(y0 + 5)}" width="${c(w)}" height="12" fill="${color}" fill-opacity="0.6">${title}</rect>`);
      }
    }
  });
  parts.push(timeAxis(endS, bottom), '</svg>');
  return parts.join('');
}
