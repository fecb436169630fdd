import type { A2rlEvent } from '../../ledger/events/catalog.js';
import { canonicalBytes } from '../../ledger/events/canonical-json.js';
import { LeafHashes, leafHash, verifyInclusion } from '../../ledger/merkle.js';
import { verifyTreeHead } from '../../ledger/tree-head.js';
import type { VerificationFailure } from '../verify-chain.js';
import { HEADS_FILE, HEADS_FORMAT } from './layout.js';
import { MerkleLevels, verifyConsistency } from './proofs.js';

/**
 * heads.json: the run's signed tree heads with the proofs that tie them together and to the events.
 *
 * - `leaves`: the RFC 6962 leaf hash of every line of events.ndjson, in order. Every signed head
 *   commits to a prefix of this list (its root is recomputed from it and its signature checked), so
 *   the list up to the last head is authenticated by the signatures: a verifier compares each line
 *   with its signed leaf and names the exact line that was altered, deleted, inserted or moved.
 *   Any inclusion proof of an event can be derived from it.
 * - `heads[j].previous` (null for the first head): an inclusion proof of the previous head's own
 *   TreeHeadSigned event in head j's tree, and an RFC 6962 consistency proof from the previous
 *   head's tree to head j's. Together they show, from the heads alone, that each signed head extends
 *   the one before (append-only) and has recorded it, without reading events.ndjson.
 */
export interface HeadEntry {
  seq: number;
  treeSize: number;
  rootHash: string;
  signature: string;
  keyId: string;
  previous: { seq: number; treeSize: number; inclusion: string[]; consistency: string[] } | null;
}

export interface HeadsFile {
  format: typeof HEADS_FORMAT;
  runId: string;
  leaves: string[];
  heads: HeadEntry[];
}

type HeadEvent = Extract<A2rlEvent, { type: 'TreeHeadSigned' }>;
const hex = (b: Buffer) => b.toString('hex');

/** heads.json for a run's event lines (the events parsed from the same lines, in seq order). */
export function buildHeads(runId: string, lines: readonly Buffer[], events: readonly A2rlEvent[]): HeadsFile {
  const leaves = new LeafHashes();
  for (const line of lines) leaves.push(leafHash(line));
  return headsFromLeaves(runId, leaves, events);
}

/**
 * heads.json from the leaf hashes of a run's lines and its TreeHeadSigned events (other events are
 * skipped), for a reader that streamed the run and kept only those.
 */
export function headsFromLeaves(runId: string, leafHashes: LeafHashes, events: readonly A2rlEvent[]): HeadsFile {
  const levels = new MerkleLevels(leafHashes);
  const heads: HeadEntry[] = [];
  let prev: HeadEntry | null = null;
  for (const event of events) {
    if (event.type !== 'TreeHeadSigned') continue;
    const { treeSize, rootHash, signature, keyId } = (event as HeadEvent).data;
    const provable = prev !== null && prev.seq < treeSize && prev.treeSize <= treeSize && treeSize <= leafHashes.size;
    const head: HeadEntry = {
      seq: event.seq,
      treeSize,
      rootHash,
      signature,
      keyId,
      previous: prev && {
        seq: prev.seq,
        treeSize: prev.treeSize,
        inclusion: provable ? levels.inclusionProof(prev.seq, treeSize).map(hex) : [],
        consistency: provable ? levels.consistencyProof(prev.treeSize, treeSize).map(hex) : [],
      },
    };
    heads.push(head);
    prev = head;
  }
  return { format: HEADS_FORMAT, runId, leaves: Array.from({ length: leafHashes.size }, (_, i) => hex(leafHashes.get(i)!)), heads };
}

const HEX64 = /^[0-9a-f]{64}$/;
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isHexList = (v: unknown): v is string[] => Array.isArray(v) && v.every((h) => typeof h === 'string' && HEX64.test(h));
const hasExactly = (o: unknown, keys: string[]): o is Record<string, unknown> =>
  typeof o === 'object' && o !== null && !Array.isArray(o) && Object.keys(o).sort().join() === [...keys].sort().join();

/** What is wrong with heads.json's shape, or null. */
function shapeProblem(value: unknown): string | null {
  if (!hasExactly(value, ['format', 'runId', 'leaves', 'heads'])) return 'must be an object with exactly format, runId, leaves and heads';
  if (value.format !== HEADS_FORMAT) return `format is ${JSON.stringify(value.format)}, expected "${HEADS_FORMAT}"`;
  if (!isHexList(value.leaves)) return 'leaves must be lowercase hex SHA-256 hashes';
  if (!Array.isArray(value.heads)) return 'heads must be an array';
  for (const [i, h] of value.heads.entries()) {
    const bad = `heads[${i}] is malformed`;
    if (!hasExactly(h, ['seq', 'treeSize', 'rootHash', 'signature', 'keyId', 'previous'])) return bad;
    if (!isCount(h.seq) || !isCount(h.treeSize) || typeof h.rootHash !== 'string' || !HEX64.test(h.rootHash) || typeof h.signature !== 'string' || typeof h.keyId !== 'string') return bad;
    const p = h.previous;
    if (p === null) continue;
    if (!hasExactly(p, ['seq', 'treeSize', 'inclusion', 'consistency']) || !isCount(p.seq) || !isCount(p.treeSize) || !isHexList(p.inclusion) || !isHexList(p.consistency)) return bad;
  }
  return null;
}

