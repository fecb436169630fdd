// Recorded data is written by the agent, an adversary: file names, argv, diffs, transcripts, the
// model name it asks for. Text shown to people must not let that data act on the reader's terminal
// (repaint the screen, retitle the window, move the cursor, reorder a line) instead of being shown.
// Every character a terminal or text viewer would act on rather than draw becomes a visible escape
// (`\x1b`, `\r`, `\u202e`), so the reader sees that it was there; nothing is silently removed.
//
// What is escaped:
// - C0 controls (U+0000–U+001F) and DEL (U+007F): ESC starts every ANSI/VT sequence; CR and BS
//   overwrite what is already on the line. `\n` (and `\t` in multi-line text) are kept where layout needs them.
// - C1 controls (U+0080–U+009F): CSI (U+009B), OSC (U+009D) and NEL are acted on by terminals that
//   honour 8-bit controls, even UTF-8 encoded.
// - Format characters (Unicode category Cf): the bidirectional overrides and isolates (U+202A–U+202E,
//   U+2066–U+2069, U+200E/U+200F, U+061C) that reorder a line ("Trojan Source"), zero-width and
//   invisible characters, and the tag characters (U+E0000 block) that carry hidden text. Zero-width
//   (non-)joiners (U+200C, U+200D) are kept: emoji and several scripts need them, and they reorder nothing.
// - Line and paragraph separators (U+2028, U+2029), which some viewers break lines at.
// - Lone surrogates, which no encoder can write as they are.
// Backslashes are not doubled: an agent can write the six characters `\x1b`, which then look like an
// escape, but they cannot do anything; doubling every backslash would garble the code and paths shown.

const ESCAPED = /[\p{Cc}\p{Cf}\p{Cs}\u2028\u2029]/gu;
const KEPT_JOINERS = new Set(['\u200c', '\u200d']);
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** `\x1b`, `\x9b`, `\u202e`, `\u{e0041}`: the escape a reader recognises for one code point. */
function visibleEscape(ch: string): string {
  if (NAMED[ch]) return NAMED[ch];
  const cp = ch.codePointAt(0)!;
  if (cp <= 0xff) return `\\x${cp.toString(16).padStart(2, '0')}`;
  if (cp <= 0xffff) return `\\u${cp.toString(16).padStart(4, '0')}`;
  return `\\u{${cp.toString(16)}}`;
}

function escapeExcept(text: string, kept: ReadonlySet<string>): string {
  return text.replace(ESCAPED, (ch) => (kept.has(ch) ? ch : visibleEscape(ch)));
}

const TEXT_KEEPS = new Set(['\n', '\t', ...KEPT_JOINERS]);

/** Multi-line text (a transcript, a diff, a report): line breaks and tabs kept, every other control shown escaped. */
export function inertText(text: string): string {
  return escapeExcept(text, TEXT_KEEPS);
}

/** One line (a table cell, a message, a progress line): line breaks and tabs shown escaped too, so the data cannot start a line of its own. */
export function inertLine(text: string): string {
  return escapeExcept(text, KEPT_JOINERS);
}

/**
 * JSON text for a terminal: JSON.stringify already escapes C0 controls (ESC included), but leaves DEL,
 * C1 controls, format characters and the line separators raw. Those can only occur inside strings,
 * so writing them as `\uXXXX` keeps the same JSON value (though no longer RFC 8785's canonical bytes).
 */
export function inertJson(json: string): string {
  return json.replace(ESCAPED, (ch) => {
    if (KEPT_JOINERS.has(ch) || ch === '\n') return ch; // '\n' only between NDJSON lines: JSON escapes it inside strings
    return [...Array(ch.length).keys()].map((i) => `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');
  });
}

/** Whether the text holds anything `inertText` would escape (a check for tests and assertions). */
export function hasActiveControls(text: string): boolean {
  return inertText(text) !== text;
}
