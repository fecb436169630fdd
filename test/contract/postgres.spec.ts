import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { PostgresEventStore } from '../../infra/eventstore/postgres-event-store.js';
import { EventStoreUnavailableError, WrongExpectedRevisionError } from '../../modules/ledger/errors.js';
import { buildEvent, encodeEvent } from '../../modules/ledger/events/envelope.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import type { RecordedEvent, Subscription } from '../../modules/ledger/event-store.port.js';
import { agentEvent, collect, eventStoreContract, newRunId, take } from './event-store.contract.js';
import { until } from '../testing/helpers.js';

// Needs the PostgreSQL at 127.0.0.1:5432 (trust auth, database `test`). Every schema used here is
// fresh and dropped afterwards, so runs never see each other's events.
const SERVER = 'postgres://postgres@127.0.0.1:5432/test';

function freshSchema(): string {
  return `a2rl_test_${randomBytes(6).toString('hex')}`;
}

async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: SERVER });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

eventStoreContract('postgres', async () => {
  const schema = freshSchema();
  const url = `${SERVER}?schema=${schema}`;
  return { url, open: () => PostgresEventStore.open(url), cleanup: () => dropSchema(schema) };
});

/** Collects a subscription's events in the background until closed. */
function record(sub: Subscription): { events: RecordedEvent[]; done: Promise<unknown> } {
  const events: RecordedEvent[] = [];
  const done = (async () => {
    for await (const e of sub) events.push(e);
  })().catch((error: unknown) => error);
  return { events, done };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const labels = (events: RecordedEvent[]) => events.map((e) => `${e.event.runId}/${e.event.seq}`);

describe('PostgresEventStore identity', () => {
  it('is the same however the server is addressed, and differs per schema', async () => {
    const schema = freshSchema();
    const byIp = await PostgresEventStore.open(`${SERVER}?schema=${schema}`);
    const byName = await PostgresEventStore.open(`postgres://postgres@localhost:5432/test?schema=${schema}&pool=2`);
    const otherSchema = freshSchema();
    const other = await PostgresEventStore.open(`${SERVER}?schema=${otherSchema}`);
    try {
      expect(await byName.identity()).toBe(await byIp.identity());
      expect(await byIp.identity()).toMatch(new RegExp(`^postgres:\\d+:\\d+:${schema}$`));
      expect(await other.identity()).not.toBe(await byIp.identity());
    } finally {
      await Promise.all([byIp.close(), byName.close(), other.close()]);
      await Promise.all([dropSchema(schema), dropSchema(otherSchema)]);
    }
  });
});

describe('PostgresEventStore', () => {
  const schema = freshSchema();
  let store: PostgresEventStore;
  let writer: pg.Client;

  beforeAll(async () => {
    store = await PostgresEventStore.open(SERVER, { schema });
    writer = new pg.Client({ connectionString: SERVER });
    await writer.connect();
  });
  afterAll(async () => {
    await writer?.query('ROLLBACK').catch(() => {});
    await writer?.end();
    await store?.close();
    await dropSchema(schema);
  });

  /**
   * Writes seq 0 of a new stream with the table layout the adapter uses, inside the caller's open
   * transaction on `writer`: this is how a test holds an append uncommitted at a chosen moment.
   */
  async function insertUncommitted(event: A2rlEvent): Promise<void> {
    const stream = streamName(event.runId);
    await writer.query(`INSERT INTO "${schema}".streams (stream, revision) VALUES ($1, 0)`, [stream]);
    await writer.query(`INSERT INTO "${schema}".events (stream, revision, id, type, data) VALUES ($1, 0, $2, $3, $4)`, [
      stream,
      event.id,
      event.type,
      encodeEvent(event),
    ]);
  }

  async function endPosition(): Promise<string | null> {
    const all = await collect(store.readAll());
    return all.length ? all[all.length - 1].position : null;
  }

  it('holds back a later transaction until an earlier one commits, so a checkpoint never skips it', async () => {
    const a = newRunId();
    const b = newRunId();
    const start = await endPosition();
    const sub = store.subscribeAll({ after: start });
    const seen = record(sub);
    try {
      // A takes the older transaction id and the lower global_position, then stays open; B commits.
      await writer.query('BEGIN');
      await insertUncommitted(agentEvent(a, 0));
      await store.append(streamName(b), [agentEvent(b, 0)], 'no_stream');

      // Sequence order would hand out B now, and a checkpoint at B would lose A for good.
      await sleep(700); // more than two poll intervals, and B's NOTIFY has arrived
      expect(seen.events).toEqual([]);
      expect(await collect(store.readAll({ after: start }))).toEqual([]);

      // A commits without a NOTIFY of its own: polling must find it.
      await writer.query('COMMIT');
      await until('two events seen', () => seen.events.length >= 2);
      await sleep(300);
      expect(labels(seen.events)).toEqual([`${a}/0`, `${b}/0`]);
      const all = await collect(store.readAll({ after: start }));
      expect(labels(all)).toEqual([`${a}/0`, `${b}/0`]);
      expect(labels(await collect(store.readAll({ after: all[0].position })))).toEqual([`${b}/0`]);
    } finally {
      await sub.close();
    }
    expect(await seen.done).toBeUndefined();
  });

  it('orders by transaction, not by global_position, when the earlier transaction inserts last', async () => {
    const a = newRunId();
    const b = newRunId();
    const start = await endPosition();
    const sub = store.subscribeAll({ after: start });
    const seen = record(sub);
    try {
      await writer.query('BEGIN');
      await writer.query('SELECT pg_current_xact_id()'); // A's transaction id is now older than B's
      await store.append(streamName(b), [agentEvent(b, 0)], 'no_stream');
      await insertUncommitted(agentEvent(a, 0)); // ...but A's row gets the higher global_position
      await sleep(500);
      expect(seen.events).toEqual([]);
      await writer.query('COMMIT');

      await until('two events seen', () => seen.events.length >= 2);
      await sleep(300);
      expect(labels(seen.events)).toEqual([`${a}/0`, `${b}/0`]);
      const resumed = store.subscribeAll({ after: seen.events[0].position });
      try {
        expect(labels(await take(resumed, 1))).toEqual([`${b}/0`]);
      } finally {
        await resumed.close();
      }
    } finally {
      await sub.close();
    }
  });

  it('pages long streams and the all-stream in numeric order', async () => {
    const run = newRunId();
    const start = await endPosition();
    for (let from = 0; from < 1200; from += 400) {
      const batch = Array.from({ length: 400 }, (_, i) => agentEvent(run, from + i));
      await store.append(streamName(run), batch, from === 0 ? 'no_stream' : BigInt(from - 1));
    }
    const seqs = Array.from({ length: 1200 }, (_, i) => i);
    expect((await collect(store.readStream(streamName(run)))).map((e) => e.event.seq)).toEqual(seqs);
    expect((await collect(store.readAll({ after: start }))).map((e) => e.event.seq)).toEqual(seqs);
    expect((await collect(store.readStream(streamName(run), { fromRevision: 998n, maxCount: 3 }))).map((e) => e.event.seq)).toEqual([998, 999, 1000]);
    const sub = store.subscribeAll({ after: start });
    try {
      expect((await take(sub, 1200)).map((e) => e.event.seq)).toEqual(seqs);
    } finally {
      await sub.close();
    }
  });

  it('stores the canonical bytes exactly', async () => {
    const run = newRunId();
    const event = buildEvent('AgentStarted', run, 0, '2026-01-01T00:00:00.000Z', { command: 'é ✓ "quoted" \u2028 😀 1e21' });
    await store.append(streamName(run), [event], 'no_stream');
    const { rows } = await writer.query<{ data: Buffer }>(`SELECT data FROM "${schema}".events WHERE id = $1`, [event.id]);
    expect(rows[0].data.equals(encodeEvent(event))).toBe(true);
    expect((await collect(store.readStream(streamName(run))))[0].event).toEqual(event);
  });

  it('lets exactly one of many racing writers create a stream; identical retries dedupe', async () => {
    const run = newRunId();
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => store.append(streamName(run), [agentEvent(run, 0, `writer ${i}`)], 'no_stream')),
    );
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(WrongExpectedRevisionError);

    const same = [agentEvent(run, 1), agentEvent(run, 2)];
    const retries = await Promise.all(Array.from({ length: 8 }, () => store.append(streamName(run), same, 0n)));
    expect(retries.filter((r) => !r.deduplicated)).toHaveLength(1);
    expect(new Set(retries.map((r) => r.position)).size).toBe(1);
    expect((await collect(store.readStream(streamName(run)))).map((e) => e.event.seq)).toEqual([0, 1, 2]);

    const different = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => store.append(streamName(run), [agentEvent(run, 3, `writer ${i}`)], 2n)));
    expect(different.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of different) if (r.status === 'rejected') expect(r.reason).toMatchObject({ name: 'WrongExpectedRevisionError', message: expect.stringContaining('3') });
    expect((await collect(store.readStream(streamName(run)))).map((e) => e.event.seq)).toEqual([0, 1, 2, 3]);
  });

  it('creates its schema idempotently when several processes open it at once', async () => {
    const other = freshSchema();
    try {
      const stores = await Promise.all([0, 1, 2, 3].map(() => PostgresEventStore.open(`${SERVER}?schema=${other}`)));
      const run = newRunId();
      await stores[0].append(streamName(run), [agentEvent(run, 0)], 'no_stream');
      expect(await stores[3].streamRevision(streamName(run))).toBe(0n);
      expect(await store.streamRevision(streamName(run))).toBeNull(); // a different schema
      await Promise.all(stores.map((s) => s.close()));
    } finally {
      await dropSchema(other);
    }
  });

  it("opens an existing schema without waiting behind another process's open append", async () => {
    // CREATE INDEX IF NOT EXISTS would wait for the SHARE lock this open transaction's insert blocks.
    await writer.query('BEGIN');
    await writer.query(`INSERT INTO "${schema}".events (stream, revision, id, type, data) VALUES ('run-held', 0, gen_random_uuid(), 'AgentStarted', '\\x7b7d')`);
    try {
      const started = Date.now();
      const opened = await Promise.race([
        PostgresEventStore.open(SERVER, { schema }).then(async (s) => (await s.close(), 'opened')),
        new Promise((resolve) => setTimeout(() => resolve('still waiting after 20 s'), 20_000).unref()),
      ]);
      expect({ opened, quick: Date.now() - started < 20_000 }).toEqual({ opened: 'opened', quick: true });
    } finally {
      await writer.query('ROLLBACK');
    }
  });

  it('rejects a position it did not issue', () => {
    expect(() => store.subscribeAll({ after: '42' })).toThrow(RangeError);
  });
});

