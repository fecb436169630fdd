import { describe, expect, it } from '@jest/globals';
import { formatSeconds, parseDuration } from './duration.js';

describe('budget durations', () => {
  it('parses seconds, minutes, hours and combinations', () => {
    expect(parseDuration('90s')).toBe(90);
    expect(parseDuration('5m')).toBe(300);
    expect(parseDuration('12h')).toBe(43200);
    expect(parseDuration('1h30m')).toBe(5400);
    expect(parseDuration('45')).toBe(45);
  });

  it.each(['', 'abc', '5x', '0s', '-5m', '10m junk', '31d'])('refuses "%s" with an example of the format', (text) => {
    expect(() => parseDuration(text)).toThrow(/invalid duration/);
  });

  it('formats remaining time compactly', () => {
    expect(formatSeconds(42)).toBe('42s');
    expect(formatSeconds(125)).toBe('2m05s');
    expect(formatSeconds(3 * 3600 + 60)).toBe('3h01m');
  });
});
