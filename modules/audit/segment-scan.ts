import { hash } from 'node:crypto';
import { storedEvents, type EventStore, type StoredEvent } from '../ledger/event-store.port.js';
import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';
import type { PerfectSubtree } from '../ledger/merkle.js';
import type { RawEventPage } from '../ledger/stores/raw-scan.js';
import { ArtifactRefs, REF_TYPES, REFS_BESIDES_SHA256, type ArtifactRef } from './artifact-refs.js';
import { LeafAccumulator } from './leaf-accumulator.js';
import { sealRelevant } from './seal.js';

/**
 * The reading half of the fast check of a run's record (record-scan.ts): a run's chunks read and
 * scanned, in the command's thread or a worker thread. It loads neither the event catalog nor its
 * validators (a worker would spend 0.2 s of CPU on them): the current schema versions come with
 * the chunk queue, and the few events that must be validated are validated at the join.
 */

/** Event types the checks after the scan read (integrity, regrade): a few per run, kept whole. */
export const KEPT_TYPES = new Set<A2rlEvent['type']>(['RunScheduled', 'BaselineEvaluated', 'SubmissionReceived', 'SubmissionGraded', 'WorkspaceIntegrityChecked']);

/**
 * Segments are cut at multiples of CHUNK events, and each chunk's part of the Merkle tree is built
 * where the chunk is read: a chunk starting at a multiple of 2^16 splits into perfect subtrees that
 * line up with the tree's own, so the join only adds a few subtrees a chunk (merkle.ts pushSubtree).
 * Any power of two works: tests pass smaller ones to have several chunks in a small run.
 */
export const CHUNK = 2 ** 16;

export interface SegmentScan {
  /** Seq of the segment's first event (a multiple of CHUNK), and how many it has. */
  from: number;
  count: number;
  /** Each chunk's perfect subtrees, largest first, chunk after chunk. */
  chunks: Array<{ start: number; size: number; subtrees: PerfectSubtree[] }>;
  /** Each head, with the subtrees of its chunk's events before it. */
  heads: Array<{ seq: number; data: EventData<'TreeHeadSigned'>; before: PerfectSubtree[] }>;
  /** Blobs first referenced in this segment. */
  refs: ArtifactRef[];
  kept: A2rlEvent[];
  /** Heads and kept events at their current schema version, parsed but not yet validated: the join validates them (checkStored). */
  unchecked: Array<{ seq: number; bytes: Uint8Array }>;
  /** Last seq that is not a head (-1: none): what the last head must cover. */
  lastNonHeadSeq: number;
  /** The last event the seal check looks at. */
  lastSealRelevant?: { seq: number; type: A2rlEvent['type'] };
  /** Why the fast check cannot vouch for the record (the full check then says what is wrong). */
  anomaly?: string;
}

/** Reads revisions [from, from + count) of a run's stream as pages (RawEventPage). */
export type ChunkReader = (from: number, count: number) => Iterable<RawEventPage> | AsyncIterable<RawEventPage>;

/** A ChunkReader over the stored events of `stream`, as an adapter without a paged read gives them. */
export function storedChunks(store: EventStore, stream: string): ChunkReader {
  return (from, count) => pagesOf(storedEvents(store, stream, { fromRevision: BigInt(from), maxCount: count }), stream);
}

/**
 * The chunks of a run, handed out to the threads that read it: each takes the next one when it is
 * done with the one before (an atomic counter in memory the threads share), so a thread that
 * started late or is given less of a busy machine reads less.
 */
export interface ChunkQueue {
  /** One Int32: the index of the next chunk to take. */
  next: SharedArrayBuffer;
  /** Events in the run, and in a chunk. */
  count: number;
  chunkSize: number;
  /** The run's stream. */
  stream: string;
  /**
   * Each event type's current schema version, from the event catalog where it is loaded (the
   * thread that joins): a worker thread scans without loading the catalog and its validators.
   */
  versions: ReadonlyMap<string, number>;
}

export function chunkQueue(count: number, chunkSize: number, stream: string, versions: ReadonlyMap<string, number>): ChunkQueue {
  return { next: new SharedArrayBuffer(4), count, chunkSize, stream, versions };
}

