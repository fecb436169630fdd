import { canonicalJson } from '../ledger/events/canonical-json.js';
import type { MaterializeResult, WorkspaceDiff } from './replay.service.js';
import { formatBytes, type TimelineEntry } from './timeline.js';

// Text renderings of replay results for the CLI (the services return data; --json prints that).

export function renderTimeline(entries: TimelineEntry[]): string {
  const rows = [['SEQ', 'TIME', 'TYPE', 'SUMMARY'], ...entries.map((e) => [String(e.seq), e.occurredAt, e.type, e.summary])];
  const widths = [0, 1, 2].map((c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) => [...r.slice(0, 3).map((cell, c) => cell.padEnd(widths[c])), r[3]].join('  ').trimEnd()).join('\n') + '\n';
}

/** NDJSON, one canonical JSON object per event. */
export function timelineJson(entries: TimelineEntry[]): string {
  return entries.map((e) => `${canonicalJson(e)}\n`).join('');
}

export function renderMaterialized(r: MaterializeResult): string {
  return `wrote ${r.files} files (${formatBytes(r.bytes)}) of run ${r.runId} as of seq ${r.at.seq} (${r.at.type}, ${r.at.occurredAt}) to ${r.outDir}\n`;
}

/** A summary line per file, then a unified diff per text file (`a/` = first point, `b/` = second). */
export function renderDiff(d: WorkspaceDiff): string {
  const counts = (['added', 'removed', 'modified'] as const).map((c) => `${d.files.filter((f) => f.change === c).length} ${c}`).join(', ');
  const lines = [`run ${d.runId}: seq ${d.from.seq} (${d.from.type}) → seq ${d.to.seq} (${d.to.type}): ${counts}`];
  const size = (n: number | null | undefined) => (n === null || n === undefined ? '?' : formatBytes(n));
  for (const f of d.files) {
    const mark = f.change === 'added' ? 'A' : f.change === 'removed' ? 'D' : 'M';
    const sizes = f.change === 'added' ? size(f.after?.size) : f.change === 'removed' ? size(f.before?.size) : `${size(f.before?.size)} → ${size(f.after?.size)}`;
    const what = f.diff.note ?? `+${f.diff.linesAdded} −${f.diff.linesRemoved}`;
    lines.push(`${mark} ${f.path}  ${sizes}  ${what}`);
  }
  for (const f of d.files) {
    if (!f.diff.hunks.length) continue;
    lines.push('', `--- ${f.before ? `a/${f.path}\t(seq ${f.before.seq})` : '/dev/null'}`, `+++ ${f.after ? `b/${f.path}\t(seq ${f.after.seq})` : '/dev/null'}`);
    for (const h of f.diff.hunks) {
      lines.push(h.header, ...h.lines);
      if (h.truncatedLines) lines.push(`… ${h.truncatedLines} more lines in this hunk`);
    }
    if (f.diff.omittedHunks) lines.push(`… ${f.diff.omittedHunks} more hunks`);
  }
  return `${lines.join('\n')}\n`;
}
