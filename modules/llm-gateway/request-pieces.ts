import { createHash } from 'node:crypto';

/**
 * Model-call bodies stored once per piece (docs/llm-gateway.md#how-bodies-are-stored). A body is cut
 * into segments at exact byte offsets: pieces (the conversation's messages, the system prompt, the
 * tool definitions, an answer's content: any JSON value of at least MIN_PIECE_BYTES at the places a
 * protocol keeps them) and the text between them. Each piece is a content-addressed blob; a manifest
 * blob lists the segments, usually as "the first `keep` segments of the parent call's body, then
 * these". Concatenating the segments gives the body byte for byte, whatever its JSON looks like (key
 * order, escapes, white space): nothing is re-serialized. The gateway checks that before it chooses
 * this form; a body it cannot cut (not a JSON object, not UTF-8) is stored whole as before.
 *
 * Pure except for `rebuildBody`, which reads blobs through the function it is given.
 */

/** Segment of a body: inline text, or a piece by its sha256. */
export type Segment = { text: string } | { piece: string };

/** The stored recipe: the parent's first `keep` segments (when it has a parent), then `segments`. */
export interface BodyManifest {
  parent?: { sha256: string; keep: number };
  segments: Segment[];
}

/** The event's reference to a body stored as pieces (LlmCallRecorded.requestPieces / responsePieces). */
export interface PiecesRef {
  /** sha256 and size of the body the recipe rebuilds. */
  sha256: string;
  size: number;
  manifest: { sha256: string; size: number; key: string };
  /** The pieces the manifest's own segments name (not its parent's). */
  pieces: string[];
}

/** JSON values smaller than this stay inline text: a blob and its reference would cost more. */
export const MIN_PIECE_BYTES = 64;
/** Bodies smaller than this are stored whole. */
export const MIN_SPLIT_BYTES = 512;
/** Most pieces one call's manifest may name (they are listed in its event, which must stay small). */
export const MAX_PIECES_PER_CALL = 1000;
const MANIFEST_FORMAT = 'a2rl-llm-body/1';

/** The top-level field holding the conversation of an API: its items are cut one level deeper. */
export function conversationKey(api: string): string | null {
  if (api === 'messages' || api === 'count_tokens' || api === 'chat.completions') return 'messages';
  if (api === 'responses') return 'input';
  if (api === 'generateContent' || api === 'streamGenerateContent' || api === 'countTokens') return 'contents';
  return null;
}

// ── cutting ──────────────────────────────────────────────────────────────────────────────────────

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

interface Span {
  start: number;
  end: number;
}

/**
 * The body as segments, pieces with their bytes; null when it is not a JSON object of valid UTF-8.
 * Pieces: every top-level member value of at least MIN_PIECE_BYTES, except the conversation array,
 * whose items' member values (an item that is no object: the item) are the pieces instead.
 */
export function splitBody(body: Buffer, conversation: string | null): { segments: Segment[]; pieces: Map<string, Buffer> } | null {
  if (!isJsonObject(body)) return null;
  const spans = pieceSpans(body, conversation);
  if (!spans) return null;
  const segments: Segment[] = [];
  const pieces = new Map<string, Buffer>();
  let at = 0;
  for (const span of spans) {
    if (span.start > at) segments.push({ text: body.toString('utf8', at, span.start) });
    const bytes = body.subarray(span.start, span.end);
    const sha256 = sha256Hex(bytes);
    pieces.set(sha256, bytes);
    segments.push({ piece: sha256 });
    at = span.end;
  }
  if (at < body.length) segments.push({ text: body.toString('utf8', at) });
  return { segments, pieces };
}

function isJsonObject(body: Buffer): boolean {
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(body);
    const value: unknown = JSON.parse(text);
    return !!value && typeof value === 'object' && !Array.isArray(value);
  } catch {
    return false;
  }
}

function pieceSpans(body: Buffer, conversation: string | null): Span[] | null {
  const top = skipSpace(body, 0);
  const members = membersOf(body, top);
  if (!members) return null;
  const spans: Span[] = [];
  for (const m of members) {
    const items = m.key === conversation && body[m.value.start] === OPEN_ARRAY ? itemsOf(body, m.value.start) : null;
    if (!items) {
      if (big(m.value)) spans.push(m.value);
      continue;
    }
    for (const item of items) {
      const inner = body[item.start] === OPEN_OBJECT ? membersOf(body, item.start) : null;
      if (!inner) {
        if (big(item)) spans.push(item);
      } else for (const im of inner) if (big(im.value)) spans.push(im.value);
    }
  }
  return spans;
}

const big = (span: Span) => span.end - span.start >= MIN_PIECE_BYTES;

