import { structuredPatch, type StructuredPatchHunk } from 'diff';

/**
 * The one line diff of a2rl: the analysis's line counts per code change, the reports' per-submission
 * diffs and `a2rl replay --diff` all come from `diffFiles`, so no two views of a change can disagree.
 * The edit script is the `diff` package's (jsdiff: Myers' O(ND) shortest edit script), grouped into
 * unified hunks with 3 lines of context, merged and numbered as GNU `diff -u` does.
 *
 * Limits, so one huge or rewritten file cannot blow up an analysis or a report. All are
 * deterministic (no time-outs), because the counts end up in projection rows:
 * - either side larger than MAX_DIFF_BYTES, or containing a NUL byte (binary): no counts, no hunks, a note;
 * - more than MAX_EDIT_LENGTH changed lines: the shortest script is not searched for (its cost grows
 *   with size × changes); everything between the common prefix and suffix is shown and counted as
 *   removed, then added: still a correct diff, just not a minimal one (exact for created and deleted files);
 * - at most MAX_HUNKS hunks per file (the rest counted in `omittedHunks`) and at most MAX_HUNK_LINES
 *   lines per hunk (the rest counted in `truncatedLines`): these cap what is shown, not what is counted.
 * Lines end at "\n"; a missing final newline is not reported as a change.
 */
export const CONTEXT_LINES = 3;
export const MAX_HUNKS = 5;
export const MAX_HUNK_LINES = 60;
export const MAX_DIFF_BYTES = 256 * 1024;
export const MAX_EDIT_LENGTH = 1000;

export interface Hunk {
  /** `@@ -a,b +c,d @@` */
  header: string;
  /** Each line prefixed with ' ', '-' or '+'. */
  lines: string[];
  truncatedLines: number;
}

export interface FileDiff {
  linesAdded: number;
  linesRemoved: number;
  hunks: Hunk[];
  omittedHunks: number;
  /** Why no hunks are shown (binary, too large), else null. */
  note: string | null;
}

/** A diff with nothing to show and why: no lines are counted (also for callers that know a side cannot be diffed). */
export function unshownDiff(note: string): FileDiff {
  return { linesAdded: 0, linesRemoved: 0, hunks: [], omittedHunks: 0, note };
}

/** The diff of `before` → `after` (null = absent file, i.e. created or deleted). */
export function diffFiles(before: Buffer | null, after: Buffer | null): FileDiff {
  const sides = [before, after];
  if (sides.some((b) => b !== null && b.length > MAX_DIFF_BYTES)) return unshownDiff(`larger than ${MAX_DIFF_BYTES} bytes: diff not shown`);
  if (sides.some((b) => b !== null && b.includes(0))) return unshownDiff('binary content: diff not shown');
  const oldText = textOf(before);
  const newText = textOf(after);
  let hunks: StructuredPatchHunk[];
  if (oldText === newText) hunks = [];
  // A created or deleted file needs no search (and would exceed MAX_EDIT_LENGTH beyond 1000 lines).
  else if (oldText === '' || newText === '') hunks = [rewriteHunk(oldText, newText)];
  else hunks = structuredPatch('', '', oldText, newText, undefined, undefined, { context: CONTEXT_LINES, maxEditLength: MAX_EDIT_LENGTH })?.hunks ?? [rewriteHunk(oldText, newText)];
  let linesAdded = 0;
  let linesRemoved = 0;
  for (const hunk of hunks) {
    for (const line of hunk.lines) {
      if (line.startsWith('+')) linesAdded++;
      else if (line.startsWith('-')) linesRemoved++;
    }
  }
  return {
    linesAdded,
    linesRemoved,
    hunks: hunks.slice(0, MAX_HUNKS).map(toHunk),
    omittedHunks: Math.max(0, hunks.length - MAX_HUNKS),
    note: null,
  };
}

/** UTF-8 text with a final newline, so that "a\nb" and "a\nb\n" diff as equal (no "\ No newline" lines). */
function textOf(body: Buffer | null): string {
  const text = body?.toString('utf8') ?? '';
  return text === '' || text.endsWith('\n') ? text : `${text}\n`;
}

/** Beyond MAX_EDIT_LENGTH: one hunk, everything between the common prefix and suffix removed then added. */
function rewriteHunk(oldText: string, newText: string): StructuredPatchHunk {
  const a = oldText.split('\n').slice(0, -1);
  const b = newText.split('\n').slice(0, -1);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let end = 0;
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end++;
  const before = a.slice(Math.max(0, start - CONTEXT_LINES), start);
  const after = a.slice(a.length - end, a.length - end + CONTEXT_LINES);
  const removed = a.slice(start, a.length - end);
  const added = b.slice(start, b.length - end);
  return {
    oldStart: start - before.length + 1,
    oldLines: before.length + removed.length + after.length,
    newStart: start - before.length + 1,
    newLines: before.length + added.length + after.length,
    lines: [...before.map((l) => ` ${l}`), ...removed.map((l) => `-${l}`), ...added.map((l) => `+${l}`), ...after.map((l) => ` ${l}`)],
  };
}

/** GNU range: an empty side is numbered from the line before it (`-0,0` for a created file). */
function range(start: number, length: number): string {
  const from = length === 0 ? start - 1 : start;
  return length === 1 ? `${from}` : `${from},${length}`;
}

function toHunk(h: StructuredPatchHunk): Hunk {
  return {
    header: `@@ -${range(h.oldStart, h.oldLines)} +${range(h.newStart, h.newLines)} @@`,
    lines: h.lines.slice(0, MAX_HUNK_LINES),
    truncatedLines: Math.max(0, h.lines.length - MAX_HUNK_LINES),
  };
}
