import { createHash } from 'node:crypto';

/**
 * Model-call bodies stored once per piece (docs/llm-gateway.md#how-bodies-are-stored). A body is cut
 * into segments at exact byte offsets: pieces (the conversation's messages, the system prompt, the
 * tool definitions, an answer's content: any JSON value of at least MIN_PIECE_BYTES at the places a
 * protocol keeps them) and the text between them. Each piece is a content-addressed blob; a manifest
 * blob lists the segments, mostly as ranges of its parent call's segments (a request repeats its
 * parent's messages, appends some, and ends with the same system prompt and tools): what it names
 * itself is what it appended. Concatenating the segments gives the body byte for byte,
 * whatever its JSON looks like (key order, escapes, white space): nothing is re-serialized, and
 * `splitBody` checks the join before it answers; a body it cannot cut that way (not a JSON object,
 * inline text that is not UTF-8) is stored whole as before.
 *
 * Pure except for `rebuildBody`, which reads blobs through the function it is given.
 */

/** Segment of a body: inline text, or a piece by its sha256. */
export type Segment = { text: string } | { piece: string };

/** A manifest entry: a segment, or `count` segments of the parent's list from index `from`. */
export type Entry = Segment | { from: number; count: number };

/** The stored recipe: its entries in order, ranges of the parent's segments where it has a parent. */
export interface BodyManifest {
  parent?: string;
  entries: Entry[];
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

/** Messages (and an answer's content) smaller than this stay inline text: a blob and its reference would cost more. */
export const MIN_PIECE_BYTES = 64;
/** Other top-level values (the system prompt, the tools) smaller than this stay inline: the parent's segments carry them anyway. */
export const MIN_TOP_PIECE_BYTES = 1024;
/** Bodies smaller than this are stored whole. */
export const MIN_SPLIT_BYTES = 512;
/** Most pieces one call's manifest may name (they are listed in its event, which must stay small). */
export const MAX_PIECES_PER_CALL = 1000;
const MANIFEST_FORMAT = 'a2rl-llm-body/1';

/**
 * Where a body of an API keeps what recurs: `conversation`, the top-level array of a request's
 * messages (each item's members are cut); `answer`, the top-level member of an answer holding the
 * model's message (its content comes back in the next request).
 */
export interface BodyShape {
  conversation: string | null;
  answer: string | null;
}

export function bodyShape(api: string, part: 'request' | 'response'): BodyShape {
  if (part === 'response') return { conversation: null, answer: ANSWERS[api] ?? null };
  return { conversation: CONVERSATIONS[api] ?? null, answer: null };
}

const CONVERSATIONS: Record<string, string> = { messages: 'messages', count_tokens: 'messages', 'chat.completions': 'messages', responses: 'input', generateContent: 'contents', streamGenerateContent: 'contents', countTokens: 'contents' };
const ANSWERS: Record<string, string> = { messages: 'content', 'chat.completions': 'choices', responses: 'output', generateContent: 'candidates' };

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
 * The body as segments, pieces with their bytes; null when it cannot be cut into segments that join
 * back to exactly its bytes (not a JSON object; inline text that is not UTF-8).
 * Pieces: the member values of the conversation's items (an item that is no object: the item) and
 * the answer, of at least MIN_PIECE_BYTES; every other top-level value of at least MIN_TOP_PIECE_BYTES.
 */
export function splitBody(body: Buffer, shape: BodyShape): { segments: Segment[]; pieces: Map<string, Buffer> } | null {
  const split = cut(body, shape);
  return split && joinSegments(split.segments, (sha) => split.pieces.get(sha)!).equals(body) ? split : null;
}

function cut(body: Buffer, shape: BodyShape): { segments: Segment[]; pieces: Map<string, Buffer> } | null {
  const spans = pieceSpans(body, shape);
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

function pieceSpans(body: Buffer, shape: BodyShape): Span[] | null {
  const top = skipSpace(body, 0);
  const members = membersOf(body, top);
  if (!members) return null;
  const spans: Span[] = [];
  for (const m of members) {
    const items = m.key === shape.conversation && body[m.value.start] === OPEN_ARRAY ? itemsOf(body, m.value.start) : null;
    if (!items) {
      if (sizeOf(m.value) >= (m.key === shape.answer ? MIN_PIECE_BYTES : MIN_TOP_PIECE_BYTES)) spans.push(m.value);
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

const sizeOf = (span: Span) => span.end - span.start;
const big = (span: Span) => sizeOf(span) >= MIN_PIECE_BYTES;

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
    const key = keyOf(b.toString('utf8', i, keyEnd));
    if (key === null) return null;
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

function keyOf(quoted: string): string | null {
  try {
    return JSON.parse(quoted) as string;
  } catch {
    return null;
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

/** Pieces a rebuild reads at once (a long conversation has thousands). */
const PARALLEL_READS = 16;
/** Positions of a key looked at when a run of shared segments is to start: the most recent few. */
const CANDIDATES = 4;

/**
 * The child's segments as entries against the parent's: each run of segments the parent has too, in
 * the same order, is one range; the rest are the child's own. Greedy: a run continues where the last
 * one ended when it can, else starts at one of the key's last positions in the parent.
 */
export function planEntries(parent: readonly string[], child: readonly Segment[]): { entries: Entry[]; shared: number } {
  const keys = child.map(segmentKey);
  const at = new Map<string, number[]>();
  parent.forEach((key, j) => at.set(key, [...(at.get(key) ?? []).slice(1 - CANDIDATES), j]));
  const entries: Entry[] = [];
  let shared = 0;
  let next = -1;
  for (let i = 0; i < keys.length; ) {
    const starts = next >= 0 && parent[next] === keys[i] ? [next] : (at.get(keys[i]) ?? []);
    let best = { from: -1, count: 0 };
    for (const from of starts) {
      let n = 0;
      while (i + n < keys.length && from + n < parent.length && parent[from + n] === keys[i + n]) n++;
      if (n > best.count) best = { from, count: n };
    }
    if (best.count === 0) {
      entries.push(child[i++]);
      next = -1;
      continue;
    }
    entries.push(best);
    shared += best.count;
    i += best.count;
    next = best.from + best.count;
  }
  return { entries, shared };
}

/** A manifest's segment list (as keys) from its parent's. */
export function applyManifest(parentKeys: readonly string[], m: BodyManifest): string[] {
  const keys: string[] = [];
  for (const e of m.entries) {
    if (!('from' in e)) keys.push(segmentKey(e));
    else if (!m.parent || e.from + e.count > parentKeys.length) throw new BodyRebuildError(`a manifest takes segments ${e.from}–${e.from + e.count - 1} of a parent that has ${parentKeys.length}`);
    else for (let j = e.from; j < e.from + e.count; j++) keys.push(parentKeys[j]);
  }
  return keys;
}

// ── the manifest ─────────────────────────────────────────────────────────────────────────────────

/**
 * The manifest blob's bytes: a header line, the parent line when there is one (`parent <sha256>`,
 * its manifest), then its entries: `c <from> <count>` for a range of the parent's segments,
 * `p <sha256>` for a piece, or `t <bytes>` followed by the text's raw bytes; each ends with a newline.
 * sha256s are written in base64url (43 characters, not 64 hex: a manifest is mostly references), and
 * texts raw, nothing escaped, so a manifest costs little more than what it lists.
 */
export function encodeManifest(m: BodyManifest): Buffer {
  const parts: Buffer[] = [Buffer.from(`${MANIFEST_FORMAT}\n`)];
  if (m.parent) parts.push(Buffer.from(`parent ${toRef(m.parent)}\n`));
  for (const s of m.entries) {
    if ('from' in s) parts.push(Buffer.from(`c ${s.from} ${s.count}\n`));
    else if ('piece' in s) parts.push(Buffer.from(`p ${toRef(s.piece)}\n`));
    else {
      const text = Buffer.from(s.text, 'utf8');
      parts.push(Buffer.from(`t ${text.length}\n`), text, NEWLINE);
    }
  }
  return Buffer.concat(parts);
}

export function decodeManifest(bytes: Buffer): BodyManifest {
  let at = 0;
  const line = (): string => {
    const end = bytes.indexOf(0x0a, at);
    if (end < 0) throw new BodyRebuildError(at === 0 ? `not an ${MANIFEST_FORMAT} manifest` : 'a manifest line does not end');
    const text = bytes.toString('utf8', at, end);
    at = end + 1;
    return text;
  };
  if (line() !== MANIFEST_FORMAT) throw new BodyRebuildError(`not an ${MANIFEST_FORMAT} manifest`);
  const manifest: BodyManifest = { entries: [] };
  while (at < bytes.length) {
    const [kind, a, b] = line().split(' ');
    if (kind === 'parent' && manifest.entries.length === 0 && !manifest.parent) manifest.parent = fromRef(a);
    else if (kind === 'c') manifest.entries.push({ from: count(a), count: count(b) });
    else if (kind === 'p') manifest.entries.push({ piece: fromRef(a) });
    else if (kind === 't') {
      const end = at + count(a);
      if (end >= bytes.length || bytes[end] !== 0x0a) throw new BodyRebuildError('a manifest text is cut short');
      manifest.entries.push({ text: bytes.toString('utf8', at, end) });
      at = end + 1;
    } else throw new BodyRebuildError(`a manifest entry is neither a parent, a range, a piece nor a text: ${kind}`);
  }
  return manifest;
}

const NEWLINE = Buffer.from('\n');
const REF = /^[A-Za-z0-9_-]{43}$/;
const toRef = (sha256: string) => Buffer.from(sha256, 'hex').toString('base64url');

function fromRef(ref: string | undefined): string {
  if (!ref || !REF.test(ref)) throw new BodyRebuildError(`a manifest reference is not a sha256: ${ref}`);
  return Buffer.from(ref, 'base64url').toString('hex');
}

function count(text: string | undefined): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) throw new BodyRebuildError(`a manifest count is not a count: ${text}`);
  return n;
}

/** The pieces a manifest's own entries name, distinct, in order. */
export function piecesNamed(entries: readonly Entry[]): string[] {
  return [...new Set(entries.flatMap((s) => ('piece' in s ? [s.piece] : [])))];
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
  const parts = new Array<Buffer>(keys.length);
  let next = 0;
  const reader = async () => {
    for (let i = next++; i < keys.length; i = next++) parts[i] = keys[i][0] === 't' ? Buffer.from(keys[i].slice(1), 'utf8') : await mustRead(readBlob, keys[i].slice(1), 'a piece');
  };
  await Promise.all(Array.from({ length: PARALLEL_READS }, reader));
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
    at = manifest.parent;
  }
  if (chain.length === 0) return base;
  let keys = [...base]; // the cached list stays as it is; this copy is changed in place down the chain
  for (let i = chain.length - 1; i >= 0; i--) keys = applyInPlace(keys, chain[i]);
  cache.set(sha256, keys);
  return keys;
}

/**
 * applyManifest on a list nobody else holds: a manifest that starts with the parent's first segments
 * (a request continuing its parent) shortens the list and appends the rest, so a step costs what
 * was appended, not the whole conversation.
 */
function applyInPlace(keys: string[], m: BodyManifest): string[] {
  const [head, ...rest] = m.entries;
  if (!m.parent || !head || !('from' in head) || head.from !== 0 || head.count > keys.length) return applyManifest(keys, m);
  const appended = applyManifest(keys, { parent: m.parent, entries: rest });
  keys.length = head.count;
  for (const key of appended) keys.push(key);
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