/** The members of the object at `start`: key and value span; null when malformed. */
function membersOf(b: Buffer, start: number): { key: string; value: Span }[] | null {
  if (b[start] !== OPEN_OBJECT) return null;
  const out: { key: string; value: Span }[] = [];
  let i = skipSpace(b, start + 1);
  if (b[i] === CLOSE_OBJECT) return out;
  for (;;) {
    if (b[i] !== QUOTE) return null;
    const keyEnd = stringEnd(b, i);
    if (keyEnd < 0) return null;
    const key = JSON.parse(b.toString('utf8', i, keyEnd)) as string;
    i = skipSpace(b, keyEnd);
    if (b[i] !== COLON) return null;
    const valueStart = skipSpace(b, i + 1);
    const valueEnd = valueEndOf(b, valueStart);
    if (valueEnd < 0) return null;
    out.push({ key, value: { start: valueStart, end: valueEnd } });
    i = skipSpace(b, valueEnd);
    if (b[i] === CLOSE_OBJECT) return out;
    if (b[i] !== COMMA) return null;
    i = skipSpace(b, i + 1);
  }
}

/** The items of the array at `start`; null when malformed. */
function itemsOf(b: Buffer, start: number): Span[] | null {
  const out: Span[] = [];
  let i = skipSpace(b, start + 1);
  if (b[i] === CLOSE_ARRAY) return out;
  for (;;) {
    const end = valueEndOf(b, i);
    if (end < 0) return null;
    out.push({ start: i, end });
    i = skipSpace(b, end);
    if (b[i] === CLOSE_ARRAY) return out;
    if (b[i] !== COMMA) return null;
    i = skipSpace(b, i + 1);
  }
}

function skipSpace(b: Buffer, i: number): number {
  while (i < b.length && (b[i] === 0x20 || b[i] === 0x09 || b[i] === 0x0a || b[i] === 0x0d)) i++;
  return i;
}

/** Just past the string whose opening quote is at `i`; -1 when it does not end. */
function stringEnd(b: Buffer, i: number): number {
  for (let j = i + 1; j < b.length; j++) {
    if (b[j] === BACKSLASH) j++;
    else if (b[j] === QUOTE) return j + 1;
  }
  return -1;
}

/** Just past the JSON value starting at `i` (the body is known to be valid JSON); -1 when it does not end. */
function valueEndOf(b: Buffer, i: number): number {
  const c = b[i];
  if (c === QUOTE) return stringEnd(b, i);
  if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
    let depth = 0;
    for (let j = i; j < b.length; j++) {
      const d = b[j];
      if (d === QUOTE) {
        j = stringEnd(b, j) - 1;
        if (j < 0) return -1;
      } else if (d === OPEN_OBJECT || d === OPEN_ARRAY) depth++;
      else if ((d === CLOSE_OBJECT || d === CLOSE_ARRAY) && --depth === 0) return j + 1;
    }
    return -1;
  }
  let j = i;
  while (j < b.length && b[j] !== COMMA && b[j] !== CLOSE_OBJECT && b[j] !== CLOSE_ARRAY && b[j] > 0x20) j++;
  return j > i ? j : -1;
}

// ── joining ──────────────────────────────────────────────────────────────────────────────────────

/** The body the segments make, reading each piece with `pieceOf`. */
export function joinSegments(segments: readonly Segment[], pieceOf: (sha256: string) => Buffer): Buffer {
  return Buffer.concat(segments.map((s) => ('text' in s ? Buffer.from(s.text, 'utf8') : pieceOf(s.piece))));
}

/** A segment's identity, to compare two bodies' segments. */
export const segmentKey = (s: Segment): string => ('text' in s ? `t${s.text}` : `p${s.piece}`);