export interface HeadsCheck {
  /** Problems with heads.json itself. */
  failures: VerificationFailure[];
  /** Lines that differ from their signed leaf; only given when every head in heads.json verifies. */
  lineFailures: VerificationFailure[];
}

/**
 * Checks heads.json against the event lines and the public key: shape and canonical form, each
 * head's root over the listed leaves and its signature, both proofs to the previous head, that the
 * heads are exactly the TreeHeadSigned events of events.ndjson, and each line against its leaf
 * (skipped when `lines` is null: an exporter that derived the leaves from the lines itself).
 */
export function checkHeads(runId: string, bytes: Buffer, lines: readonly Buffer[] | null, events: readonly A2rlEvent[], publicKeyPem: string): HeadsCheck {
  const failures: VerificationFailure[] = [];
  const fail = (message: string, seq?: number) => failures.push({ check: 'tree-head', ...(seq !== undefined ? { seq } : {}), message: `${HEADS_FILE}: ${message}` });
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    fail(`not JSON: ${(err as Error).message}`);
    return { failures, lineFailures: [] };
  }
  const problem = shapeProblem(parsed);
  if (problem) {
    fail(problem);
    return { failures, lineFailures: [] };
  }
  const file = parsed as HeadsFile;
  if (!canonicalBytes(file).equals(bytes)) fail('not in canonical JSON form (RFC 8785): the file was edited');
  if (file.runId !== runId) fail(`is for run ${file.runId}, not ${runId}`);

  const leaves = file.leaves.map((h) => Buffer.from(h, 'hex'));
  const levels = new MerkleLevels(leaves);
  file.heads.forEach((head, j) => {
    const at = `head at seq ${head.seq}`;
    if (head.treeSize > leaves.length) {
      fail(`${at} covers ${head.treeSize} events but ${leaves.length} leaves are listed`, head.seq);
      return;
    }
    const root = hex(levels.root(head.treeSize));
    if (root !== head.rootHash) fail(`${at}: the listed leaves give root ${root}, the head says ${head.rootHash}`, head.seq);
    if (!verifyTreeHead({ runId, treeSize: head.treeSize, rootHash: head.rootHash }, head.keyId, head.signature, publicKeyPem)) {
      fail(`${at}: signature by key ${head.keyId} does not verify with the public key`, head.seq);
    }
    const prev = j > 0 ? file.heads[j - 1] : null;
    const p = head.previous;
    if (!prev || !p) {
      if (prev || p) fail(`${at}: ${prev ? 'has no proofs to the previous head' : 'is the first head but names a previous one'}`, head.seq);
      return;
    }
    if (p.seq !== prev.seq || p.treeSize !== prev.treeSize) {
      fail(`${at}: previous is seq ${p.seq} (size ${p.treeSize}), the previous head is seq ${prev.seq} (size ${prev.treeSize})`, head.seq);
      return;
    }
    const signedRoot = Buffer.from(head.rootHash, 'hex');
    const prevLeaf = leaves[prev.seq];
    if (!prevLeaf || !verifyInclusion(prevLeaf, prev.seq, head.treeSize, p.inclusion.map((h) => Buffer.from(h, 'hex')), signedRoot)) {
      fail(`${at}: the inclusion proof of the previous head's event (seq ${prev.seq}) does not verify`, head.seq);
    }
    if (!verifyConsistency(prev.treeSize, head.treeSize, Buffer.from(prev.rootHash, 'hex'), signedRoot, p.consistency.map((h) => Buffer.from(h, 'hex')))) {
      fail(`${at}: the consistency proof from the previous head (size ${prev.treeSize}) does not verify`, head.seq);
    }
  });

  const signedEvents = events.filter((e): e is HeadEvent => e.type === 'TreeHeadSigned');
  const listed = new Map(file.heads.map((h) => [h.seq, h]));
  for (const e of signedEvents) {
    const h = listed.get(e.seq);
    listed.delete(e.seq);
    if (!h) fail(`does not list the TreeHeadSigned event at seq ${e.seq}`, e.seq);
    else if (h.treeSize !== e.data.treeSize || h.rootHash !== e.data.rootHash || h.signature !== e.data.signature || h.keyId !== e.data.keyId) {
      fail(`head at seq ${e.seq} differs from the TreeHeadSigned event at that seq`, e.seq);
    }
  }
  for (const seq of listed.keys()) fail(`lists a head at seq ${seq} that events.ndjson does not have`, seq);
  if (file.heads.length === 0) fail('lists no signed head');

  // The leaves are trustworthy only when every head verified: then name the lines that differ.
  const lineFailures: VerificationFailure[] = [];
  if (failures.length === 0 && lines) {
    if (lines.length !== leaves.length) {
      lineFailures.push({ check: 'sequence', message: `events.ndjson has ${lines.length} lines, the signed tree has ${leaves.length} events (lines deleted or inserted)` });
    }
    for (let i = 0; i < Math.min(lines.length, leaves.length); i++) {
      if (leafHash(lines[i]).equals(leaves[i])) continue;
      let last = i;
      while (last + 1 < Math.min(lines.length, leaves.length) && !leafHash(lines[last + 1]).equals(leaves[last + 1])) last++;
      const more = last > i ? ` (and the ${last - i} following lines)` : '';
      lineFailures.push({ check: 'event', seq: i, line: i + 1, message: `differs from signed event seq ${i}: the line was altered, or lines were deleted, inserted or reordered${more}` });
      i = last;
    }
  }
  return { failures, lineFailures };
}