describe('PostgresEventStore when the server is unreachable', () => {
  it('fails to open with EventStoreUnavailableError naming host and port', async () => {
    const port = await closedPort();
    const error = await PostgresEventStore.open(`postgres://postgres@127.0.0.1:${port}/test`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EventStoreUnavailableError);
    expect((error as Error).message).toContain(`127.0.0.1:${port}`);
  });

  it('fails appends, reads and subscriptions with EventStoreUnavailableError when the server goes away', async () => {
    const schema = freshSchema();
    const proxy = await tcpProxy(5432);
    const store = await PostgresEventStore.open(`postgres://postgres@127.0.0.1:${proxy.port}/test?schema=${schema}`);
    try {
      const run = newRunId();
      await store.append(streamName(run), [agentEvent(run, 0)], 'no_stream');
      const sub = store.subscribeAll();
      expect(labels(await take(sub, 1))).toEqual([`${run}/0`]);
      const ended = record(sub).done;

      await proxy.shutDown();
      const append = await store.append(streamName(run), [agentEvent(run, 1)], 0n).catch((e: unknown) => e);
      expect(append).toBeInstanceOf(EventStoreUnavailableError);
      expect((append as Error).message).toContain(`127.0.0.1:${proxy.port}`);
      await expect(collect(store.readAll())).rejects.toBeInstanceOf(EventStoreUnavailableError);
      await expect(store.streamRevision(streamName(run))).rejects.toBeInstanceOf(EventStoreUnavailableError);
      expect(await ended).toBeInstanceOf(EventStoreUnavailableError);
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });
});

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A TCP forwarder to the local PostgreSQL that can be cut, to simulate the server going away. */
async function tcpProxy(target: number): Promise<{ port: number; shutDown(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    async shutDown() {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