/** How many leading segments two bodies share. */
export function sharedPrefix(a: readonly string[], b: readonly string[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

// ── the manifest ─────────────────────────────────────────────────────────────────────────────────

/** The manifest blob's bytes: compact JSON, texts as strings, pieces as {p: sha256}. */
export function encodeManifest(m: BodyManifest): Buffer {
  const segments = m.segments.map((s) => ('text' in s ? s.text : { p: s.piece }));
  return Buffer.from(JSON.stringify({ format: MANIFEST_FORMAT, ...(m.parent ? { parent: m.parent } : {}), segments }));
}

export function decodeManifest(bytes: Buffer): BodyManifest {
  const raw = JSON.parse(bytes.toString('utf8')) as { format?: unknown; parent?: { sha256: string; keep: number }; segments?: unknown };
  if (raw.format !== MANIFEST_FORMAT || !Array.isArray(raw.segments)) throw new Error(`not an ${MANIFEST_FORMAT} manifest`);
  const segments = raw.segments.map((s: unknown): Segment => {
    if (typeof s === 'string') return { text: s };
    const piece = (s as { p?: unknown }).p;
    if (typeof piece !== 'string') throw new Error('a manifest segment is neither text nor a piece');
    return { piece };
  });
  return { ...(raw.parent ? { parent: { sha256: raw.parent.sha256, keep: raw.parent.keep } } : {}), segments };
}

/** The pieces a manifest's own segments name, distinct, in order. */
export function piecesNamed(segments: readonly Segment[]): string[] {
  return [...new Set(segments.flatMap((s) => ('piece' in s ? [s.piece] : [])))];
}

// ── rebuilding (every reader) ────────────────────────────────────────────────────────────────────

/** Reads a blob by sha256: its bytes, or null when the store (or bundle) lacks it. */
export type ReadBlob = (sha256: string) => Promise<Buffer | null>;

/** A body recorded with LlmCallRecorded: whole (`request`/`response`) or as pieces (`requestPieces`/`responsePieces`). */
export interface RecordedBody {
  whole?: { sha256: string; size: number };
  pieces?: PiecesRef;
}

/** The recorded body of a call's request or response, in whichever form it was stored. */
export function recordedBody(data: { request?: { sha256: string; size: number }; requestPieces?: PiecesRef; response?: { sha256: string; size: number }; responsePieces?: PiecesRef }, part: 'request' | 'response'): RecordedBody {
  return part === 'request' ? { whole: data.request, pieces: data.requestPieces } : { whole: data.response, pieces: data.responsePieces };
}

/**
 * Resolved segment lists by manifest sha256, kept for the last few manifests: a reader going through
 * a run's calls in order walks each parent chain once. One per reader (not shared across runs).
 */
export class SegmentCache {
  private readonly lists = new Map<string, string[]>();

  constructor(private readonly capacity = 8) {}

  get(sha256: string): string[] | undefined {
    return this.lists.get(sha256);
  }

  set(sha256: string, keys: string[]): void {
    this.lists.delete(sha256);
    this.lists.set(sha256, keys);
    if (this.lists.size > this.capacity) this.lists.delete(this.lists.keys().next().value!);
  }
}

/** An error in a stored body: a missing blob, a manifest that does not parse, a rebuild that is not the recorded bytes. */
export class BodyRebuildError extends Error {
  override readonly name = 'BodyRebuildError';
}

/**
 * The bytes a call sent or received, as recorded (redacted): the whole blob, or the pieces put back
 * together and checked against the recorded sha256 and size. The one way every reader gets a body.
 */
export async function rebuildBody(body: RecordedBody, readBlob: ReadBlob, cache = new SegmentCache()): Promise<Buffer> {
  if (body.pieces) return rebuildPieces(body.pieces, readBlob, cache);
  if (!body.whole) throw new BodyRebuildError('the call recorded no such body');
  const bytes = await mustRead(readBlob, body.whole.sha256, 'the body');
  if (bytes.length !== body.whole.size || sha256Hex(bytes) !== body.whole.sha256) throw new BodyRebuildError(`the body (blob ${body.whole.sha256}) is not the recorded bytes`);
  return bytes;
}

async function rebuildPieces(ref: PiecesRef, readBlob: ReadBlob, cache: SegmentCache): Promise<Buffer> {
  const keys = await resolveSegments(ref.manifest.sha256, readBlob, cache);
  const parts: Buffer[] = [];
  for (const key of keys) parts.push(key[0] === 't' ? Buffer.from(key.slice(1), 'utf8') : await mustRead(readBlob, key.slice(1), 'a piece'));
  const bytes = Buffer.concat(parts);
  if (bytes.length !== ref.size || sha256Hex(bytes) !== ref.sha256) {
    throw new BodyRebuildError(`the pieces of manifest ${ref.manifest.sha256} rebuild ${bytes.length} B (sha256 ${sha256Hex(bytes)}), not the recorded ${ref.size} B (sha256 ${ref.sha256})`);
  }
  return bytes;
}

/** A manifest's whole segment list (as segment keys): its parent chain walked up once, then applied down. */
async function resolveSegments(sha256: string, readBlob: ReadBlob, cache: SegmentCache): Promise<string[]> {
  const chain: BodyManifest[] = [];
  let base: string[] = [];
  for (let at: string | undefined = sha256; at !== undefined; ) {
    const known = cache.get(at);
    if (known) {
      base = known;
      break;
    }
    const manifest = decodeManifest(await mustRead(readBlob, at, 'a manifest'));
    chain.push(manifest);
    at = manifest.parent?.sha256;
  }
  const keys = [...base];
  for (let i = chain.length - 1; i >= 0; i--) {
    const m = chain[i];
    if (m.parent) {
      if (m.parent.keep > keys.length) throw new BodyRebuildError(`a manifest keeps ${m.parent.keep} segments of a parent that has ${keys.length}`);
      keys.length = m.parent.keep;
    }
    for (const s of m.segments) keys.push(segmentKey(s));
  }
  cache.set(sha256, keys);
  return keys;
}

async function mustRead(readBlob: ReadBlob, sha256: string, what: string): Promise<Buffer> {
  const bytes = await readBlob(sha256);
  if (!bytes) throw new BodyRebuildError(`${what} (blob ${sha256}) is missing`);
  return bytes;
}

export function sha256Hex(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}