/** The next chunk nobody has taken, or null when there is none left. */
function takeChunk(queue: ChunkQueue): { from: number; count: number } | null {
  const counter = new Int32Array(queue.next);
  const from = Atomics.add(counter, 0, 1) * queue.chunkSize;
  if (from >= queue.count) return null;
  return { from, count: Math.min(queue.chunkSize, queue.count - from) };
}

/** No chunk is taken any more: one already read cannot be vouched for. */
function closeQueue(queue: ChunkQueue): void {
  Atomics.store(new Int32Array(queue.next), 0, Math.ceil(queue.count / queue.chunkSize));
}

/**
 * Takes chunks from `queue` and scans each (scanPages) until none is left: one SegmentScan a
 * chunk, in the order taken (ascending). What the thread learnt of blobs in one chunk serves the
 * next (each chunk's `refs` are the blobs this thread had not met before it): the join keeps each
 * blob's first reference in seq order, which is the one of the first chunk that has it.
 */
export async function scanChunks(read: ChunkReader, runId: string, queue: ChunkQueue, onProgress?: (done: number) => void): Promise<SegmentScan[]> {
  const scans: SegmentScan[] = [];
  const known = new KnownHashes(new ArtifactRefs());
  let done = 0;
  for (let chunk = takeChunk(queue); chunk; chunk = takeChunk(queue)) {
    const scan = await scanPages(read(chunk.from, chunk.count), runId, chunk.from, chunk.count, queue.chunkSize, queue.versions, onProgress && ((n) => onProgress(done + n)), known);
    scans.push(scan);
    done += scan.count;
    if (scan.anomaly) {
      closeQueue(queue);
      break;
    }
  }
  return scans;
}

/** Stored events grouped into pages (RawEventPage) as an adapter without a paged read gives them. */
async function* pagesOf(events: AsyncIterable<StoredEvent>, stream: string, rows = 1024): AsyncGenerator<RawEventPage> {
  let batch: StoredEvent[] = [];
  const page = (): RawEventPage => {
    const parts: Buffer[] = [];
    for (const e of batch) parts.push(SEPARATOR, e.bytes);
    const columns = batch.every((e) => e.stored);
    return {
      count: batch.length,
      bytes: Buffer.concat(parts),
      lengths: batch.map((e) => e.bytes.length),
      // Another stream's event is filed at no revision of this one.
      revisions: batch.map((e) => (e.stream === stream ? Number(e.revision) : -1)),
      ids: columns ? batch.map((e) => e.stored!.id) : null,
      types: columns ? batch.map((e) => e.stored!.type) : null,
    };
  };
  for await (const event of events) {
    batch.push(event);
    if (batch.length === rows) {
      yield page();
      batch = [];
    }
  }
  if (batch.length) yield page();
}
const SEPARATOR = Buffer.from(' ');

/**
 * The envelope's last fields in canonical JSON (RFC 8785 sorts keys: data, id, occurredAt, runId,
 * schemaVersion, seq, type), read off the end of the bytes. No character of a JSON string is an
 * unescaped quote, so from the closing brace back these can only be the envelope's own fields; a
 * value with an escape in it (never one the harness writes) does not match, and the event is parsed.
 */
