import { describe, expect, it } from '@jest/globals';
import { hasActiveControls, inertJson, inertLine, inertText } from './inert-text.js';

// What a hostile agent writes into file names, argv, transcripts and model names to act on the reader's terminal.
const TITLE = '\x1b]0;pwned\x07';
const CLEAR = '\x1b[2J';
const GREEN = '\x1b[32mverified\x1b[0m';
const RLO = '\u202e';
const CSI8 = '\x9b';

describe('inertText', () => {
  it('shows every control sequence as a visible escape and keeps line breaks and tabs', () => {
    expect(inertText(`a${TITLE}b\n\tc${CLEAR}`)).toBe('a\\x1b]0;pwned\\x07b\n\tc\\x1b[2J');
    expect(inertText(GREEN)).toBe('\\x1b[32mverified\\x1b[0m');
    expect(inertText('FAIL\rOK')).toBe('FAIL\\rOK');
    expect(inertText(`x${CSI8}2J\x7f\x00\b`)).toBe('x\\x9b2J\\x7f\\x00\\x08');
  });

  it('escapes bidi overrides, isolates, marks and invisible characters but keeps joiners', () => {
    expect(inertText(`evil${RLO}txt.exe`)).toBe('evil\\u202etxt.exe');
    expect(inertText('\u2066\u2067\u2068\u2069\u202a\u202b\u202c\u202d\u200e\u200f\u061c')).toBe(
      '\\u2066\\u2067\\u2068\\u2069\\u202a\\u202b\\u202c\\u202d\\u200e\\u200f\\u061c',
    );
    expect(inertText('zero\u200bwidth\ufeff\u00ad\u2028\u2029')).toBe('zero\\u200bwidth\\ufeff\\xad\\u2028\\u2029');
    expect(inertText('hidden \u{e0041}\u{e0042}')).toBe('hidden \\u{e0041}\\u{e0042}');
    expect(inertText('👨‍👩‍👧 می‌خواهم')).toBe('👨‍👩‍👧 می‌خواهم'); // ZWJ in emoji, ZWNJ in Persian
    expect(inertText('lone \ud800 surrogate')).toBe('lone \\ud800 surrogate');
  });

  it('leaves ordinary text, backslashes and non-Latin scripts as they are', () => {
    const plain = 'def f(x):\n\treturn "a\\\\b" # Ünïcode, 日本語, עברית, عربى, emoji 🎉';
    expect(inertText(plain)).toBe(plain);
    expect(hasActiveControls(plain)).toBe(false);
    expect(hasActiveControls(`x${CSI8}`)).toBe(true);
  });

  it('is idempotent: escaping twice changes nothing more', () => {
    const once = inertText(`${TITLE}${RLO}\r`);
    expect(inertText(once)).toBe(once);
  });
});

describe('inertLine', () => {
  it('also shows line breaks and tabs, so data cannot start a line of its own', () => {
    expect(inertLine('model\nOK bundle verified\tx')).toBe('model\\nOK bundle verified\\tx');
    expect(inertLine(`a${GREEN}\r\n`)).toBe('a\\x1b[32mverified\\x1b[0m\\r\\n');
  });
});

describe('inertJson', () => {
  it('writes what JSON.stringify leaves raw as \\u escapes: still the same JSON value', () => {
    const value = { name: `${CSI8}2J${RLO}\x7f\u{e0041}\u2028${TITLE}`, ok: 'plain ✓' };
    const json = JSON.stringify(value);
    expect(json).toContain(CSI8); // JSON's own escaping leaves C1 raw
    const inert = inertJson(json);
    expect(hasActiveControls(inert)).toBe(false);
    expect(JSON.parse(inert)).toEqual(value);
    expect(inertJson(`${json}\n${json}\n`).split('\n')).toHaveLength(3); // NDJSON line breaks stay
  });
});
