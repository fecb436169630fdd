/**
 * A small line diff for run reports: Myers' O(ND) shortest edit script after trimming the common
 * prefix and suffix, grouped into unified-diff hunks with 3 lines of context (GNU header format).
 *
 * Limits, so one huge or rewritten file cannot blow up a report (all deterministic):
 * - either side larger than MAX_DIFF_BYTES, or containing a NUL byte (binary): no hunks, a note;
 * - an edit distance above MAX_EDIT_DISTANCE: the middle is shown as removed-then-added (still a
 *   correct diff, just not a minimal one);
 * - at most MAX_HUNKS hunks per file (the rest are counted in `omittedHunks`) and at most
 *   MAX_HUNK_LINES lines per hunk (the rest counted in `truncatedLines`).
 * Lines are split on "\n"; a missing final newline is not reported as a change.
 */
export const CONTEXT_LINES = 3;
export const MAX_HUNKS = 5;
export const MAX_HUNK_LINES = 60;
export const MAX_DIFF_BYTES = 256 * 1024;
export const MAX_EDIT_DISTANCE = 1000;

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

type Op = ' ' | '-' | '+';
interface Edit {
  op: Op;
  text: string;
}

export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** The diff of `before` → `after` (null = absent file, i.e. created or deleted). */
export function diffFiles(before: Buffer | null, after: Buffer | null): FileDiff {
  const sides = [before, after];
  if (sides.some((b) => b !== null && b.length > MAX_DIFF_BYTES)) {
    return { linesAdded: 0, linesRemoved: 0, hunks: [], omittedHunks: 0, note: `larger than ${MAX_DIFF_BYTES} bytes: diff not shown` };
  }
  if (sides.some((b) => b !== null && b.includes(0))) {
    return { linesAdded: 0, linesRemoved: 0, hunks: [], omittedHunks: 0, note: 'binary content: diff not shown' };
  }
  const edits = diffLines(splitLines(before?.toString('utf8') ?? ''), splitLines(after?.toString('utf8') ?? ''));
  const hunks = toHunks(edits);
  return {
    linesAdded: edits.filter((e) => e.op === '+').length,
    linesRemoved: edits.filter((e) => e.op === '-').length,
    hunks: hunks.slice(0, MAX_HUNKS),
    omittedHunks: Math.max(0, hunks.length - MAX_HUNKS),
    note: null,
  };
}

/** Edit script turning `a` into `b`: common prefix/suffix, Myers in between. */
export function diffLines(a: string[], b: string[]): Edit[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const same = (lines: string[]): Edit[] => lines.map((text) => ({ op: ' ', text }));
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  const middle = myers(midA, midB) ?? [
    ...midA.map((text): Edit => ({ op: '-', text })),
    ...midB.map((text): Edit => ({ op: '+', text })),
  ];
  return [...same(a.slice(0, start)), ...middle, ...same(a.slice(endA))];
}

/** Myers' greedy algorithm with a trace for backtracking; null when D exceeds the cap. */
function myers(a: string[], b: string[]): Edit[] | null {
  const n = a.length;
  const m = b.length;
  const maxD = Math.min(n + m, MAX_EDIT_DISTANCE);
  const off = maxD + 1;
  const v = new Int32Array(2 * maxD + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= maxD; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[off + k] = x;
      if (x >= n && y >= m) return backtrack(a, b, trace, off);
    }
  }
  return null;
}

function backtrack(a: string[], b: string[], trace: Int32Array[], off: number): Edit[] {
  const edits: Edit[] = [];
  let x = a.length;
  let y = b.length;
  for (let d = trace.length - 1; d >= 0; d--) {
    const v = trace[d];
    const k = x - y;
    const prevK = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? k + 1 : k - 1;
    const prevX = v[off + prevK];
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      edits.push({ op: ' ', text: a[x - 1] });
      x--;
      y--;
    }
    if (d > 0) {
      if (x === prevX) edits.push({ op: '+', text: b[y - 1] });
      else edits.push({ op: '-', text: a[x - 1] });
    }
    x = prevX;
    y = prevY;
  }
  return edits.reverse();
}

function range(start: number, length: number): string {
  const from = length === 0 ? start - 1 : start;
  return length === 1 ? `${from}` : `${from},${length}`;
}

/** Groups changes closer than 2×context into hunks, as `diff -u` does. */
function toHunks(edits: Edit[]): Hunk[] {
  const changed = edits.map((e, i) => (e.op === ' ' ? -1 : i)).filter((i) => i >= 0);
  if (!changed.length) return [];
  const groups: Array<[number, number]> = [];
  for (const i of changed) {
    const last = groups[groups.length - 1];
    if (last && i - last[1] <= 2 * CONTEXT_LINES) last[1] = i;
    else groups.push([i, i]);
  }
  // Line numbers (1-based) of the old and new file at each edit index.
  const oldAt: number[] = [];
  const newAt: number[] = [];
  let o = 1;
  let nn = 1;
  for (const e of edits) {
    oldAt.push(o);
    newAt.push(nn);
    if (e.op !== '+') o++;
    if (e.op !== '-') nn++;
  }
  return groups.map(([first, last]) => {
    const from = Math.max(0, first - CONTEXT_LINES);
    const to = Math.min(edits.length - 1, last + CONTEXT_LINES);
    const slice = edits.slice(from, to + 1);
    const oldLen = slice.filter((e) => e.op !== '+').length;
    const newLen = slice.filter((e) => e.op !== '-').length;
    const lines = slice.map((e) => `${e.op}${e.text}`);
    return {
      header: `@@ -${range(oldAt[from], oldLen)} +${range(newAt[from], newLen)} @@`,
      lines: lines.slice(0, MAX_HUNK_LINES),
      truncatedLines: Math.max(0, lines.length - MAX_HUNK_LINES),
    };
  });
}
