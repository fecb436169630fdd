import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { EventData, EventType } from '../ledger/events/catalog.js';
import { buildEvent, encodeEvent } from '../ledger/events/envelope.js';
import { leafHash, MerkleAccumulator } from './merkle.js';
import { initSigningKey, signTreeHead } from './tree-head.js';
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
