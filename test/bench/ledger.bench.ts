import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { PostgresEventStore } from '../../infra/eventstore/postgres-event-store.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { openReadModels } from '../../infra/readmodels/data-source.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { buildEvent, encodeEvent } from '../../modules/ledger/events/envelope.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import type { EventStore } from '../../modules/ledger/event-store.port.js';
import { ProjectionRunner } from '../../modules/readmodels/projection-runner.js';
import { PROJECTIONS } from '../../projections/index.js';

// `npm run bench -- ledger`: durable append throughput and latency at 1, 4 and 16 concurrent run
// streams, a raw-driver reference writing the same rows in the same durability mode, and the
// projection rebuild rate. Figures are compared as ratios within one run on the same machine.
// Goals on the 2-core reference machine: SQLite at 16 streams ≥ 0.8× raw better-sqlite3, PostgreSQL
// ≥ 0.6× raw pg; a rebuild of all projections ≥ 100,000 events/s on SQLite and ≥ 50,000 on
// PostgreSQL. The load average it ran under is printed (start and end) and is in the JSON line:
// fsync and CPU figures move with it, the ratios much less. The rebuild also prints the CPU this
// process spent on it (`*_rebuild_events_per_cpu_s`), which the load moves much less than the clock
// rate: the goals are clock rates, this says whether a change made the work itself cheaper.
// Ends with one JSON line.

const APPENDS_PER_CONFIG = 2400; // split across the concurrent streams
/** PostgreSQL at 16 streams: adapter and raw runs alternate this many times, so that load drifting
 *  on the machine during the bench weighs on both sides of the ratio alike. */
const PG_ROUNDS_AT_16 = 3;
/** SQLite at 16 streams: adapter and raw rounds alternate likewise (fsync times drift with the disk's other users). */
const SQLITE_ROUNDS_AT_16 = 3;
const REBUILD_RUNS = 1000;
const REBUILD_EVENTS_PER_RUN = 100;
/** Rebuilds of all projections timed; the figure is their median. */
const REBUILD_ROUNDS = 3;
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const PG_URL = process.env.A2RL_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

interface AppendFigures {
  streams: number;
  events: number;
  seconds: number;
  eventsPerS: number;
  p50Ms: number;
  p99Ms: number;
  latencies: number[];
  rows: Array<{ stream: string; revision: number; id: string; type: string; data: Buffer }>;
}

