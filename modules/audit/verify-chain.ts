import { EVENT_CATALOG, isEventType, type A2rlEvent, type EventData } from '../ledger/events/catalog.js';
import { canonicalBytes } from '../ledger/events/canonical-json.js';
import { validateAndEncode, validateStoredEvent } from '../ledger/events/envelope.js';
import { leafHash, MerkleAccumulator } from '../ledger/merkle.js';
import { verifyTreeHead } from '../ledger/tree-head.js';
import { sealFailure, sealRelevant } from './seal.js';

/** One problem found by a verification, located by seq, bundle line or artifact. */
export interface VerificationFailure {
  check: 'event' | 'sequence' | 'tree-head' | 'coverage' | 'artifact' | 'projection' | 'report' | 'regrade' | 'bundle' | 'key' | 'integrity';
  seq?: number;
  /** 1-based line of events.ndjson (bundles). */
  line?: number;
  artifact?: string;
  message: string;
}

export interface ChainEntry {
  /** The stored bytes of the event (a line of events.ndjson, or the ledger's stored form). */
  bytes: Buffer;
  /** 1-based line number when read from a bundle. */
  line?: number;
}

/**
 * Verifies a run's event chain: every event parses, is valid, is in canonical form and belongs to
 * the run; seqs are dense from 0; every TreeHeadSigned matches the RFC 6962 root recomputed over the
 * events before it and carries a valid Ed25519 signature by `publicKeyPem`; the last head covers
 * every event except the trailing heads. Whether the run is sealed is `sealFailures`. Returns the parsed events and every failure found.
 * (ChainVerifier checks the same one entry at a time, for readers that stream a run.)
 */
export function verifyEventChain(runId: string, entries: readonly ChainEntry[], publicKeyPem: string | null): { events: A2rlEvent[]; failures: VerificationFailure[] } {
  const chain = new ChainVerifier(runId, publicKeyPem);
  const events: A2rlEvent[] = [];
  for (const entry of entries) {
    const event = chain.push(entry);
    if (event) events.push(event);
  }
  chain.finish();
  return { events, failures: chain.failures };
}

/** What JSON.parse gave for an entry's bytes, when the caller parsed them already (one parse per event). */
export type ParsedBytes = { value: unknown } | { error: Error };

export function parseBytes(bytes: Buffer): ParsedBytes {
  try {
    return { value: JSON.parse(bytes.toString('utf8')) as unknown };
  } catch (error) {
    return { error: error as Error };
  }
}

/**
 * verifyEventChain one entry at a time, in seq order, in bounded memory: the Merkle accumulator
 * (O(log n) hashes), the size the last head covered and the last seq that is not a head. Each
 * entry's failures are appended to `failures` as it is pushed; `finish` adds the coverage check.
 */
export class ChainVerifier {
  readonly failures: VerificationFailure[] = [];
  private readonly tree = new MerkleAccumulator();
  private lastHeadSize = -1;
  private lastNonHeadSeq = -1;
  /** Leaf hash of the entry pushed last (callers that keep leaves need not hash again). */
  lastLeaf: Buffer | null = null;

  constructor(private readonly runId: string, private readonly publicKeyPem: string | null) {}

  /** Entries checked so far (the seq the next one must have). */
  get size(): number {
    return this.tree.size;
  }

  /** Root over every entry pushed so far. */
  root(): Buffer {
    return this.tree.root();
  }

