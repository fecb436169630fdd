import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { EventStoreUnavailableError, WrongExpectedRevisionError } from '../../modules/ledger/errors.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import { agentEvent, collect, eventStoreContract, newRunId, take } from './event-store.contract.js';
import { holdSqliteRead } from '../testing/sqlite-read-holder.js';

eventStoreContract('sqlite', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-sqlite-contract-'));
  const file = path.join(dir, 'nested', 'ledger.db'); // parent directory created by open()
  return {
    url: `sqlite://${file}`,
    open: () => SqliteEventStore.open(file),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

describe('SqliteEventStore specifics', () => {
  let dir: string;
  let file: string;
  let store: SqliteEventStore;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-sqlite-'));
    file = path.join(dir, 'ledger.db');
    store = await SqliteEventStore.open(file);
  });
  afterAll(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps the database in WAL mode', () => {
    const db = new Database(file, { readonly: true });
    try {
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      db.close();
    }
  });

  it('reads the run category along the primary key and the campaign category along its partial index', () => {
    // A guard for the hot path: the run read must stay a walk of the rowid, and the campaign read must
    // not walk the run events in between.
    const statements = store as unknown as Record<'allPageStmt' | 'campaignPageStmt', Database.Statement>;
    const db = new Database(file, { readonly: true });
    try {
      const plan = (sql: string) => db.prepare<[number, number], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`).all(0, 500).map((r) => r.detail).join('; ');
      expect(plan(statements.allPageStmt.source)).toBe('SEARCH events USING INTEGER PRIMARY KEY (rowid>?)');
      expect(plan(statements.campaignPageStmt.source)).toBe('SEARCH events USING INDEX events_campaign (position>?)');
    } finally {
      db.close();
    }
  });

  it('group-commits concurrent appends into fewer transactions than appends', async () => {
    const before = store.stats();
    const runs = Array.from({ length: 50 }, newRunId);
    const results = await Promise.all(runs.map((run) => store.append(streamName(run), [agentEvent(run, 0), agentEvent(run, 1)], 'no_stream')));
    const after = store.stats();
    expect(results.every((r) => !r.deduplicated && r.nextExpectedRevision === 1n)).toBe(true);
    expect(after.appends - before.appends).toBe(50);
    expect(after.transactions - before.transactions).toBeLessThan(50);
    expect(after.transactions - before.transactions).toBeGreaterThanOrEqual(1);
    const positions = results.map((r) => BigInt(r.position));
    expect(new Set(positions).size).toBe(50);
  });

  it('fails only the conflicting append of a batch, its neighbours commit', async () => {
    const a = newRunId();
    const b = newRunId();
    const c = newRunId();
    await store.append(streamName(b), [agentEvent(b, 0)], 'no_stream');
    const before = store.stats();
    const [ra, rb, rc] = await Promise.allSettled([
      store.append(streamName(a), [agentEvent(a, 0)], 'no_stream'),
      store.append(streamName(b), [agentEvent(b, 0, 'different')], 'no_stream'),
      store.append(streamName(c), [agentEvent(c, 0)], 'no_stream'),
    ]);
    expect(store.stats().transactions - before.transactions).toBe(1);
    expect(ra.status).toBe('fulfilled');
    expect(rc.status).toBe('fulfilled');
    expect(rb.status === 'rejected' && rb.reason).toBeInstanceOf(WrongExpectedRevisionError);
    expect((await collect(store.readStream(streamName(a)))).length).toBe(1);
    expect((await collect(store.readStream(streamName(c)))).length).toBe(1);
    expect((await collect(store.readStream(streamName(b)))).map((e) => (e.event.data as { command: string }).command)).toEqual(['step 0']);
  });

  it('orders dependent appends to one stream queued in the same batch', async () => {
    const run = newRunId();
    const [first, second] = await Promise.all([
      store.append(streamName(run), [agentEvent(run, 0)], 'no_stream'),
      store.append(streamName(run), [agentEvent(run, 1), agentEvent(run, 2)], 0n),
    ]);
    expect(first.nextExpectedRevision).toBe(0n);
    expect(second.nextExpectedRevision).toBe(2n);
    expect(BigInt(second.position)).toBeGreaterThan(BigInt(first.position));
  });

  it('reads runs longer than one page in order', async () => {
    const run = newRunId();
    const events = Array.from({ length: 1234 }, (_, i) => agentEvent(run, i));
    await store.append(streamName(run), events, 'no_stream');
    const read = await collect(store.readStream(streamName(run)));
    expect(read.map((e) => e.event.seq)).toEqual(events.map((e) => e.seq));
    const limited = await collect(store.readStream(streamName(run), { fromRevision: 499n, maxCount: 600 }));
    expect(limited.map((e) => e.event.seq)).toEqual(events.slice(499, 1099).map((e) => e.seq));
    const all = (await collect(store.readAll())).filter((e) => e.event.runId === run);
    expect(all.length).toBe(1234);
  });

  it('delivers events committed by another connection to a live subscription', async () => {
    const run = newRunId();
    const sub = store.subscribeAll({ after: await lastPosition(store) });
    const other = await SqliteEventStore.open(file);
    try {
      await other.append(streamName(run), [agentEvent(run, 0), agentEvent(run, 1)], 'no_stream');
      const got = await take(sub, 2, 5000);
      expect(got.map((e) => `${e.event.runId}/${e.event.seq}`)).toEqual([`${run}/0`, `${run}/1`]);
    } finally {
      await sub.close();
      await other.close();
    }
  });

  it('rejects positions it did not issue', () => {
    expect(() => store.subscribeAll({ after: 'abc' })).toThrow(RangeError);
  });

  it('reports a closed store as unavailable', async () => {
    const other = await SqliteEventStore.open(file);
    await other.close();
    const run = newRunId();
    await expect(other.append(streamName(run), [agentEvent(run, 0)], 'no_stream')).rejects.toBeInstanceOf(EventStoreUnavailableError);
    await expect(other.streamRevision(streamName(run))).rejects.toBeInstanceOf(EventStoreUnavailableError);
  });

  it('writes the appends accepted before close() and refuses those after it', async () => {
    const other = await SqliteEventStore.open(file);
    const run = newRunId();
    const accepted = other.append(streamName(run), [agentEvent(run, 0)], 'no_stream'); // queued, not yet written
    const closing = other.close();
    await expect(other.append(streamName(run), [agentEvent(run, 1)], 0n)).rejects.toBeInstanceOf(EventStoreUnavailableError);
    await closing;
    await expect(accepted).resolves.toMatchObject({ nextExpectedRevision: 0n, deduplicated: false });
    expect((await collect(store.readStream(streamName(run)))).map((e) => e.event.seq)).toEqual([0]);
  });

  // A scheduler and a worker opening one fresh ledger at once race on its switch to WAL, which needs an
  // exclusive lock; the loser is told "database is locked" and opens again rather than failing the start.
  it('opens a fresh file another process holds a read on for longer than the busy timeout, once the read ends', async () => {
    const fresh = path.join(dir, 'held.db');
    const holder = await holdSqliteRead(fresh, 6500);
    const opened = await SqliteEventStore.open(fresh);
    try {
      const run = newRunId();
      await opened.append(streamName(run), [agentEvent(run, 0)], 'no_stream');
      expect((await collect(opened.readStream(streamName(run)))).map((e) => e.event.seq)).toEqual([0]);
    } finally {
      await opened.close();
      await holder.ended;
    }
  }, 60_000);

  it('refuses an append another process got in first, and dedupes a retry of the one that got in', async () => {
    const run = newRunId();
    await store.append(streamName(run), [agentEvent(run, 0), agentEvent(run, 1)], 'no_stream');
    const other = await SqliteEventStore.open(file);
    try {
      await other.append(streamName(run), [agentEvent(run, 2, 'from the other process')], 1n);
    } finally {
      await other.close();
    }
    const conflict = store.append(streamName(run), [agentEvent(run, 2)], 1n);
    await expect(conflict).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    await expect(conflict).rejects.toMatchObject({ actual: 2n });
    const retry = await store.append(streamName(run), [agentEvent(run, 2, 'from the other process')], 1n);
    expect(retry.deduplicated).toBe(true);
    await expect(store.append(streamName(run), [agentEvent(run, 0, 'another start')], 'no_stream')).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    expect((await store.append(streamName(run), [agentEvent(run, 3)], 2n)).nextExpectedRevision).toBe(3n);
    expect((await collect(store.readStream(streamName(run)))).map((e) => [e.event.seq, (e.event.data as { command: string }).command])).toEqual([
      [0, 'step 0'],
      [1, 'step 1'],
      [2, 'from the other process'],
      [3, 'step 3'],
    ]);
  });

  it('fails the whole batch as unavailable when the database cannot be written', async () => {
    const ro = path.join(dir, 'locked.db');
    const writer = await SqliteEventStore.open(ro);
    const blocker = new Database(ro);
    blocker.pragma('busy_timeout = 0');
    blocker.exec('BEGIN IMMEDIATE'); // holds the write lock past the store's busy timeout
    try {
      const runs = [newRunId(), newRunId()];
      const results = await Promise.allSettled(runs.map((run) => writer.append(streamName(run), [agentEvent(run, 0)], 'no_stream')));
      for (const r of results) {
        expect(r.status).toBe('rejected');
        expect(r.status === 'rejected' && r.reason).toBeInstanceOf(EventStoreUnavailableError);
        expect(r.status === 'rejected' && String(r.reason.message)).toMatch(/SQLITE_BUSY/);
      }
      expect(writer.stats().appends).toBe(0);
    } finally {
      blocker.exec('ROLLBACK');
      blocker.close();
      await writer.close();
    }
    const check = await SqliteEventStore.open(ro);
    try {
      expect(await collect(check.readAll())).toEqual([]);
    } finally {
      await check.close();
    }
  }, 20_000);
});

async function lastPosition(store: SqliteEventStore): Promise<string | null> {
  let last: string | null = null;
  for await (const e of store.readAll()) last = e.position;
  return last;
}
