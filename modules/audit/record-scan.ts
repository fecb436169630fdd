import type { EventStore } from '../ledger/event-store.port.js';
import { EVENT_CATALOG, type A2rlEvent } from '../ledger/events/catalog.js';
import { streamName } from '../ledger/events/ids.js';
import { MerkleAccumulator, type PerfectSubtree } from '../ledger/merkle.js';
import type { RawEventPage } from '../ledger/stores/raw-scan.js';
import { verifyTreeHead } from '../ledger/tree-head.js';
import { ArtifactRefs, type ArtifactRef } from './artifact-refs.js';
import { sealFailure } from './seal.js';
import { CHUNK, chunkQueue, scanChunks, storedChunks, type ChunkQueue, type ChunkReader, type SegmentScan } from './segment-scan.js';
import { validated } from './verify-chain.js';

export * from './segment-scan.js';

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
 * A run is read in chunks (segment-scan.ts scanChunks), by this thread and worker threads at once
 * (page-scan-worker.ts, src/record-scan-worker.ts), each building its part of the Merkle tree; they
 * are joined in seq order by joinSegments, where the heads are checked.
 */

/** What the fast check leaves for the later checks when the record holds. */
export interface RecordScan {
  count: number;
  heads: Array<{ seq: number; treeSize: number }>;
  refs: ArtifactRef[];
  kept: A2rlEvent[];
}

/** Each event type's current schema version (isEventType and EVENT_CATALOG[type].version in one lookup). */
export const VERSIONS: ReadonlyMap<string, number> = new Map<string, number>(Object.entries(EVENT_CATALOG).map(([type, entry]) => [type, entry.version]));

/**
 * Joins the segments of a whole run in seq order: adds each chunk's subtrees to the run's tree,
 * checks each head against the root of the events before it and its signature, the last head's
 * coverage and the seal. Returns what later checks need, or the anomaly that sends the caller to
 * the full check.
 */
export function joinSegments(runId: string, publicKeyPem: string | null, segments: readonly SegmentScan[]): RecordScan | { anomaly: string } {
  const problem = segments.find((s) => s.anomaly)?.anomaly;
  if (problem) return { anomaly: problem };
  // The heads and kept events the scan parsed but did not validate (segment-scan.ts checkStored), before anything reads them.
  for (const segment of segments) {
    for (const { seq, bytes } of segment.unchecked) {
      const failure = invalidStored(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      if (failure) return { anomaly: `seq ${seq}: ${failure}` };
    }
  }
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

/** Why stored bytes are not a valid event in canonical form, or null. */
function invalidStored(bytes: Buffer): string | null {
  try {
    const { canonical } = validated(JSON.parse(bytes.toString('utf8')));
    return canonical.equals(bytes) ? null : 'not in canonical form';
  } catch (error) {
    return `not a valid event: ${(error as Error).message}`;
  }
}

/** A subtree as a worker thread sent it (its hash arrives as a plain Uint8Array). */
const received = (subtree: PerfectSubtree): PerfectSubtree => ({ size: subtree.size, hash: Buffer.from(subtree.hash.buffer, subtree.hash.byteOffset, subtree.hash.byteLength) });

/**
 * Scans chunks taken from a run's queue elsewhere, until none is left (scanChunks): a worker thread
 * that opens the ledger itself (src/record-scan-threads.ts, page-scan-threads.ts).
 */
export type SegmentScanner = (runId: string, queue: ChunkQueue, onProgress: (done: number) => void) => Promise<SegmentScan[]>;

/** Below this many events a run is read in one thread: starting another would cost more than it saves. */
const PARALLEL_FROM = 100_000;

/** Reads revisions [from, from + count) of a run's stream in pages (an SQLite ledger: modules/ledger/stores/raw-scan.ts). */
export type PageReader = (runId: string, from: number, count: number) => Iterable<RawEventPage> | AsyncIterable<RawEventPage>;

/**
 * The fast check of the whole run: its stream in chunks, read by `threads` threads at once, this
 * one (through `pages` when given, else `store`) and the others by `scanner`, each taking the next
 * chunk when done with its last; joined in seq order. Null when the run has no events.
 */
export async function scanRecord(
  store: EventStore,
  runId: string,
  publicKeyPem: string | null,
  options: { parallel?: { scanner: SegmentScanner; threads: number; minEvents?: number; chunkSize?: number }; pages?: PageReader; onProgress?: (done: number) => void } = {},
): Promise<RecordScan | { anomaly: string } | null> {
  const revision = await store.streamRevision(streamName(runId));
  if (revision === null) return null;
  const count = Number(revision) + 1;
  const threads = options.parallel && count >= (options.parallel.minEvents ?? PARALLEL_FROM) ? Math.max(1, Math.floor(options.parallel.threads)) : 1;
  const chunkSize = options.parallel?.chunkSize ?? CHUNK;
  const parts = Math.max(1, Math.min(threads, Math.ceil(count / chunkSize)));
  const queue = chunkQueue(count, chunkSize, streamName(runId), VERSIONS);
  const done = new Array<number>(parts).fill(0);
  const progress = (i: number) => (n: number) => {
    done[i] = n;
    options.onProgress?.(done.reduce((a, b) => a + b, 0));
  };
  // The other threads first: they take chunks as soon as they have started, while this one reads.
  const others = Array.from({ length: parts - 1 }, (_, j) => options.parallel!.scanner(runId, queue, progress(j + 1)));
  const pages = options.pages;
  const read: ChunkReader = pages ? (from, n) => pages(runId, from, n) : storedChunks(store, queue.stream);
  const first = scanChunks(read, runId, queue, progress(0));
  const segments = (await Promise.all([first, ...others])).flat().sort((a, b) => a.from - b.from);
  return joinSegments(runId, publicKeyPem, segments);
}
