import type { EventStore } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import { leafHash, MerkleAccumulator } from '../ledger/merkle.js';
import { verifyTreeHead } from '../ledger/tree-head.js';

export interface HeadStatus {
  seq: number;
  time: string;
  treeSize: number;
  keyId: string;
  /** The root is that of the events before it and the signature verifies with this ledger's key. */
  valid: boolean;
}

/**
 * A run's signed tree heads, each checked on the way: the stored events are hashed into the RFC
 * 6962 tree as they are read (bounded memory), so a head's root is compared with the events it
 * covers, and its signature with `publicKeyPem`. Null for an unknown run.
 */
export async function treeHeadStatus(store: EventStore, runId: string, publicKeyPem: string | null): Promise<{ signedHeads: number; lastHead: HeadStatus | null } | null> {
  const tree = new MerkleAccumulator();
  let signedHeads = 0;
  let lastHead: HeadStatus | null = null;
  let any = false;
  for await (const { event, bytes } of store.readStream(streamName(runId))) {
    any = true;
    if (event.type === 'TreeHeadSigned') {
      const { treeSize, rootHash, signature, keyId } = event.data;
      signedHeads += 1;
      const rootOk = treeSize === tree.size && tree.root().toString('hex') === rootHash;
      const signed = publicKeyPem !== null && verifyTreeHead({ runId, treeSize, rootHash }, keyId, signature, publicKeyPem);
      lastHead = { seq: event.seq, time: event.occurredAt, treeSize, keyId, valid: rootOk && signed };
    }
    tree.push(leafHash(bytes));
  }
  return any ? { signedHeads, lastHead } : null;
}
