import { describe, expect, it } from '@jest/globals';
import { diffFiles, diffLines, MAX_DIFF_BYTES, MAX_HUNK_LINES } from './line-diff.js';

const buf = (lines: string[]) => Buffer.from(lines.map((l) => `${l}\n`).join(''));
const letters = 'abcdefghijklmn'.split('');

describe('diffFiles', () => {
  it('produces the same hunks as `diff -u` for a change near the top and an append at the end', () => {
    const after = [...letters];
    after[1] = 'B';
    after.push('z');
    const d = diffFiles(buf(letters), buf(after));
    expect(d.hunks).toEqual([
      { header: '@@ -1,5 +1,5 @@', lines: [' a', '-b', '+B', ' c', ' d', ' e'], truncatedLines: 0 },
      { header: '@@ -12,3 +12,4 @@', lines: [' l', ' m', ' n', '+z'], truncatedLines: 0 },
    ]);
    expect([d.linesAdded, d.linesRemoved, d.omittedHunks, d.note]).toEqual([2, 1, 0, null]);
  });

  it('uses GNU ranges for created and deleted files (-0,0 / +0,0)', () => {
    expect(diffFiles(null, buf(['x', 'y'])).hunks).toEqual([{ header: '@@ -0,0 +1,2 @@', lines: ['+x', '+y'], truncatedLines: 0 }]);
    expect(diffFiles(buf(['x', 'y']), null).hunks).toEqual([{ header: '@@ -1,2 +0,0 @@', lines: ['-x', '-y'], truncatedLines: 0 }]);
  });

  it('finds a shortest edit script (Myers paper example ABCABBA → CBABAC has D = 5) that rebuilds both sides', () => {
    const a = 'ABCABBA'.split('');
    const b = 'CBABAC'.split('');
    const edits = diffLines(a, b);
    expect(edits.filter((e) => e.op !== ' ')).toHaveLength(5);
    expect(edits.filter((e) => e.op !== '+').map((e) => e.text)).toEqual(a);
    expect(edits.filter((e) => e.op !== '-').map((e) => e.text)).toEqual(b);
  });

  it('reports no hunks for identical content and notes binary or oversized files instead of diffing them', () => {
    expect(diffFiles(buf(letters), buf(letters)).hunks).toEqual([]);
    expect(diffFiles(Buffer.from([1, 0, 2]), buf(['x'])).note).toMatch(/binary/);
    expect(diffFiles(Buffer.alloc(MAX_DIFF_BYTES + 1, 97), buf(['x'])).note).toMatch(/larger than/);
  });

  it('caps the number of lines shown per hunk and counts the rest', () => {
    const many = Array.from({ length: MAX_HUNK_LINES + 10 }, (_, i) => `line ${i}`);
    const d = diffFiles(null, buf(many));
    expect(d.hunks[0].lines).toHaveLength(MAX_HUNK_LINES);
    expect(d.hunks[0].truncatedLines).toBe(10);
    expect(d.linesAdded).toBe(MAX_HUNK_LINES + 10);
  });
});