/** One event per append, as the harness records them: built and validated inside the timed loop. */
function harnessEvent(runId: string, seq: number): A2rlEvent {
  return buildEvent('FileChanged', runId, seq, new Date(T0 + seq * 1000), {
    path: `code/train_${seq % 7}.py`,
    op: seq === 0 ? 'create' : 'modify',
    sha256: (seq % 16).toString(16).repeat(64),
    size: 1000 + seq,
    observedAt: new Date(T0 + seq * 1000).toISOString(),
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * Each stream appends its events one per append, awaiting each acknowledgement (as the harness
 * records them). Events are built and validated before the clock starts, so the figure is the
 * store's durable append rate for the same rows the raw reference inserts; `harness_events_per_s`
 * in the human output adds building and validating each event inside the loop.
 */
async function appendWorkload(store: EventStore, streams: number, buildInLoop = false): Promise<AppendFigures> {
  const perStream = Math.floor(APPENDS_PER_CONFIG / streams);
  const runs = Array.from({ length: streams }, () => `bench-${randomUUID()}`);
  const prebuilt = buildInLoop ? [] : runs.map((runId) => Array.from({ length: perStream }, (_, seq) => harnessEvent(runId, seq)));
  const latencies: number[] = [];
  const started = process.hrtime.bigint();
  await Promise.all(
    runs.map(async (runId, s) => {
      for (let seq = 0; seq < perStream; seq++) {
        const t = process.hrtime.bigint();
        const event = buildInLoop ? harnessEvent(runId, seq) : prebuilt[s][seq];
        await store.append(streamName(runId), [event], seq === 0 ? 'no_stream' : BigInt(seq - 1));
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  latencies.sort((a, b) => a - b);
  const rows = runs.flatMap((runId) =>
    Array.from({ length: perStream }, (_, seq) => {
      const e = harnessEvent(runId, seq);
      return { stream: streamName(runId), revision: seq, id: e.id, type: e.type, data: encodeEvent(e) };
    }),
  );
  return { streams, events: rows.length, seconds, eventsPerS: rows.length / seconds, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), latencies, rows };
}

/** Several rounds' figures as one: events over total time; percentiles over every append. */
function combined(rounds: AppendFigures[]): AppendFigures {
  const events = rounds.reduce((n, r) => n + r.events, 0);
  const seconds = rounds.reduce((n, r) => n + r.seconds, 0);
  const latencies = rounds.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const rows = rounds.flatMap((r) => r.rows);
  return { streams: rounds[0].streams, events, seconds, eventsPerS: events / seconds, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), latencies, rows };
}

/**
 * The rows as the adapter committed them (position order): concurrent streams interleave, so each
 * commit dirties one index page per stream, which is the WAL the fsync has to write. A reference
 * writing each stream's rows one after the other dirties about half as many pages per commit
 * (measured: 18 vs 29 WAL frames per 16-row commit) and is not the same work.
 */
function committedRows(file: string): AppendFigures['rows'] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT stream, revision, id, type, data FROM events ORDER BY position').all() as AppendFigures['rows'];
  } finally {
    db.close();
  }
}

/** Raw better-sqlite3: the same rows in the same order, same table and pragmas, committed in groups of the size the adapter achieved. */
function rawSqlite(dir: string, rows: AppendFigures['rows'], groupSize: number): number {
  const db = new Database(path.join(dir, `raw-${randomUUID()}.db`));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`CREATE TABLE events (position INTEGER PRIMARY KEY, stream TEXT NOT NULL, revision INTEGER NOT NULL,
    id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, data BLOB NOT NULL, UNIQUE (stream, revision))`);
  const insert = db.prepare('INSERT INTO events (stream, revision, id, type, data) VALUES (?, ?, ?, ?, ?)');
  const group = db.transaction((batch: AppendFigures['rows']) => {
    for (const r of batch) insert.run(r.stream, r.revision, r.id, r.type, r.data);
  });
  const started = process.hrtime.bigint();
  for (let i = 0; i < rows.length; i += groupSize) group.immediate(rows.slice(i, i + groupSize));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  db.close();
  return rows.length / seconds;
}

/**
 * Raw pg: the same rows from the same number of concurrent clients, each row one INSERT committed on
 * its own (one round trip, like the adapter's append), into `events` of a schema the adapter created
 * (so the same columns and indexes), at the server's synchronous_commit, which the adapter uses too.
 * What the adapter adds is its work per append: the expected-revision check on the stream's head row
 * and the wake-up of subscribers.
 */
async function rawPostgres(pool: pg.Pool, schema: string, rows: AppendFigures['rows'], streams: number): Promise<{ seconds: number; eventsPerS: number }> {
  const byStream = new Map<string, AppendFigures['rows']>();
  for (const r of rows) byStream.set(r.stream, [...(byStream.get(r.stream) ?? []), r]);
  if (byStream.size !== streams) throw new Error(`expected ${streams} streams, got ${byStream.size}`);
  const insert = `INSERT INTO "${schema}".events (stream, revision, id, type, data) VALUES ($1, $2, $3, $4, $5)`;
  const started = process.hrtime.bigint();
  await Promise.all(
    [...byStream.values()].map(async (mine) => {
      const client = await pool.connect();
      try {
        for (const r of mine) await client.query(insert, [r.stream, r.revision, r.id, r.type, r.data]);
      } finally {
        client.release();
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { seconds, eventsPerS: rows.length / seconds };
}

/** The rebuild of all projections: its rate on the clock, and the CPU this process spent on it
 *  (all its threads; a PostgreSQL server's own work is not in it). On a busy machine the clock
 *  rate falls with the share of the cores the process gets; the CPU figure much less. */
interface RebuildFigures {
  events: number;
  eventsPerS: number;
  cpuSeconds: number;
}

/** Fills a store with REBUILD_RUNS runs and times a rebuild of every projection from zero. */
async function rebuildRate(store: EventStore, readModelUrl: string): Promise<RebuildFigures> {
  for (let r = 0; r < REBUILD_RUNS; r += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, REBUILD_RUNS - r) }, (_, i) => {
        const runId = `rebuild-${String(r + i).padStart(5, '0')}`;
        const events = [buildEvent('RunScheduled', runId, 0, new Date(T0), { task: 'ref-arith', agent: 'reference', baseModel: 'tiny', budgetSeconds: 600, seed: r + i, mode: 'free' })];
        for (let seq = 1; seq < REBUILD_EVENTS_PER_RUN; seq++) events.push(harnessEvent(runId, seq));
        return store.append(streamName(runId), events, 'no_stream');
      }),
    );
  }
  const dataSource = await openReadModels(readModelUrl);
  try {
    // The bench's runs reference no blobs: an empty reader keeps the run-analysis projection pure.
    const runner = new ProjectionRunner(store, dataSource, PROJECTIONS, { blobs: { read: async () => null } });
    // The floor under every rebuild: reading and decoding the ledger, with no projection.
    const readStarted = process.hrtime.bigint();
    let read = 0;
    for await (const _ of store.readAll()) read += 1;
    const readSeconds = Number(process.hrtime.bigint() - readStarted) / 1e9;
    console.log(`         read of the ledger alone (readAll, no projection): ${fmt(read)} events in ${readSeconds.toFixed(2)} s = ${fmt(read / readSeconds)} events/s`);
    // Each projection alone, for the breakdown; the headline is `rebuild()` of all of them, which
    // reads the ledger once for every projection.
    for (const projection of PROJECTIONS) {
      const started = process.hrtime.bigint();
      const [result] = await runner.rebuild(projection.name);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      console.log(`         rebuild of ${projection.name} alone: ${fmt(result.processed)} events in ${seconds.toFixed(2)} s = ${fmt(result.processed / seconds)} events/s`);
    }
    // The headline: the median of REBUILD_ROUNDS rebuilds of all of them (one rebuild moved by ±10%
    // between runs on the same quiet machine).
    const rounds: RebuildFigures[] = [];
    for (let round = 0; round < REBUILD_ROUNDS; round++) {
      const started = process.hrtime.bigint();
      const cpuStarted = process.cpuUsage();
      const [all] = await runner.rebuild();
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const cpu = process.cpuUsage(cpuStarted);
      rounds.push({ events: all.processed, eventsPerS: all.processed / seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 });
    }
    console.log(`         rebuilds of all projections: ${rounds.map((r) => fmt(r.eventsPerS)).join(', ')} events/s`);
    return rounds.sort((a, b) => a.eventsPerS - b.eventsPerS)[Math.floor(REBUILD_ROUNDS / 2)];
  } finally {
    await dataSource.destroy();
  }
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const round = (n: number, digits = 2) => Number(n.toFixed(digits));

/** Prints the rebuild figure and returns the backend's fields of the JSON line (figures of the 16-stream case). */
function summaryFields(backend: string, last: { figures: AppendFigures; raw: number }, rebuild: RebuildFigures): Record<string, unknown> {
  console.log(
    `${backend.padEnd(8)} rebuild of all projections (median of ${REBUILD_ROUNDS}): ${fmt(rebuild.events)} events in ${(rebuild.events / rebuild.eventsPerS).toFixed(2)} s = ${fmt(rebuild.eventsPerS)} events/s ` +
      `(this process's CPU: ${rebuild.cpuSeconds.toFixed(2)} s = ${fmt(rebuild.events / rebuild.cpuSeconds)} events per CPU second)`,
  );
  return {
    [`${backend}_append_events_per_s`]: Math.round(last.figures.eventsPerS),
    [`${backend}_raw_events_per_s`]: Math.round(last.raw),
    [`${backend}_append_ratio`]: round(last.figures.eventsPerS / last.raw),
    [`${backend}_p99_append_ms`]: round(last.figures.p99Ms),
    [`${backend}_rebuild_events_per_s`]: Math.round(rebuild.eventsPerS),
    [`${backend}_rebuild_events_per_cpu_s`]: Math.round(rebuild.events / rebuild.cpuSeconds),
  };
}

async function benchSqlite(): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-'));
  try {
    let last: { figures: AppendFigures; raw: number } | undefined;
    for (const streams of [1, 4, 16]) {
      const rounds: AppendFigures[] = [];
      let rawSeconds = 0;
      let perCommit = 0;
      for (let round = 0; round < (streams === 16 ? SQLITE_ROUNDS_AT_16 : 1); round++) {
        const file = path.join(dir, `ledger-${streams}-${round}.db`);
        const store = await SqliteEventStore.open(file);
        const figures = await appendWorkload(store, streams);
        const { transactions, appends } = store.stats();
        await store.close();
        perCommit = appends / transactions;
        const rows = committedRows(file);
        rawSeconds += rows.length / rawSqlite(dir, rows, Math.max(1, Math.round(perCommit)));
        rounds.push(figures);
      }
      const figures = combined(rounds);
      const raw = figures.events / rawSeconds;
      console.log(
        `sqlite   ${String(streams).padStart(2)} streams: ${fmt(figures.eventsPerS)} events/s durable (p50 ${figures.p50Ms.toFixed(2)} ms, p99 ${figures.p99Ms.toFixed(2)} ms, ` +
          `${perCommit.toFixed(1)} appends/commit); raw better-sqlite3, same rows in the same order and commit groups: ${fmt(raw)} rows/s; ratio ${(figures.eventsPerS / raw).toFixed(2)}` +
          (rounds.length > 1 ? ` (${rounds.length} alternating rounds)` : ''),
      );
      last = { figures, raw };
    }
    const harnessStore = await SqliteEventStore.open(path.join(dir, 'harness.db'));
    const harness = await appendWorkload(harnessStore, 16, true);
    await harnessStore.close();
    console.log(`sqlite   16 streams, building and validating each event in the loop (the harness path): ${fmt(harness.eventsPerS)} events/s`);
    const store = await SqliteEventStore.open(path.join(dir, 'rebuild.db'));
    const rebuild = await rebuildRate(store, `sqlite://${path.join(dir, 'readmodels.db')}`);
    await store.close();
    return summaryFields('sqlite', last!, rebuild);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgresReachable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

async function benchPostgres(): Promise<Record<string, unknown>> {
  const schema = `bench_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const pool = new pg.Pool({ connectionString: PG_URL, max: 16 });
  let last: { figures: AppendFigures; raw: number } | undefined;
  try {
    const { rows } = await pool.query<{ synchronous_commit: string }>('SHOW synchronous_commit');
    const durability = rows[0].synchronous_commit;
    for (const streams of [1, 4, 16]) {
      // The adapter creates the raw reference's tables too: the same columns and indexes.
      await (await PostgresEventStore.open(PG_URL, { schema: `${schema}_raw${streams}` })).close();
      const store = await PostgresEventStore.open(PG_URL, { schema: `${schema}_${streams}` });
      const rounds: AppendFigures[] = [];
      let rawSeconds = 0;
      for (let round = 0; round < (streams === 16 ? PG_ROUNDS_AT_16 : 1); round++) {
        const figures = await appendWorkload(store, streams);
        rawSeconds += (await rawPostgres(pool, `${schema}_raw${streams}`, figures.rows, streams)).seconds;
        rounds.push(figures);
      }
      await store.close();
      const figures = combined(rounds);
      const raw = figures.events / rawSeconds;
      console.log(
        `postgres ${String(streams).padStart(2)} streams: ${fmt(figures.eventsPerS)} events/s durable (p50 ${figures.p50Ms.toFixed(2)} ms, p99 ${figures.p99Ms.toFixed(2)} ms); ` +
          `raw pg, same rows, indexes and clients, synchronous_commit=${durability}: ${fmt(raw)} rows/s; ratio ${(figures.eventsPerS / raw).toFixed(2)}` +
          (rounds.length > 1 ? ` (${rounds.length} alternating rounds)` : ''),
      );
      last = { figures, raw };
    }
    const store = await PostgresEventStore.open(PG_URL, { schema: `${schema}_rebuild` });
    const rebuild = await rebuildRate(store, `${PG_URL}?schema=${schema}_rm`);
    await store.close();
    return { postgres_synchronous_commit: durability, ...summaryFields('postgres', last!, rebuild) };
  } finally {
    const { rows } = await pool.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname LIKE $1`, [`${schema}%`]);
    for (const { nspname } of rows) await pool.query(`DROP SCHEMA "${nspname}" CASCADE`);
    await pool.end();
  }
}

/** One JSON line: the 16-stream append figures and the rebuild rate of each backend (postgres_* null when it is not reachable). */
export async function ledgerBench(): Promise<void> {
  const loadStart = os.loadavg()[0];
  console.log(`load average at start: ${loadStart.toFixed(2)} (1 min) on ${os.availableParallelism()} cores`);
  let postgres: Record<string, unknown> = { postgres_append_ratio: null, postgres_rebuild_events_per_s: null };
  if (await postgresReachable()) postgres = await benchPostgres();
  else console.log(`postgres: not reachable at ${PG_URL}; its figures are null`);
  const sqlite = await benchSqlite();
  const loadEnd = os.loadavg()[0];
  console.log(`load average at end: ${loadEnd.toFixed(2)} (1 min)`);
  console.log(JSON.stringify({ bench: 'ledger', streams: 16, ...postgres, ...sqlite, load_1m_start: round(loadStart), load_1m_end: round(loadEnd), cores: os.availableParallelism() }));
}
