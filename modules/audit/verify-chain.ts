import type { A2rlEvent } from '../ledger/events/catalog.js';
import { canonicalBytes } from '../ledger/events/canonical-json.js';
import { validateStoredEvent } from '../ledger/events/envelope.js';
import { leafHash, MerkleAccumulator } from './merkle.js';
import { verifyTreeHead } from './tree-head.js';

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
 */
export function verifyEventChain(runId: string, entries: readonly ChainEntry[], publicKeyPem: string | null): { events: A2rlEvent[]; failures: VerificationFailure[] } {
  const failures: VerificationFailure[] = [];
  const events: A2rlEvent[] = [];
  const tree = new MerkleAccumulator();
  let lastHeadSize = -1;
  let lastNonHeadSeq = -1;
  entries.forEach((entry, index) => {
    const where = { seq: index, ...(entry.line !== undefined ? { line: entry.line } : {}) };
    let event: A2rlEvent;
    let stored: unknown;
    try {
      stored = JSON.parse(entry.bytes.toString('utf8'));
      event = validateStoredEvent(stored);
    } catch (err) {
      failures.push({ check: 'event', ...where, message: `not a valid event: ${(err as Error).message}` });
      tree.push(leafHash(entry.bytes));
      return;
    }
    events.push(event);
    if (!canonicalBytes(stored).equals(entry.bytes)) failures.push({ check: 'event', ...where, message: 'not in canonical JSON form (RFC 8785): the bytes were altered' });
    if (event.runId !== runId) failures.push({ check: 'event', ...where, message: `belongs to run ${event.runId}, not ${runId}` });
    if (event.seq !== index) failures.push({ check: 'sequence', ...where, message: `seq ${event.seq} where ${index} was expected (events missing, inserted or reordered)` });
    if (event.type === 'TreeHeadSigned') {
      const { treeSize, rootHash, signature, keyId } = event.data;
      if (treeSize > tree.size) {
        failures.push({ check: 'tree-head', ...where, message: `signed head claims ${treeSize} events but only ${tree.size} precede it` });
      } else {
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
        lastHeadSize = Math.max(lastHeadSize, treeSize);
      }
    } else {
      lastNonHeadSeq = index;
    }
    tree.push(leafHash(entry.bytes));
  });
  if (lastHeadSize < 0) failures.push({ check: 'coverage', message: 'the run has no signed tree head' });
  else if (lastHeadSize <= lastNonHeadSeq) {
    failures.push({ check: 'coverage', seq: lastHeadSize, message: `events from seq ${lastHeadSize} to ${lastNonHeadSeq} are not covered by any signed tree head` });
  }
  return { events, failures };
}

/**
 * A finished run ends with RunCompleted or RunInterrupted (then its final head). Without this check
 * a chain cut right after an intermediate signed head would verify, hiding everything after it.
 */
export function sealFailures(events: readonly A2rlEvent[]): VerificationFailure[] {
  const last = events.filter((e) => e.type !== 'TreeHeadSigned').at(-1);
  if (!last || last.type === 'RunCompleted' || last.type === 'RunInterrupted') return [];
  return [{ check: 'coverage', seq: last.seq, message: `the run is not sealed: its last event (seq ${last.seq}, ${last.type}) is not RunCompleted or RunInterrupted; it is still running or its last events were removed` }];
}
