import { describe, expect, it } from '@jest/globals';
import { eventLine } from './event-line.js';

describe("a2rl events' one line per event", () => {
  it('shows what happened first: scalars, then lists of scalars, then bookkeeping, then nested values summarised', () => {
    const line = eventLine({
      details: { accuracy: 0.9, correct: 9 }, items: { sha256: 'a'.repeat(64), size: 2048, key: 'k' }, score: 26.67, improvement: 15.3, submissionId: 'sub-1',
      observedAt: '2026-01-01T00:00:00.000Z', argv: ['bash', '-c', 'true'],
    });
    expect(line).toBe('score=26.67 improvement=15.3 submissionId="sub-1" argv=["bash","-c","true"] observedAt="2026-01-01T00:00:00.000Z" details={accuracy,correct} items=blob(2.0 KiB)');
  });

  it('is bounded: long strings, long lists and the whole line are cut', () => {
    expect(eventLine({ argv: Array.from({ length: 20 }, (_, i) => `a${i}`) })).toBe('argv=["a0","a1","a2","a3","a4","a5","a6","a7",…(20)]');
    const line = eventLine({ command: 'x'.repeat(500), more: 'y'.repeat(500) });
    expect(line).toContain(`command="${'x'.repeat(79)}…"`);
    expect(line.length).toBe(160);
    expect(line.endsWith('…')).toBe(true);
  });

  it('shows recorded control characters escaped, never raw', () => {
    const line = eventLine({ argv: ['\u001b]0;pwned\u0007', '\u202e\u009b'], note: 'a\nb' });
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
    expect(line).toContain('\\u001b]0;pwned\\u0007');
  });
});
