import { generateKeyPairSync } from 'node:crypto';
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import type { A2rlEvent, EventData, EventType } from './events/catalog.js';
import { buildEvent, encodeEvent } from './events/envelope.js';
import { leafHash, treeRoot } from './merkle.js';
import { keyIdOf, type SigningKey } from './tree-head.js';
import { TreeHeadSigner, TreeHeadSignerError } from './tree-head-signer.js';
import { verifyEventChain } from '../audit/verify-chain.js';

const RUN = 'run-signer';

function testKey(): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { keyId: keyIdOf(publicKey), privateKey, publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
}

/**
 * A ledger like LedgerService: appends to the run are numbered in call order and complete one after
 * another, each after `delay` (microtasks only by default, so fake timers do not stall it).
 */
class FakeLedger {
  readonly events: A2rlEvent[] = [];
  private queue: Promise<unknown> = Promise.resolve();
  failHeads = false;

  constructor(private readonly delay: () => Promise<void> = () => Promise.resolve()) {}

  record<T extends EventType>(type: T, data: EventData<T>): Promise<A2rlEvent> {
    const next = this.queue.then(async () => {
      await this.delay();
      if (type === 'TreeHeadSigned' && this.failHeads) throw new Error('store down');
      const event = buildEvent(type, RUN, this.events.length, '2026-01-01T00:00:00.000Z', data);
      this.events.push(event);
      return event;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }
}

function setup(options: { everyEvents?: number; everyMs?: number; delay?: () => Promise<void> } = {}) {
  const key = testKey();
  const ledger = new FakeLedger(options.delay);
  const signer = new TreeHeadSigner({ runId: RUN, key, append: (data) => ledger.record('TreeHeadSigned', data), everyEvents: options.everyEvents, everyMs: options.everyMs });
  const record = (n = 1) => Promise.all(Array.from({ length: n }, (_, i) => signer.record(() => ledger.record('RunResumed', { note: `event ${i}` }))));
  const heads = () => ledger.events.filter((e) => e.type === 'TreeHeadSigned') as Extract<A2rlEvent, { type: 'TreeHeadSigned' }>[];
  const chain = () => verifyEventChain(RUN, ledger.events.map((e) => ({ bytes: encodeEvent(e) })), key.publicKeyPem);
  return { key, ledger, signer, record, heads, chain };
}

describe('TreeHeadSigner cadence', () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  it('signs a head after every N events, each at seq == treeSize over exactly the events before it', async () => {
    const { signer, record, heads, chain, ledger } = setup({ everyEvents: 4 });
    for (let i = 0; i < 10; i++) await record();
    await signer.seal();
    // 4 events, head (seq 4), 4 events, head (seq 9), 2 events, final head (seq 12)
    expect(heads().map((h) => [h.seq, h.data.treeSize])).toEqual([[4, 4], [9, 9], [12, 12]]);
    const leaves = ledger.events.map((e) => leafHash(encodeEvent(e)));
    for (const h of heads()) expect(h.data.rootHash).toBe(treeRoot(leaves, h.data.treeSize).toString('hex'));
    expect(chain().failures).toEqual([]);
  });

  it('holds concurrent appends back while it signs, so heads stay exact under load', async () => {
    let jitter = 0;
    const { signer, record, heads, chain, ledger } = setup({ everyEvents: 4, delay: () => new Promise((r) => setTimeout(r, jitter++ % 3)) });
    // Waves of 3 concurrent appends; a wave often starts while the head the previous one triggered
    // is still being signed, so its appends must wait for that head.
    for (let wave = 0; wave < 20; wave++) await record(3);
    await signer.seal();
    expect(ledger.events.filter((e) => e.type !== 'TreeHeadSigned')).toHaveLength(60);
    expect(heads().length).toBeGreaterThanOrEqual(10);
    for (const h of heads()) expect(h.data.treeSize).toBe(h.seq);
    expect(chain().failures).toEqual([]);
  });

  it('feeds the tree in seq order even when appends resolve out of order', async () => {
    const key = testKey();
    const appended: A2rlEvent[] = [];
    const signer = new TreeHeadSigner({
      runId: RUN,
      key,
      append: async (data) => {
        const e = buildEvent('TreeHeadSigned', RUN, appended.length, '2026-01-01T00:00:00.000Z', data);
        appended.push(e);
        return e;
      },
    });
    const events = [0, 1, 2].map((seq) => buildEvent('RunResumed', RUN, seq, '2026-01-01T00:00:00.000Z', {}));
    appended.push(...events);
    // seq 2 resolves first, then 0, then 1.
    await Promise.all([2, 0, 1].map((seq, i) => signer.record(() => new Promise<A2rlEvent>((r) => setTimeout(() => r(events[seq]), i * 5)))));
    await signer.seal();
    expect(appended[3].type).toBe('TreeHeadSigned');
    expect(verifyEventChain(RUN, appended.map((e) => ({ bytes: encodeEvent(e) })), key.publicKeyPem).failures).toEqual([]);
  });

  it('signs T seconds after the first uncovered event, and never while no new events arrive', async () => {
    jest.useFakeTimers();
    const { record, heads } = setup({ everyEvents: 1000, everyMs: 10_000 });
    await record(3);
    await jest.advanceTimersByTimeAsync(9_999);
    expect(heads()).toHaveLength(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(heads().map((h) => h.data.treeSize)).toEqual([3]);
    await jest.advanceTimersByTimeAsync(60_000); // idle: nothing new to cover
    expect(heads()).toHaveLength(1);
    await record(2);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(heads().map((h) => [h.seq, h.data.treeSize])).toEqual([[3, 3], [6, 6]]);
  });

  it('signs at a bounded rate by default: a head per 10,000 events (or 10 s), and at seal', async () => {
    jest.useFakeTimers(); // no time passes: only the event count triggers heads
    const { signer, record, heads, chain } = setup();
    for (let wave = 0; wave < 250; wave++) await record(100);
    await signer.seal();
    // 10,000 events, head (seq 10000), 10,000 events, head (seq 20001), 5,000 events, final head
    expect(heads().map((h) => [h.seq, h.data.treeSize])).toEqual([[10_000, 10_000], [20_001, 20_001], [25_002, 25_002]]);
    expect(chain().failures).toEqual([]);
  }, 120_000);

  it('seals with a final head over everything, and does not sign twice over the same events', async () => {
    const { signer, record, heads, chain } = setup();
    await record(5);
    expect(heads()).toHaveLength(0); // below N, before T
    await signer.seal();
    await signer.seal();
    expect(heads().map((h) => [h.seq, h.data.treeSize])).toEqual([[5, 5]]);
    expect(chain().failures).toEqual([]);
  });

  it('resumes from a stored stream (an interrupted run) and seals it', async () => {
    const first = setup({ everyEvents: 3 });
    for (let i = 0; i < 4; i++) await first.record(); // head at seq 3, then one uncovered event
    const stored = first.ledger.events.map((event) => ({ event, bytes: encodeEvent(event) }));
    const signer = TreeHeadSigner.resume({ runId: RUN, key: first.key, append: (data) => first.ledger.record('TreeHeadSigned', data) }, stored);
    expect(signer.treeSize).toBe(5);
    await signer.seal();
    expect(first.heads().map((h) => h.data.treeSize)).toEqual([3, 5]);
    expect(first.chain().failures).toEqual([]);
  });

  it('reports a failed head append when the run is sealed', async () => {
    const { signer, record, ledger } = setup();
    await record(2);
    ledger.failHeads = true;
    await expect(signer.seal()).rejects.toThrow('store down');
  });

  it('refuses to resume over a stream with a gap', () => {
    const e = buildEvent('RunResumed', RUN, 1, '2026-01-01T00:00:00.000Z', {});
    expect(() => TreeHeadSigner.resume({ runId: RUN, key: testKey(), append: async () => e }, [{ event: e, bytes: encodeEvent(e) }])).toThrow(TreeHeadSignerError);
  });
});