  /** Checks the next entry; returns the event it holds (upcast), or null when it is not a valid event. */
  push(entry: ChainEntry, parsed: ParsedBytes = parseBytes(entry.bytes)): A2rlEvent | null {
    const { runId, failures, tree } = this;
    const index = tree.size;
    const where = { seq: index, ...(entry.line !== undefined ? { line: entry.line } : {}) };
    let event: A2rlEvent;
    let canonical: Buffer;
    try {
      if ('error' in parsed) throw parsed.error;
      ({ event, canonical } = validated(parsed.value));
    } catch (err) {
      failures.push({ check: 'event', ...where, message: `not a valid event: ${(err as Error).message}` });
      tree.push((this.lastLeaf = leafHash(entry.bytes)));
      return null;
    }
    if (!canonical.equals(entry.bytes)) failures.push({ check: 'event', ...where, message: 'not in canonical JSON form (RFC 8785): the bytes were altered' });
    if (event.runId !== runId) failures.push({ check: 'event', ...where, message: `belongs to run ${event.runId}, not ${runId}` });
    if (event.seq !== index) failures.push({ check: 'sequence', ...where, message: `seq ${event.seq} where ${index} was expected (events missing, inserted or reordered)` });
    if (event.type === 'TreeHeadSigned') this.checkHead(event.data, where);
    else this.lastNonHeadSeq = index;
    tree.push((this.lastLeaf = leafHash(entry.bytes)));
    return event;
  }

  /** After the last entry: the last head must cover every event but the trailing heads. */
  finish(): VerificationFailure[] {
    const added: VerificationFailure[] = [];
    if (this.lastHeadSize < 0) added.push({ check: 'coverage', message: 'the run has no signed tree head' });
    else if (this.lastHeadSize <= this.lastNonHeadSeq) {
      added.push({ check: 'coverage', seq: this.lastHeadSize, message: `events from seq ${this.lastHeadSize} to ${this.lastNonHeadSeq} are not covered by any signed tree head` });
    }
    this.failures.push(...added);
    return added;
  }

  private checkHead({ treeSize, rootHash, signature, keyId }: EventData<'TreeHeadSigned'>, where: { seq: number; line?: number }): void {
    const { runId, failures, tree, publicKeyPem } = this;
    if (treeSize > tree.size) {
      failures.push({ check: 'tree-head', ...where, message: `signed head claims ${treeSize} events but only ${tree.size} precede it` });
      return;
    }
    const root = treeSize === tree.size ? tree.root() : null;
    if (root && root.toString('hex') !== rootHash) {
      failures.push({ check: 'tree-head', ...where, message: `root of the first ${treeSize} events is ${root.toString('hex')}, the signed head says ${rootHash}` });
    } else if (!root) {
      failures.push({ check: 'tree-head', ...where, message: `signed head covers ${treeSize} events but ${tree.size} precede it; heads must cover everything before them` });
    }
    if (publicKeyPem === null) failures.push({ check: 'tree-head', ...where, message: 'no public key to check the signature with' });
    else if (!verifyTreeHead({ runId, treeSize, rootHash }, keyId, signature, publicKeyPem)) {
      failures.push({ check: 'tree-head', ...where, message: `signature by key ${keyId} does not verify with the given public key` });
    }
    this.lastHeadSize = Math.max(this.lastHeadSize, treeSize);
  }
}

/**
 * The stored value as a valid event (upcast when written at an older schema version) and its
 * canonical bytes. An event at the current version is validated by validateAndEncode, whose bytes
 * are the canonical form: computed once, not once to validate and again to compare.
 */
export function validated(stored: unknown): { event: A2rlEvent; canonical: Buffer } {
  const e = stored as { type?: unknown; schemaVersion?: unknown } | null;
  if (typeof e?.type === 'string' && isEventType(e.type) && e.schemaVersion === EVENT_CATALOG[e.type].version) {
    return { canonical: validateAndEncode(stored), event: stored as A2rlEvent };
  }
  return { event: validateStoredEvent(stored), canonical: canonicalBytes(stored) };
}

/**
 * A finished run ends with RunCompleted or RunInterrupted (then its final head). Without this check
 * a chain cut right after an intermediate signed head would verify, hiding everything after it.
 */
export function sealFailures(events: readonly A2rlEvent[]): VerificationFailure[] {
  return sealFailure(events.filter(sealRelevant).at(-1));
}

export { sealFailure, sealRelevant } from './seal.js';
