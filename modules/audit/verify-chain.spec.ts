import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { canonicalBytes } from '../ledger/events/canonical-json.js';
import { EVENT_CATALOG, type EventData, type EventType } from '../ledger/events/catalog.js';
import { eventId } from '../ledger/events/ids.js';
import { clearUpcasters, registerUpcaster } from '../ledger/events/upcast.js';
import { buildEvent, encodeEvent } from '../ledger/events/envelope.js';
import { leafHash, MerkleAccumulator } from '../ledger/merkle.js';
import { initSigningKey, signTreeHead } from '../ledger/tree-head.js';
import { sealFailures, verifyEventChain } from './verify-chain.js';

const home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-chain-'));
const key = initSigningKey(home);
afterAll(() => rmSync(home, { recursive: true, force: true }));

/** A signed run: the given events with a head after every `every` events, and a final head. */
function signedRun(runId: string, items: Array<[EventType, EventData<EventType>]>, every: number): Buffer[] {
  const lines: Buffer[] = [];
  const tree = new MerkleAccumulator();
  const push = (type: EventType, data: EventData<EventType>) => {
    const bytes = encodeEvent(buildEvent(type, runId, lines.length, '2026-01-01T00:00:00.000Z', data));
    lines.push(bytes);
    tree.push(leafHash(bytes));
  };
  const head = () => {
    const h = { runId, treeSize: tree.size, rootHash: tree.root().toString('hex') };
    push('TreeHeadSigned', { treeSize: h.treeSize, rootHash: h.rootHash, signature: signTreeHead(h, key), keyId: key.keyId });
  };
  items.forEach(([type, data], i) => {
    push(type, data);
    if ((i + 1) % every === 0) head();
  });
  head();
  return lines;
}

const RUN: Array<[EventType, EventData<EventType>]> = [
  ['RunScheduled', { task: 't', agent: 'a', baseModel: 'b', budgetSeconds: 60, seed: 0, mode: 'free' }],
  ['AgentStarted', { command: 'x' }],
  ['AgentExited', { reason: 'crashed', exitCode: 1 }],
  ['RunCompleted', { submissions: 0 }],
];

describe('event chain verification', () => {
  it('accepts a sealed, fully signed run', () => {
    const lines = signedRun('r1', RUN, 2);
    const { events, failures } = verifyEventChain('r1', lines.map((bytes) => ({ bytes })), key.publicKeyPem);
    expect(failures).toEqual([]);
    expect(sealFailures(events)).toEqual([]);
  });

  it('finds a chain cut right after an intermediate signed head unsealed (the tail would be hidden)', () => {
    const lines = signedRun('r2', RUN, 2);
    const cut = lines.slice(0, 3); // RunScheduled, AgentStarted, TreeHeadSigned(2)
    const { events, failures } = verifyEventChain('r2', cut.map((bytes) => ({ bytes })), key.publicKeyPem);
    expect(failures).toEqual([]); // every signature and root still checks out…
    expect(sealFailures(events)).toEqual([expect.objectContaining({ check: 'coverage', seq: 1, message: expect.stringMatching(/not sealed/) })]);
  });
});

describe('event chain verification across schema versions', () => {
  // AgentStarted written at schema version 1 as {cmd}; this a2rl pretends to be at version 2, {command}.
  function chainWithOldEvent(): Buffer[] {
    const lines: Buffer[] = [];
    const tree = new MerkleAccumulator();
    const push = (bytes: Buffer) => {
      lines.push(bytes);
      tree.push(leafHash(bytes));
    };
    push(encodeEvent(buildEvent('RunScheduled', 'old', 0, '2026-01-01T00:00:00.000Z', RUN[0]![1] as EventData<'RunScheduled'>)));
    push(canonicalBytes({ type: 'AgentStarted', runId: 'old', seq: 1, id: eventId('old', 1), occurredAt: '2026-01-01T00:00:01.000Z', schemaVersion: 1, data: { cmd: 'train.sh' } }));
    const h = { runId: 'old', treeSize: tree.size, rootHash: tree.root().toString('hex') };
    push(encodeEvent(buildEvent('TreeHeadSigned', 'old', 2, '2026-01-01T00:00:02.000Z', { treeSize: h.treeSize, rootHash: h.rootHash, signature: signTreeHead(h, key), keyId: key.keyId })));
    return lines;
  }

  async function atVersion2<T>(work: () => T): Promise<T> {
    const entry = EVENT_CATALOG.AgentStarted as { version: number };
    entry.version = 2;
    try {
      return work();
    } finally {
      entry.version = 1;
      clearUpcasters();
    }
  }

  it('verifies events stored at an older schema version against their signed bytes and returns them upcast', async () => {
    const lines = chainWithOldEvent();
    const result = await atVersion2(() => {
      registerUpcaster('AgentStarted', 1, ({ cmd, ...rest }) => ({ ...rest, command: cmd }));
      return verifyEventChain('old', lines.map((bytes) => ({ bytes })), key.publicKeyPem);
    });
    expect(result.failures).toEqual([]);
    expect(result.events[1]).toMatchObject({ type: 'AgentStarted', schemaVersion: 2, data: { command: 'train.sh' } });
  });

  it('reports an old event no upcaster can bring to the current version, and one from a newer a2rl', async () => {
    const lines = chainWithOldEvent();
    const missing = await atVersion2(() => verifyEventChain('old', lines.map((bytes) => ({ bytes })), key.publicKeyPem));
    expect(missing.failures).toEqual([{ check: 'event', seq: 1, message: 'not a valid event: no upcaster for AgentStarted from schema version 1 to 2' }]);
    const newer = verifyEventChain('old', lines.map((bytes, i) => ({ bytes: i === 1 ? Buffer.from(bytes.toString().replace('"schemaVersion":1', '"schemaVersion":3')) : bytes })), key.publicKeyPem);
    expect(newer.failures.map((f) => f.message)).toContain('not a valid event: AgentStarted: schema version 3 is newer than this a2rl knows (1)');
  });
});
