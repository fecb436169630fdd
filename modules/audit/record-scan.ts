import { storedEvents, type EventStore, type StoredEvent } from '../ledger/event-store.port.js';
import { EVENT_CATALOG, isEventType, type A2rlEvent, type EventData } from '../ledger/events/catalog.js';
import { streamName } from '../ledger/events/ids.js';
import { ArtifactRefs, type ArtifactRef } from './artifact-refs.js';
import { leafHash, MerkleAccumulator, type PerfectSubtree } from '../ledger/merkle.js';
import { verifyTreeHead } from '../ledger/tree-head.js';
import { sealFailure, sealRelevant, validated } from './verify-chain.js';

/**
 * The fast check of a run's record, for `a2rl verify`: every event's bytes are hashed into the
 * run's Merkle tree and every signed tree head must match its root and verify with the key, the
 * last head covering every event but the trailing heads; the stored stream, revision, id and type
 * columns must say what the bytes say; the run must be sealed. When all of that holds, every event's
 * bytes are the ones the harness validated, encoded canonically and signed, so they are not
 * validated or re-encoded one by one again: only the events that later checks read (KEPT_TYPES), the
 * heads, and events at an older schema version (upcast to find their blobs) are.
 *
 * The first thing that does not hold ends the fast check with an `anomaly`; the caller then runs
 * the full per-event check (verify-chain.ts), which names every failure and its seq. So a record
 * that verifies costs a read, a parse and two hashes an event; one that does not costs a second read.
 *
 * A run is read in segments (scanSegment: one read of a revision range, pure apart from its input)
 * that may be scanned in parallel (src/record-scan-worker.ts), each building its part of the Merkle
 * tree, and are joined in seq order by joinSegments, where the heads are checked.
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
  /** Last seq that is not a head (-1: none): what the last head must cover. */
  lastNonHeadSeq: number;
  /** The last event the seal check looks at. */
  lastSealRelevant?: { seq: number; type: A2rlEvent['type'] };
  /** Why the fast check cannot vouch for the record (the full check then says what is wrong). */
  anomaly?: string;
}

/** What the fast check leaves for the later checks when the record holds. */
export interface RecordScan {
  count: number;
  heads: Array<{ seq: number; treeSize: number }>;
  refs: ArtifactRef[];
  kept: A2rlEvent[];
}

/** Reads and checks events [from, from + count) of the run: bytes parsed once, leaves hashed into each chunk's subtrees. */
export async function scanSegment(events: AsyncIterable<StoredEvent>, runId: string, from: number, count: number, chunkSize = CHUNK, onProgress?: (done: number) => void): Promise<SegmentScan> {
  const scan: SegmentScan = { from, count: 0, chunks: [], heads: [], refs: [], kept: [], lastNonHeadSeq: -1 };
  const refs = new ArtifactRefs();
  const stream = streamName(runId);
  let chunk = new MerkleAccumulator();
  for await (const stored of events) {
    const seq = from + scan.count;
    if (scan.count === count) return { ...scan, anomaly: `the stream has events after seq ${seq - 1}, its last revision` };
    const event = checkStored(stored, stream, runId, seq);
    if (typeof event === 'string') return { ...scan, anomaly: `seq ${seq}: ${event}` };
    try {
      refs.add(event);
    } catch {
      return { ...scan, anomaly: `seq ${seq}: its data is not what its type says` };
    }
    if (seq % chunkSize === 0 && chunk.size) {
      scan.chunks.push({ start: seq - chunk.size, size: chunk.size, subtrees: chunk.subtrees() });
      chunk = new MerkleAccumulator();
    }
    if (event.type === 'TreeHeadSigned') scan.heads.push({ seq, data: event.data, before: chunk.subtrees() });
    else scan.lastNonHeadSeq = seq;
    chunk.push(leafHash(stored.bytes));
    scan.count += 1;
    if (onProgress && scan.count % 10_000 === 0) onProgress(scan.count);
    if (sealRelevant(event)) scan.lastSealRelevant = { seq, type: event.type };
    if (KEPT_TYPES.has(event.type)) scan.kept.push(event);
  }
  if (chunk.size) scan.chunks.push({ start: from + scan.count - chunk.size, size: chunk.size, subtrees: chunk.subtrees() });
  scan.refs = refs.list();
  onProgress?.(scan.count);
  return scan.count === count ? scan : { ...scan, anomaly: `the stream ends at seq ${from + scan.count - 1}, before its last revision ${from + count - 1}` };
}

/**
 * One stored event: its filing (stream, revision, id and type columns) against its bytes, and the
 * event the bytes hold; a string says why it cannot be vouched for here.
 */
function checkStored(stored: StoredEvent, stream: string, runId: string, seq: number): A2rlEvent | string {
  let event: A2rlEvent;
  try {
    event = JSON.parse(stored.bytes.toString('utf8')) as A2rlEvent;
  } catch {
    return 'the stored bytes do not parse';
  }
  if (typeof event !== 'object' || event === null || event.runId !== runId || event.seq !== seq || !isEventType(event.type)) return 'the bytes are not this event of the run';
  if (stored.stream !== stream || Number(stored.revision) !== seq) return 'filed under another stream or revision';
  if (stored.stored && (stored.stored.id !== event.id || stored.stored.type !== event.type)) return "the store's id or type column differs from the bytes";
  // Read whole by later checks, or at an older schema version: validated (and upcast) one by one.
  if (event.type === 'TreeHeadSigned' || KEPT_TYPES.has(event.type) || event.schemaVersion !== EVENT_CATALOG[event.type].version) {
    try {
      const { event: valid, canonical } = validated(event);
      if (!canonical.equals(stored.bytes)) return 'not in canonical form';
      return valid;
    } catch (error) {
      return `not a valid event: ${(error as Error).message}`;
    }
  }
  return event;
}

