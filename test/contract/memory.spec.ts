import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import { openEventStore } from '../../infra/eventstore/open-event-store.js';
import { EventStoreUnavailableError, WrongExpectedRevisionError } from '../../modules/ledger/errors.js';
import { buildEvent, encodeEvent } from '../../modules/ledger/events/envelope.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import { agentEvent, collect, eventStoreContract, newRunId, take } from './event-store.contract.js';

// Opened through the URL factory, so `memory://<name>` sharing one ledger per name is what the
// contract's second open() relies on. The storage lives in this process: no child can reach it.
eventStoreContract(
  'memory',
  async () => {
    const url = `memory://contract-${randomUUID()}`;
    return { url, open: () => openEventStore(url), cleanup: async () => {} };
  },
  { sharedAcrossProcesses: false },
);

describe('MemoryEventStore specifics', () => {
  it('shares one ledger between opens of the same name, and none between names or unnamed opens', async () => {
    const name = `memory://shared-${randomUUID()}`;
    const [a, b, other, unnamed] = await Promise.all([openEventStore(name), openEventStore(name), openEventStore(`${name}-x`), openEventStore('memory://')]);
    const run = newRunId();
    await a.append(streamName(run), [agentEvent(run, 0)], 'no_stream');
    expect(a.backend).toBe('memory');
    expect(await b.streamRevision(streamName(run))).toBe(0n);
    expect(await other.streamRevision(streamName(run))).toBeNull();
    expect(await unnamed.streamRevision(streamName(run))).toBeNull();
    await expect(b.append(streamName(run), [agentEvent(run, 0, 'other writer')], 'no_stream')).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    await Promise.all([a, b, other, unnamed].map((s) => s.close()));
  });

  it('delivers live appends made through another store on the same ledger', async () => {
    const writer = new MemoryEventStore();
    const reader = new MemoryEventStore(writer.ledger);
    const run = newRunId();
    const sub = reader.subscribeAll();
    try {
      const got = take(sub, 2);
      await writer.append(streamName(run), [agentEvent(run, 0)], 'no_stream');
      await writer.append(streamName(run), [agentEvent(run, 1)], 0n);
      expect((await got).map((e) => e.event.seq)).toEqual([0, 1]);
    } finally {
      await sub.close();
      await writer.close();
      await reader.close();
    }
  });

  it('keeps the canonical bytes exactly and hands out copies that cannot alter the ledger', async () => {
    const store = new MemoryEventStore();
    const run = newRunId();
    const event = buildEvent('AgentStarted', run, 0, '2026-01-01T00:00:00.000Z', { command: 'é ✓ "quoted" \u2028 😀 1e21' });
    await store.append(streamName(run), [event], 'no_stream');
    const [first] = await collect(store.readStream(streamName(run)));
    expect(first.bytes.equals(encodeEvent(event))).toBe(true);
    expect(first.event).toEqual(event);
    first.bytes.fill(0);
    (first.event.data as { command: string }).command = 'tampered';
    const [again] = await collect(store.readAll());
    expect(again.bytes.equals(encodeEvent(event))).toBe(true);
    expect(again.event).toEqual(event);
    await store.close();
  });

  it('lets exactly one of many racing writers create a stream; identical retries dedupe to the same position', async () => {
    const store = new MemoryEventStore();
    const run = newRunId();
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => store.append(streamName(run), [agentEvent(run, 0, `writer ${i}`)], 'no_stream')),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(WrongExpectedRevisionError);
    const same = [agentEvent(run, 1), agentEvent(run, 2)];
    const retries = await Promise.all(Array.from({ length: 8 }, () => store.append(streamName(run), same, 0n)));
    expect(retries.filter((r) => !r.deduplicated)).toHaveLength(1);
    expect(new Set(retries.map((r) => r.position)).size).toBe(1);
    expect(store.ledger.size).toBe(3);
    await store.close();
  });

  it('pages by maxCount over streams and the all-stream', async () => {
    const store = new MemoryEventStore();
    const run = newRunId();
    await store.append(streamName(run), Array.from({ length: 10 }, (_, i) => agentEvent(run, i)), 'no_stream');
    expect((await collect(store.readStream(streamName(run), { fromRevision: 8n, maxCount: 5 }))).map((e) => e.event.seq)).toEqual([8, 9]);
    const page = await collect(store.readAll({ maxCount: 3 }));
    expect(page.map((e) => e.event.seq)).toEqual([0, 1, 2]);
    expect((await collect(store.readAll({ after: page[2].position, maxCount: 2 }))).map((e) => e.event.seq)).toEqual([3, 4]);
    await store.close();
  });

  it('rejects a position it did not issue', async () => {
    const store = new MemoryEventStore();
    expect(() => store.subscribeAll({ after: '42' })).toThrow(RangeError);
    await expect(collect(store.readAll({ after: 'abc' }))).rejects.toBeInstanceOf(RangeError);
    await store.close();
  });

  it('fails every call with EventStoreUnavailableError once closed, and ends its subscriptions', async () => {
    const store = new MemoryEventStore();
    const run = newRunId();
    const sub = store.subscribeAll();
    const ended = (async () => {
      for await (const _ of sub) void _;
      return 'ended';
    })();
    await store.close();
    expect(await ended).toBe('ended');
    await expect(store.append(streamName(run), [agentEvent(run, 0)], 'no_stream')).rejects.toBeInstanceOf(EventStoreUnavailableError);
    await expect(store.streamRevision(streamName(run))).rejects.toBeInstanceOf(EventStoreUnavailableError);
    await expect(collect(store.readAll())).rejects.toBeInstanceOf(EventStoreUnavailableError);
    expect(() => store.subscribeAll()).toThrow(EventStoreUnavailableError);
  });
});