const ENVELOPE_TAIL = /,"id":"([^"\\]*)","occurredAt":"[^"\\]*","runId":"([^"\\]*)","schemaVersion":([1-9][0-9]{0,8}),"seq":(0|[1-9][0-9]{0,15}),"type":"([^"\\]*)"\}$/;
/** The longest ENVELOPE_TAIL, less the run id: id 36, occurredAt 30 (ISO with nanoseconds), a long type name. */
const TAIL_BYTES = 240;
/** Where a blob reference's hash is in an event's bytes (ArtifactRefs reads only `sha256` fields, REFS_BESIDES_SHA256 apart). */
const SHA256_KEY = Buffer.from('"sha256":"');
/** A stored content's key in an executed file's bytes (ProcessStarted's exe and script). */
const KEY_KEY = Buffer.from('"key":"');

/**
 * Reads and checks events [from, from + count) of the run from pages of stored bytes: each event's
 * filing and its envelope (from the end of its bytes: ENVELOPE_TAIL), its leaf hashed into each
 * chunk's subtrees. An event is parsed only where a later check reads it (heads, KEPT_TYPES, a
 * re-grading for the seal), where it is at an older schema version (validated and upcast), where it
 * may name a blob not yet seen (ArtifactRefs), or where its end does not read as an envelope's.
 */
export async function scanPages(
  pages: AsyncIterable<RawEventPage> | Iterable<RawEventPage>,
  runId: string,
  from: number,
  count: number,
  chunkSize: number,
  versions: ReadonlyMap<string, number>,
  onProgress?: (done: number) => void,
  known = new KnownHashes(new ArtifactRefs()),
): Promise<SegmentScan> {
  const scan: SegmentScan = { from, count: 0, chunks: [], heads: [], refs: [], kept: [], unchecked: [], lastNonHeadSeq: -1 };
  const refs = known.refs;
  const knownBefore = refs.size;
  const tailBytes = TAIL_BYTES + runId.length;
  let chunk = new LeafAccumulator();
  let lastSealRelevant = -1;
  let lastSealRelevantType: A2rlEvent['type'] = 'RunScheduled';
  for await (const page of pages) {
    const { bytes, lengths, revisions, ids, types } = page;
    let total = page.count;
    for (const length of lengths) total += length;
    if (lengths.length !== page.count || revisions.length !== page.count || (ids && ids.length !== page.count) || (types && types.length !== page.count) || bytes.length !== total) {
      return { ...scan, anomaly: `seq ${from + scan.count}: the store's page of events does not add up` };
    }
    const needles = new PageNeedles(bytes);
    let start = 1;
    for (let i = 0; i < page.count; i++) {
      const seq = from + scan.count;
      const end = start + lengths[i];
      if (scan.count === count) return { ...scan, anomaly: `the stream has events after seq ${seq - 1}, its last revision` };
      if (revisions[i] !== seq) return { ...scan, anomaly: `seq ${seq}: filed under another stream or revision` };
      // The envelope off the end of the bytes; its type and version say whether the event is parsed.
      const tail = ENVELOPE_TAIL.exec(bytes.toString('latin1', Math.max(start, end - tailBytes), end));
      let type: A2rlEvent['type'] | null = null;
      let event: A2rlEvent | null = null;
      if (tail !== null) {
        const version = versions.get(tail[5]);
        if (tail[2] !== runId || Number(tail[4]) !== seq || version === undefined) return { ...scan, anomaly: `seq ${seq}: the bytes are not this event of the run` };
        if (ids && (ids[i] !== tail[1] || types![i] !== tail[5])) return { ...scan, anomaly: `seq ${seq}: the store's id or type column differs from the bytes` };
        type = tail[5] as A2rlEvent['type'];
        if (WHOLE_TYPES.has(type) || Number(tail[3]) !== version || (REF_TYPES.has(type) && !refsKnown(bytes, start, end, needles, known, type))) type = null;
      }
      if (type === null) {
        const stored = bytes.subarray(start, end);
        const checked = await checkStored(stored, ids?.[i], types?.[i], runId, seq, versions);
        if (typeof checked === 'string') return { ...scan, anomaly: `seq ${seq}: ${checked}` };
        event = checked.event;
        type = event.type;
        // A copy: the page is let go.
        if (checked.later) scan.unchecked.push({ seq, bytes: Buffer.from(stored) });
        try {
          refs.add(event);
        } catch {
          return { ...scan, anomaly: `seq ${seq}: its data is not what its type says` };
        }
      }
      if (seq % chunkSize === 0 && chunk.size) {
        scan.chunks.push({ start: seq - chunk.size, size: chunk.size, subtrees: chunk.subtrees() });
        chunk = new LeafAccumulator();
      }
      if (type === 'TreeHeadSigned') scan.heads.push({ seq, data: (event as Extract<A2rlEvent, { type: 'TreeHeadSigned' }>).data, before: chunk.subtrees() });
      else scan.lastNonHeadSeq = seq;
      // SHA-256(0x00 ‖ bytes): the separator before the event becomes the leaf prefix.
      bytes[start - 1] = 0;
      chunk.push(hash('sha256', bytes.subarray(start - 1, end), 'binary'));
      scan.count += 1;
      if (onProgress && scan.count % 10_000 === 0) onProgress(scan.count);
      if (event ? sealRelevant(event) : type !== 'TreeHeadSigned') {
        lastSealRelevant = seq;
        lastSealRelevantType = type;
      }
      if (event && KEPT_TYPES.has(type)) scan.kept.push(event);
      start = end + 1;
    }
  }
  if (chunk.size) scan.chunks.push({ start: from + scan.count - chunk.size, size: chunk.size, subtrees: chunk.subtrees() });
  if (lastSealRelevant >= 0) scan.lastSealRelevant = { seq: lastSealRelevant, type: lastSealRelevantType };
  scan.refs = refs.list().slice(knownBefore);
  onProgress?.(scan.count);
  return scan.count === count ? scan : { ...scan, anomaly: `the stream ends at seq ${from + scan.count - 1}, before its last revision ${from + count - 1}` };
}

/** Types parsed whole wherever they are: heads (checked at the join), the kept ones, and a re-grading (whether it counts for the seal is in its data). */
const WHOLE_TYPES = new Set<A2rlEvent['type']>(['TreeHeadSigned', 'GradingRepeated', ...KEPT_TYPES]);

/**
 * Whether ArtifactRefs would add nothing for the event (the first reference of a blob wins): every
 * `sha256` field in its bytes holds a hash the segment has seen already as a blob, or, in a
 * ProcessStarted that names no stored content (no `key`), as an executed file's unkept hash. A type
 * that names blobs elsewhere (REFS_BESIDES_SHA256) is never known. Read off authentic canonical
 * bytes (the heads vouch for them before the scan's result is used), `"sha256":"` and `"key":"` are
 * always keys: a quote inside a JSON string is escaped.
 */
function refsKnown(bytes: Buffer, start: number, end: number, needles: PageNeedles, known: KnownHashes, type: A2rlEvent['type']): boolean {
  if (REFS_BESIDES_SHA256.has(type)) return false;
  const unkept = type === 'ProcessStarted' && known.anyUnkept() && needles.key(start, end) < 0;
  for (let at = needles.sha256(start, end); at >= 0; at = needles.sha256(at + 74, end)) {
    if (at + 74 >= end || bytes[at + 74] !== 0x22) return false;
    if (!known.has(bytes, at + 10, unkept)) return false;
  }
  return true;
}

/**
 * ArtifactRefs' known blob hashes (and unkept executables' hashes) asked with the 64 hex digits in
 * a page's bytes: the hashes found before are remembered by their first 7 digits and compared digit
 * by digit, so a hash seen before costs no string. Only what ArtifactRefs knows is remembered, and
 * it forgets nothing.
 */
class KnownHashes {
  private readonly blobs = new Map<number, string>();
  private readonly unkept = new Map<number, string>();

  constructor(readonly refs: ArtifactRefs) {}

  anyUnkept(): boolean {
    return this.refs.unkept.size > 0;
  }

  /** Whether bytes [at, at + 64) are a blob's hash ArtifactRefs knows, or (with `unkept`) an unkept executable's. */
  has(bytes: Buffer, at: number, unkept: boolean): boolean {
    const prefix = hexPrefix(bytes, at);
    if (prefix >= 0 && (sameDigits(bytes, at, this.blobs.get(prefix)) || (unkept && sameDigits(bytes, at, this.unkept.get(prefix))))) return true;
    const sha256 = bytes.toString('latin1', at, at + 64);
    const inBlobs = this.refs.has(sha256);
    if (!inBlobs && !(unkept && this.refs.unkept.has(sha256))) return false;
    if (prefix >= 0) (inBlobs ? this.blobs : this.unkept).set(prefix, sha256);
    return true;
  }
}

/** The value of the 7 lowercase hex digits at `at`, or -1. */
function hexPrefix(bytes: Buffer, at: number): number {
  let value = 0;
  for (let k = at; k < at + 7; k++) {
    const digit = HEX[bytes[k]];
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

/** Whether bytes [at, at + 64) are the characters of `sha256`. */
function sameDigits(bytes: Buffer, at: number, sha256: string | undefined): boolean {
  if (sha256 === undefined) return false;
  for (let k = 0; k < 64; k++) if (bytes[at + k] !== sha256.charCodeAt(k)) return false;
  return true;
}

const HEX = new Int8Array(256).fill(-1);
for (let d = 0; d < 16; d++) HEX[d.toString(16).charCodeAt(0)] = d;

/**
 * Where SHA256_KEY and KEY_KEY next occur in a page's bytes: each is searched for once an
 * occurrence (and once at the page's end), not once an event. The events are asked in order.
 */
class PageNeedles {
  private readonly sha256Key: PageNeedle;
  private readonly keyKey: PageNeedle;

  constructor(bytes: Buffer) {
    this.sha256Key = new PageNeedle(bytes, SHA256_KEY);
    this.keyKey = new PageNeedle(bytes, KEY_KEY);
  }

  /** Where SHA256_KEY first lies whole in [from, end), or -1. */
  sha256(from: number, end: number): number {
    return this.sha256Key.within(from, end);
  }

  /** Where KEY_KEY first lies whole in [from, end), or -1. */
  key(from: number, end: number): number {
    return this.keyKey.within(from, end);
  }
}

class PageNeedle {
  /** Next occurrence at or after the last search's start; -1: not searched yet; Infinity: none further. */
  private next = -1;
  /** The key without its opening quote, the commonest byte in JSON, on whose first byte a search skips ahead. */
  private readonly rest: Buffer;

  constructor(private readonly bytes: Buffer, private readonly needle: Buffer) {
    this.rest = needle.subarray(1);
  }

  within(from: number, end: number): number {
    if (this.next < from) this.next = this.search(from);
    return this.next + this.needle.length <= end ? this.next : -1;
  }

  private search(from: number): number {
    for (let at = this.bytes.indexOf(this.rest, from + 1); at >= 0; at = this.bytes.indexOf(this.rest, at + 1)) {
      if (this.bytes[at - 1] === this.needle[0]) return at - 1;
    }
    return Infinity;
  }
}

/**
 * One stored event, parsed: its envelope against its filing (the id and type columns, when the
 * store has them), and the event the bytes hold; a string says why it cannot be vouched for here.
 * An event later checks read whole (a head, KEPT_TYPES) must be valid and canonical: at its current
 * schema version that is checked at the join (`later`, uncheckedFailure), where the validators are
 * loaded anyway; at an older one it is validated and upcast here, its blobs being those of the
 * upcast event (the validators loaded then, in a worker thread too).
 */
async function checkStored(bytes: Buffer, id: string | undefined, type: string | undefined, runId: string, seq: number, versions: ReadonlyMap<string, number>): Promise<{ event: A2rlEvent; later: boolean } | string> {
  let event: A2rlEvent;
  try {
    event = JSON.parse(bytes.toString('utf8')) as A2rlEvent;
  } catch {
    return 'the stored bytes do not parse';
  }
  if (typeof event !== 'object' || event === null || event.runId !== runId || event.seq !== seq || typeof event.type !== 'string' || !versions.has(event.type)) return 'the bytes are not this event of the run';
  if (id !== undefined && (id !== event.id || type !== event.type)) return "the store's id or type column differs from the bytes";
  if (event.schemaVersion !== versions.get(event.type)) {
    const failure = await uncheckedFailure(bytes, event);
    if (typeof failure === 'string') return failure;
    return { event: failure.event, later: false };
  }
  return { event, later: event.type === 'TreeHeadSigned' || KEPT_TYPES.has(event.type) };
}

/**
 * The stored event validated (and upcast) as the harness wrote it: valid, and its bytes its
 * canonical encoding; or why not.
 */
export async function uncheckedFailure(bytes: Uint8Array, event: unknown): Promise<{ event: A2rlEvent } | string> {
  const { validated } = await import('./verify-chain.js');
  try {
    const { event: valid, canonical } = validated(event);
    if (!canonical.equals(bytes)) return 'not in canonical form';
    return { event: valid };
  } catch (error) {
    return `not a valid event: ${(error as Error).message}`;
  }
}