/**
 * Joins the segments of a whole run in seq order: adds each chunk's subtrees to the run's tree,
 * checks each head against the root of the events before it and its signature, the last head's
 * coverage and the seal. Returns what later checks need, or the anomaly that sends the caller to
 * the full check.
 */
export function joinSegments(runId: string, publicKeyPem: string | null, segments: readonly SegmentScan[]): RecordScan | { anomaly: string } {
  const problem = segments.find((s) => s.anomaly)?.anomaly;
  if (problem) return { anomaly: problem };
  if (publicKeyPem === null) return { anomaly: 'no public key to check the signed heads with' };
  const tree = new MerkleAccumulator();
  const refs = new ArtifactRefs();
  const record: RecordScan = { count: 0, heads: [], refs: [], kept: [] };
  let lastHeadSize = -1;
  let lastNonHeadSeq = -1;
  let lastSealRelevant: SegmentScan['lastSealRelevant'];
  for (const segment of segments) {
    if (segment.from !== tree.size) return { anomaly: `segments out of order at seq ${segment.from}` };
    let head = 0;
    for (const chunk of segment.chunks) {
      for (; head < segment.heads.length && segment.heads[head].seq < chunk.start + chunk.size; head++) {
        const { seq, data, before } = segment.heads[head];
        const probe = tree.clone();
        for (const subtree of before) probe.pushSubtree(received(subtree));
        const root = data.treeSize === seq && probe.size === seq ? probe.root().toString('hex') : null;
        if (root !== data.rootHash || !verifyTreeHead({ runId, treeSize: data.treeSize, rootHash: data.rootHash }, data.keyId, data.signature, publicKeyPem)) {
          return { anomaly: `the signed head at seq ${seq} does not verify` };
        }
        lastHeadSize = data.treeSize;
        record.heads.push({ seq, treeSize: data.treeSize });
      }
      for (const subtree of chunk.subtrees) tree.pushSubtree(received(subtree));
    }
    refs.merge(segment.refs);
    record.kept.push(...segment.kept);
    lastNonHeadSeq = Math.max(lastNonHeadSeq, segment.lastNonHeadSeq);
    lastSealRelevant = segment.lastSealRelevant ?? lastSealRelevant;
  }
  if (lastHeadSize < 0 || lastHeadSize <= lastNonHeadSeq) return { anomaly: 'the last signed head does not cover every event' };
  if (sealFailure(lastSealRelevant).length) return { anomaly: 'the run is not sealed' };
  return { ...record, count: tree.size, refs: refs.list() };
}

/** A subtree as a worker thread sent it (its hash arrives as a plain Uint8Array). */
const received = (subtree: PerfectSubtree): PerfectSubtree => ({ size: subtree.size, hash: Buffer.from(subtree.hash.buffer, subtree.hash.byteOffset, subtree.hash.byteLength) });

/** Scans a segment elsewhere: a worker thread that opens the ledger itself (src/record-scan-threads.ts). */
export type SegmentScanner = (runId: string, from: number, count: number, chunkSize: number, onProgress: (done: number) => void) => Promise<SegmentScan>;

/** Below this many events a run is read in one segment: starting a thread would cost more than it saves. */
const PARALLEL_FROM = 100_000;

/**
 * The fast check of the whole run: its stream in `threads` segments, the first read here through
 * `store` and the others by `scanner` at the same time, joined in seq order. Null when the run has
 * no events.
 */
export async function scanRecord(
  store: EventStore,
  runId: string,
  publicKeyPem: string | null,
  options: { parallel?: { scanner: SegmentScanner; threads: number; minEvents?: number; chunkSize?: number }; onProgress?: (done: number) => void } = {},
): Promise<RecordScan | { anomaly: string } | null> {
  const revision = await store.streamRevision(streamName(runId));
  if (revision === null) return null;
  const count = Number(revision) + 1;
  const threads = options.parallel && count >= (options.parallel.minEvents ?? PARALLEL_FROM) ? Math.max(1, Math.floor(options.parallel.threads)) : 1;
  // Whole chunks to each thread, as evenly as they go.
  const chunkSize = options.parallel?.chunkSize ?? CHUNK;
  const chunks = Math.ceil(count / chunkSize);
  const parts = Math.max(1, Math.min(threads, chunks));
  const bound = (i: number) => Math.min(count, Math.round((chunks * i) / parts) * chunkSize);
  const done = new Array<number>(parts).fill(0);
  const segments = await Promise.all(
    Array.from({ length: parts }, (_, i) => {
      const [from, to] = [bound(i), bound(i + 1)];
      const onProgress = (n: number) => {
        done[i] = n;
        options.onProgress?.(done.reduce((a, b) => a + b, 0));
      };
      if (i > 0) return options.parallel!.scanner(runId, from, to - from, chunkSize, onProgress);
      return scanSegment(storedEvents(store, streamName(runId), { fromRevision: BigInt(from), maxCount: to - from }), runId, from, to - from, chunkSize, onProgress);
    }),
  );
  return joinSegments(runId, publicKeyPem, segments);
}
