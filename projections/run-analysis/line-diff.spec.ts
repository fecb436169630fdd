import { describe, expect, it } from '@jest/globals';
import { diffFiles, MAX_DIFF_BYTES, MAX_EDIT_LENGTH, MAX_HUNK_LINES, MAX_HUNKS } from './line-diff.js';

const buf = (lines: string[]) => Buffer.from(lines.map((l) => `${l}\n`).join(''));
const letters = 'abcdefghijklmno'.split('');
const shown = (lines: string[], keep: ' ' | '-' | '+') => lines.filter((l) => l[0] === ' ' || l[0] === keep).map((l) => l.slice(1));

describe('diffFiles', () => {
  it('produces the same hunks as `diff -u` for a change near the top and an append at the end', () => {
    const after = [...letters.slice(0, 14)];
    after[1] = 'B';
    after.push('z');
    const d = diffFiles(buf(letters.slice(0, 14)), buf(after));
    expect(d.hunks).toEqual([
      { header: '@@ -1,5 +1,5 @@', lines: [' a', '-b', '+B', ' c', ' d', ' e'], truncatedLines: 0 },
      { header: '@@ -12,3 +12,4 @@', lines: [' l', ' m', ' n', '+z'], truncatedLines: 0 },
    ]);
    expect([d.linesAdded, d.linesRemoved, d.omittedHunks, d.note]).toEqual([2, 1, 0, null]);
  });

  it('merges changes 6 unchanged lines apart into one hunk and splits them 7 apart, as GNU diff -u does', () => {
    const six = [...letters];
    six[0] = 'A';
    six[7] = 'H';
    expect(diffFiles(buf(letters), buf(six)).hunks.map((h) => h.header)).toEqual(['@@ -1,11 +1,11 @@']);
    const seven = [...letters.slice(0, 8), 'H', ...letters.slice(8)];
    seven[0] = 'A';
    expect(diffFiles(buf(letters), buf(seven)).hunks.map((h) => h.header)).toEqual(['@@ -1,4 +1,4 @@', '@@ -6,6 +6,7 @@']);
  });

  it('uses GNU ranges for created and deleted files (-0,0 / +0,0)', () => {
    expect(diffFiles(null, buf(['x', 'y'])).hunks).toEqual([{ header: '@@ -0,0 +1,2 @@', lines: ['+x', '+y'], truncatedLines: 0 }]);
    expect(diffFiles(buf(['x', 'y']), null).hunks).toEqual([{ header: '@@ -1,2 +0,0 @@', lines: ['-x', '-y'], truncatedLines: 0 }]);
  });

  it('finds a shortest edit script (Myers paper example ABCABBA → CBABAC has D = 5) whose hunk rebuilds both sides', () => {
    const a = 'ABCABBA'.split('');
    const b = 'CBABAC'.split('');
    const d = diffFiles(buf(a), buf(b));
    expect(d.linesAdded + d.linesRemoved).toBe(5);
    expect(d.hunks).toHaveLength(1);
    expect(shown(d.hunks[0].lines, '-')).toEqual(a);
    expect(shown(d.hunks[0].lines, '+')).toEqual(b);
  });

  it('does not count a missing final newline as a change', () => {
    expect(diffFiles(Buffer.from('a\nb'), Buffer.from('a\nb\n'))).toEqual({ linesAdded: 0, linesRemoved: 0, hunks: [], omittedHunks: 0, note: null });
    expect(diffFiles(Buffer.from('a\nb'), Buffer.from('a\nc')).hunks[0].lines).toEqual([' a', '-b', '+c']);
  });

  it('reports no hunks for identical content and notes binary or oversized files instead of diffing them', () => {
    expect(diffFiles(buf(letters), buf(letters)).hunks).toEqual([]);
    expect(diffFiles(Buffer.from([1, 0, 2]), buf(['x']))).toMatchObject({ linesAdded: 0, linesRemoved: 0, note: expect.stringMatching(/binary/) });
    expect(diffFiles(Buffer.alloc(MAX_DIFF_BYTES + 1, 97), buf(['x'])).note).toMatch(/larger than/);
  });

  it('shows a change of more than MAX_EDIT_LENGTH lines as removed-then-added between the common prefix and suffix', () => {
    const n = MAX_EDIT_LENGTH + 10;
    const before = ['h1', 'h2', 'h3', 'h4', ...Array.from({ length: n }, (_, i) => `old ${i}`), 't1', 't2', 't3', 't4'];
    const after = ['h1', 'h2', 'h3', 'h4', ...Array.from({ length: n }, (_, i) => `new ${i}`), 't1', 't2', 't3', 't4'];
    const d = diffFiles(buf(before), buf(after));
    expect(d).toMatchObject({ linesAdded: n, linesRemoved: n, note: null, omittedHunks: 0 });
    expect(d.hunks).toHaveLength(1);
    expect(d.hunks[0].header).toBe(`@@ -2,${n + 6} +2,${n + 6} @@`);
    expect(d.hunks[0].lines.slice(0, 4)).toEqual([' h2', ' h3', ' h4', '-old 0']);
    expect(d.hunks[0].truncatedLines).toBe(2 * n + 6 - MAX_HUNK_LINES);
    expect(diffFiles(buf(before), buf(after))).toEqual(d); // no time-out: the same answer every time
  });

  it('diffs a created file of any length exactly, without searching', () => {
    const lines = Array.from({ length: 5 * MAX_EDIT_LENGTH }, (_, i) => `line ${i}`);
    const d = diffFiles(null, buf(lines));
    expect([d.linesAdded, d.linesRemoved, d.hunks[0].header]).toEqual([lines.length, 0, `@@ -0,0 +1,${lines.length} @@`]);
    expect(diffFiles(buf(lines), Buffer.alloc(0))).toMatchObject({ linesAdded: 0, linesRemoved: lines.length });
  });

  it('caps the number of lines shown per hunk and the hunks shown per file, counting every line', () => {
    const many = Array.from({ length: MAX_HUNK_LINES + 10 }, (_, i) => `line ${i}`);
    const d = diffFiles(null, buf(many));
    expect(d.hunks[0].lines).toHaveLength(MAX_HUNK_LINES);
    expect(d.hunks[0].truncatedLines).toBe(10);
    expect(d.linesAdded).toBe(MAX_HUNK_LINES + 10);

    const spread = Array.from({ length: 100 }, (_, i) => `l${i}`);
    const edited = spread.map((l, i) => (i % 10 === 0 ? `${l}!` : l));
    const e = diffFiles(buf(spread), buf(edited));
    expect([e.hunks.length, e.omittedHunks, e.linesAdded, e.linesRemoved]).toEqual([MAX_HUNKS, 10 - MAX_HUNKS, 10, 10]);
  });
});
