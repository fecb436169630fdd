// Proves the in-memory KurrentDB test server behaves like KurrentDB for the calls the adapter
// makes, by talking to it with the official client only (no adapter code involved).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  BACKWARDS,
  END,
  jsonEvent,
  KurrentDBClient,
  START,
  StreamNotFoundError,
  streamNameFilter,
  WrongExpectedVersionError,
  type ResolvedEvent,
} from '@kurrent/kurrentdb-client';
import { startKurrentDbTestServer } from './kurrentdb-test-server.js';

async function collect(events: AsyncIterable<ResolvedEvent>): Promise<ResolvedEvent[]> {
  const out: ResolvedEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

const event = (n: number, id = randomUUID()) => jsonEvent({ id, type: 'Tested', data: { n } });

describe('KurrentDB test server, through the official client', () => {
  let server: Awaited<ReturnType<typeof startKurrentDbTestServer>>;
  let client: KurrentDBClient;

  beforeAll(async () => {
    server = await startKurrentDbTestServer();
    client = KurrentDBClient.connectionString(server.url);
  });
  afterAll(async () => {
    await client?.dispose();
    await server?.stop();
  });

  it('answers a wrong expected revision with WrongExpectedVersionError carrying both revisions', async () => {
    const stream = `t-${randomUUID()}`;
    await client.appendToStream(stream, [event(0), event(1)], { streamState: 'no_stream' });
    const err = await client.appendToStream(stream, [event(2)], { streamState: 0n }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WrongExpectedVersionError);
    expect((err as WrongExpectedVersionError).actualState).toBe(1n);
    expect((err as WrongExpectedVersionError).expectedState).toBe(0n);
    const exists = await client.appendToStream(stream, [event(2)], { streamState: 'no_stream' }).catch((e: unknown) => e);
    expect(exists).toBeInstanceOf(WrongExpectedVersionError);
    const missing = await client.appendToStream(`t-${randomUUID()}`, [event(0)], { streamState: 3n }).catch((e: unknown) => e);
    expect((missing as WrongExpectedVersionError).actualState).toBe('no_stream');
  });

  it('reports StreamNotFound for an unknown stream, forwards and backwards', async () => {
    const stream = `t-${randomUUID()}`;
    await expect(collect(client.readStream(stream))).rejects.toBeInstanceOf(StreamNotFoundError);
    await expect(collect(client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 }))).rejects.toBeInstanceOf(
      StreamNotFoundError,
    );
  });

  it('acknowledges a re-sent append with the same ids and expected revision without writing it again', async () => {
    const stream = `t-${randomUUID()}`;
    const batch = [event(0), event(1)];
    const first = await client.appendToStream(stream, batch, { streamState: 'no_stream' });
    await client.appendToStream(stream, [event(2)], { streamState: 1n });
    const again = await client.appendToStream(stream, batch, { streamState: 'no_stream' });
    expect(again.success).toBe(true);
    expect(again.nextExpectedRevision).toBe(1n);
    expect(again.position).toEqual(first.position);
    const tail = await client.appendToStream(stream, [batch[1]], { streamState: 0n });
    expect(tail.nextExpectedRevision).toBe(1n);
    // Same revision, different id: a real conflict.
    await expect(client.appendToStream(stream, [event(1)], { streamState: 0n })).rejects.toBeInstanceOf(WrongExpectedVersionError);
    const stored = await collect(client.readStream(stream));
    expect(stored.map((e) => e.event?.revision)).toEqual([0n, 1n, 2n]);
    const last = await collect(client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 }));
    expect(last.map((e) => e.event?.revision)).toEqual([2n]);
  });

  it('reads $all in commit order, filtered by stream prefix, inclusive of a start position', async () => {
    const prefix = `p${randomUUID().slice(0, 8)}-`;
    await client.appendToStream(`${prefix}a`, [event(0)]);
    await client.appendToStream(`other-${randomUUID()}`, [event(0)]);
    await client.appendToStream(`${prefix}b`, [event(1), event(2)]);
    const all = await collect(client.readAll({ filter: streamNameFilter({ prefixes: [prefix] }) }));
    expect(all.map((e) => `${e.event?.streamId}@${e.event?.revision}`)).toEqual([`${prefix}a@0`, `${prefix}b@0`, `${prefix}b@1`]);
    const commits = all.map((e) => e.event!.position!.commit);
    expect([...commits].sort((x, y) => (x < y ? -1 : 1))).toEqual(commits);
    const from = await collect(client.readAll({ fromPosition: all[1].event!.position!, filter: streamNameFilter({ prefixes: [prefix] }) }));
    expect(from.map((e) => e.event?.revision)).toEqual([0n, 1n]);
  });

  it('subscribes to $all after an exclusive position, then delivers new events live', async () => {
    const prefix = `s${randomUUID().slice(0, 8)}-`;
    const first = await client.appendToStream(`${prefix}a`, [event(0)]);
    await client.appendToStream(`${prefix}a`, [event(1)]);
    const sub = client.subscribeToAll({ fromPosition: first.position!, filter: streamNameFilter({ prefixes: [prefix] }) });
    let caughtUp = false;
    sub.on('caughtUp', () => (caughtUp = true));
    const seen: bigint[] = [];
    try {
      for await (const e of sub as AsyncIterable<ResolvedEvent>) {
        seen.push(e.event!.revision);
        if (seen.length === 1) await client.appendToStream(`${prefix}a`, [event(2)]);
        if (seen.length === 2) break;
      }
    } finally {
      await sub.unsubscribe();
    }
    expect(seen).toEqual([1n, 2n]);
    expect(caughtUp).toBe(true);
    const everything = await collect(client.readAll({ fromPosition: START, filter: streamNameFilter({ prefixes: [prefix] }) }));
    expect(everything).toHaveLength(3);
  });
});
