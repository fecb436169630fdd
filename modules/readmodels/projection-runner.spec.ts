import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { openReadModels } from '../../infra/readmodels/data-source.js';
import type { Projection } from '../../projections/projection.js';
import type { RunListRow } from '../../projections/run-list/run-list.entity.js';
import { runListProjection } from '../../projections/run-list/run-list.projection.js';
import { runAnalysisProjection } from '../../projections/run-analysis/run-analysis.projection.js';
import { workspaceRevisionsProjection } from '../../projections/workspace-revisions/workspace-revisions.projection.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import { ProjectionCheckpoint } from './projection-checkpoint.entity.js';
import { dumpReadModel, ProjectionFailedError, ProjectionRunner, UnknownProjectionError } from './projection-runner.js';
import { until } from '../../test/testing/helpers.js';

const at = (seq: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, seq)).toISOString();

/** Events `from..to-1` of a run: seq 0 is RunScheduled, then agent activity and completion. */
function runEvents(runId: string, from: number, to: number, opts: { completeAt?: number } = {}): A2rlEvent[] {
  const out: A2rlEvent[] = [];
  for (let seq = from; seq < to; seq++) {
    if (seq === 0) {
      out.push(buildEvent('RunScheduled', runId, 0, at(0), { task: 'l1', agent: 'ref', baseModel: 'tiny', budgetSeconds: 60, seed: 1, mode: 'free' }));
    } else if (seq === opts.completeAt) {
      out.push(buildEvent('RunCompleted', runId, seq, at(seq), { submissions: 1 }));
    } else if (seq === 1) {
      out.push(buildEvent('AgentStarted', runId, seq, at(seq), { command: 'agent' }));
    } else {
      out.push(buildEvent('FileChanged', runId, seq, at(seq), { path: `code/f${seq}.py`, op: 'create', observedAt: at(seq) }));
    }
  }
  return out;
}

async function append(store: SqliteEventStore, events: A2rlEvent[]): Promise<void> {
  const first = events[0].seq;
  await store.append(streamName(events[0].runId), events, first === 0 ? 'no_stream' : BigInt(first - 1));
}

interface Leg {
  name: string;
  /** A fresh, migrated read-model database and a function to dispose of it. */
  open(): Promise<{ dataSource: DataSource; dispose(): Promise<void> }>;
}

const legs: Leg[] = [
  {
    name: 'sqlite',
    async open() {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-rm-'));
      const dataSource = await openReadModels(`sqlite://${path.join(dir, 'nested', 'readmodels.db')}`);
      return { dataSource, dispose: async () => { await dataSource.destroy(); await rm(dir, { recursive: true, force: true }); } };
    },
  },
  {
    name: 'postgres',
    async open() {
      const schema = `a2rl_rm_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
      const dataSource = await openReadModels(`postgres://postgres@127.0.0.1:5432/test?schema=${schema}`);
      return {
        dataSource,
        dispose: async () => { await dataSource.query(`DROP SCHEMA "${schema}" CASCADE`); await dataSource.destroy(); },
      };
    },
  },
];

describe.each(legs)('ProjectionRunner on $name read models', (leg) => {
  let disposers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const d of disposers.reverse()) await d();
    disposers = [];
  });

  async function setup() {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-rm-ledger-'));
    const store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
    const rm_ = await leg.open();
    disposers.push(async () => { await store.close(); await rm(dir, { recursive: true, force: true }); }, rm_.dispose);
    return { store, dataSource: rm_.dataSource };
  }

  const checkpoint = (ds: DataSource) => ds.getRepository(ProjectionCheckpoint).findOneByOrFail({ name: 'run-list' });
  const rows = async (ds: DataSource) => JSON.parse(await dumpReadModel(ds, runListProjection)) as RunListRow[];

  it('catches up every event once, and a second catch-up changes nothing', async () => {
    const { store, dataSource } = await setup();
    await append(store, runEvents('b', 0, 30, { completeAt: 29 }));
    await append(store, runEvents('a', 0, 5));
    // Run c has no RunScheduled and no lifecycle event: only file changes.
    await append(store, Array.from({ length: 6 }, (_, seq) => buildEvent('FileChanged', 'c', seq, at(seq), { path: 'x', op: 'modify', observedAt: at(seq) })));
    const runner = new ProjectionRunner(store, dataSource, [runListProjection], { batchSize: 7 });

    const progress: number[] = [];
    expect(await runner.catchUp(undefined, (p) => progress.push(p.processed))).toEqual([{ name: 'run-list', processed: 41 }]);
    expect(progress).toEqual([7, 14, 21, 28, 35, 41]);
    const dump = await dumpReadModel(dataSource, runListProjection);
    expect(JSON.parse(dump)).toEqual([
      { runId: 'a', task: 'l1', agent: 'ref', driver: null, baseModel: 'tiny', state: 'running', eventCount: 5, lastSeq: 4, scheduledAt: at(0), lastEventAt: at(4) },
      { runId: 'b', task: 'l1', agent: 'ref', driver: null, baseModel: 'tiny', state: 'completed', eventCount: 30, lastSeq: 29, scheduledAt: at(0), lastEventAt: at(29) },
      { runId: 'c', task: null, agent: null, driver: null, baseModel: null, state: null, eventCount: 6, lastSeq: 5, scheduledAt: null, lastEventAt: at(5) },
    ]);
    expect(await checkpoint(dataSource)).toMatchObject({ eventsProcessed: 41, version: runListProjection.version });

    expect(await runner.catchUp()).toEqual([{ name: 'run-list', processed: 0 }]);
    expect(await dumpReadModel(dataSource, runListProjection)).toBe(dump);
  });

  it('commits a batch\'s rows and checkpoint together: a failing event rolls back its whole batch', async () => {
    const { store, dataSource } = await setup();
    await append(store, runEvents('r', 0, 25));
    const failOn14: Projection<RunListRow> = {
      ...runListProjection,
      evolve: (row, event) => {
        if (event.seq === 14) throw new Error('boom');
        return runListProjection.evolve(row, event);
      },
    };
    const failing = new ProjectionRunner(store, dataSource, [failOn14], { batchSize: 10 });
    const error = await failing.catchUp().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProjectionFailedError);
    expect((error as Error).message).toMatch(/run-list failed on FileChanged \(run r, seq 14/);

    // Only the first batch (seq 0..9) is visible, with its checkpoint; nothing of seq 10..13.
    const [row] = await rows(dataSource);
    expect(row).toMatchObject({ eventCount: 10, lastSeq: 9 });
    const cp = await checkpoint(dataSource);
    expect(cp.eventsProcessed).toBe(10);
    const firstTen = await collect(store.readAll({ maxCount: 10 }));
    expect(cp.position).toBe(firstTen[9].position);

    // The fixed projection resumes from there and ends where a rebuild from zero ends.
    const runner = new ProjectionRunner(store, dataSource, [runListProjection], { batchSize: 10 });
    expect(await runner.catchUp()).toEqual([{ name: 'run-list', processed: 15 }]);
    const resumed = await dumpReadModel(dataSource, runListProjection);
    await runner.rebuild();
    expect(await dumpReadModel(dataSource, runListProjection)).toBe(resumed);
    expect((await rows(dataSource))[0]).toMatchObject({ eventCount: 25, lastSeq: 24 });
  });

  it('skips events a row has already applied (idempotent when the checkpoint lags the rows)', async () => {
    const { store, dataSource } = await setup();
    await append(store, runEvents('r', 0, 12));
    const runner = new ProjectionRunner(store, dataSource, [runListProjection], { batchSize: 5 });
    await runner.catchUp();
    const before = await dumpReadModel(dataSource, runListProjection);
    await dataSource.getRepository(ProjectionCheckpoint).update({ name: 'run-list' }, { position: null });
    expect(await runner.catchUp()).toEqual([{ name: 'run-list', processed: 12 }]);
    expect(await dumpReadModel(dataSource, runListProjection)).toBe(before);
  });

  it('resumes from the stored checkpoint when another runner advanced the projection meanwhile', async () => {
    const { store, dataSource } = await setup();
    await append(store, runEvents('r', 0, 20));
    const other = new ProjectionRunner(store, dataSource, [runListProjection], { batchSize: 5 });
    // Runner A's reading pauses after 7 events (one batch committed) while runner B catches up fully.
    const pausing: EventStore = {
      backend: store.backend,
      append: (stream, events, expected) => store.append(stream, events, expected),
      readStream: (stream, options) => store.readStream(stream, options),
      subscribeAll: (options) => store.subscribeAll(options),
      streamRevision: (stream) => store.streamRevision(stream),
      identity: () => store.identity(),
      close: () => store.close(),
      async *readAll(options) {
        let n = 0;
        for await (const recorded of store.readAll(options)) {
          if (n++ === 7) await other.catchUp();
          yield recorded;
        }
      },
    };
    const runner = new ProjectionRunner(pausing, dataSource, [runListProjection], { batchSize: 5 });
    expect(await runner.catchUp()).toEqual([{ name: 'run-list', processed: 5 }]);
    expect(await checkpoint(dataSource)).toMatchObject({ eventsProcessed: 20 });
    const shared = await dumpReadModel(dataSource, runListProjection);
    expect(JSON.parse(shared)[0]).toMatchObject({ eventCount: 20, lastSeq: 19 });
    await other.rebuild();
    expect(await dumpReadModel(dataSource, runListProjection)).toBe(shared);
  });

  it('rebuild from zero yields a dump byte-identical to the incremental one', async () => {
    const { store, dataSource } = await setup();
    const runner = new ProjectionRunner(store, dataSource, [runListProjection], { batchSize: 4 });
    for (let step = 0; step < 3; step++) {
      for (const id of ['x', 'y', 'z']) await append(store, runEvents(id, step * 6, step * 6 + 6, { completeAt: id === 'y' ? 17 : undefined }));
      await runner.catchUp();
    }
    const incremental = await dumpReadModel(dataSource, runListProjection);
    expect(JSON.parse(incremental)).toHaveLength(3);
    expect(await runner.rebuild('run-list')).toEqual([{ name: 'run-list', processed: 54 }]);
    expect(await dumpReadModel(dataSource, runListProjection)).toBe(incremental);
  });

  it('rebuilds keyed and run projections in one pass to the incremental read models, runs held in memory or read again', async () => {
    const { store, dataSource } = await setup();
    const projections = [runListProjection, workspaceRevisionsProjection, runAnalysisProjection];
    const blobs = { read: async () => null };
    const dumps = async () => Promise.all(projections.map((p) => dumpReadModel(dataSource, p)));
    const runner = new ProjectionRunner(store, dataSource, projections, { batchSize: 4, blobs });
    for (let step = 0; step < 3; step++) {
      for (const id of ['p', 'q', 'r', 's']) await append(store, runEvents(id, step * 5, step * 5 + 5, { completeAt: id === 'q' ? 14 : undefined }));
      await runner.catchUp();
    }
    const incremental = await dumps();
    expect(JSON.parse(incremental[1]).length).toBeGreaterThan(40); // a workspace row per FileChanged
    const ledgerBytes = (await collect(store.readAll())).reduce((n, e) => n + e.bytes.length, 0);

    // Room for every run, none (every stream is read again), and all but the last event (run s is read again).
    for (const [heldRunBytes, streamReads] of [[undefined, 0], [0, 4], [ledgerBytes - 1, 1]] as const) {
      const counted = countingStreamReads(store);
      const rebuilt = await new ProjectionRunner(counted.store, dataSource, projections, { batchSize: 4, blobs, heldRunBytes }).rebuild();
      expect(rebuilt).toEqual(projections.map((p) => ({ name: p.name, processed: 60 })));
      expect(await dumps()).toEqual(incremental);
      expect(counted.streamReads()).toBe(streamReads);
    }
    expect(await runner.status()).toEqual(projections.map((p) => expect.objectContaining({ name: p.name, eventsProcessed: 60, lag: 0 })));
  });

  it('rebuilds from zero when the projection version changes', async () => {
    const { store, dataSource } = await setup();
    await append(store, runEvents('r', 0, 6));
    await new ProjectionRunner(store, dataSource, [runListProjection]).catchUp();
    const next = { ...runListProjection, version: runListProjection.version + 1 };
    expect(await new ProjectionRunner(store, dataSource, [next]).catchUp()).toEqual([{ name: 'run-list', processed: 6 }]);
    expect(await checkpoint(dataSource)).toMatchObject({ version: next.version, eventsProcessed: 6 });
    expect((await rows(dataSource))[0]).toMatchObject({ eventCount: 6 });
  });

  it('reports checkpoint, events processed and lag', async () => {
    const { store, dataSource } = await setup();
    await append(store, runEvents('r', 0, 8));
    const runner = new ProjectionRunner(store, dataSource, [runListProjection]);
    expect(await runner.status()).toEqual([
      { name: 'run-list', version: runListProjection.version, builtVersion: null, checkpoint: null, eventsProcessed: 0, lag: 8 },
    ]);
    await runner.catchUp();
    await append(store, runEvents('r', 8, 11));
    const [status] = await runner.status();
    expect(status).toMatchObject({ builtVersion: runListProjection.version, eventsProcessed: 8, lag: 3 });
    expect(status.checkpoint).not.toBeNull();
  });

  it('follows the ledger live until aborted, ending where catch-up would', async () => {
    const { store, dataSource } = await setup();
    await append(store, runEvents('live', 0, 3));
    const runner = new ProjectionRunner(store, dataSource, [runListProjection], { batchSize: 4 });
    const stop = new AbortController();
    const running = runner.run(stop.signal);
    for (let seq = 3; seq < 20; seq += 2) await append(store, runEvents('live', seq, seq + 2));
    await until('the row at seq 20', async () => (await rows(dataSource))[0]?.lastSeq === 20);
    stop.abort();
    await running;
    expect(await runner.status()).toMatchObject([{ lag: 0, eventsProcessed: 21 }]);
    const live = await dumpReadModel(dataSource, runListProjection);
    await runner.rebuild();
    expect(await dumpReadModel(dataSource, runListProjection)).toBe(live);
  });

  it('rejects a projection whose evolve does not record the event seq (idempotency depends on it)', async () => {
    const { store, dataSource } = await setup();
    await append(store, runEvents('r', 0, 2));
    const forgetful: Projection<RunListRow> = { ...runListProjection, evolve: (row, e) => ({ ...runListProjection.evolve(row, e), lastSeq: 0 }) };
    await expect(new ProjectionRunner(store, dataSource, [forgetful]).catchUp()).rejects.toThrow(/seq 1.*lastSeq 0/);
  });

  it('names the known projections when asked for an unknown one', async () => {
    const { store, dataSource } = await setup();
    const runner = new ProjectionRunner(store, dataSource, [runListProjection]);
    await expect(runner.catchUp('nope')).rejects.toThrow(UnknownProjectionError);
    await expect(runner.rebuild('nope')).rejects.toThrow('unknown projection "nope" (known: run-list)');
  });
});

describe('ProjectionRunner rebuild on SQLite read models', () => {
  it('runs without fsyncs meanwhile and puts the connection\'s setting back, after a failed rebuild too', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-rm-sync-'));
    const store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
    const dataSource = await openReadModels(`sqlite://${path.join(dir, 'readmodels.db')}`);
    try {
      await append(store, runEvents('r', 0, 12));
      const synchronous = () => dataSource.query('PRAGMA synchronous') as Promise<Array<{ synchronous: number }>>;
      const before = await synchronous();
      expect(before).toEqual([{ synchronous: 1 }]); // NORMAL, as the DataSource sets it
      const during: unknown[] = [];
      const watching: Projection<RunListRow> = {
        ...runListProjection,
        evolve: (row, event) => {
          if (event.seq === 0) during.push((dataSource.driver as unknown as { databaseConnection: { pragma(s: string, o: object): unknown } }).databaseConnection.pragma('synchronous', { simple: true }));
          if (event.seq === 9) throw new Error('boom');
          return runListProjection.evolve(row, event);
        },
      };
      await expect(new ProjectionRunner(store, dataSource, [watching], { batchSize: 5 }).rebuild()).rejects.toThrow(ProjectionFailedError);
      expect(during).toEqual([0]); // OFF
      expect(await synchronous()).toEqual(before);
      await new ProjectionRunner(store, dataSource, [runListProjection], { batchSize: 5 }).rebuild();
      expect(await synchronous()).toEqual(before);
      expect((await rows(dataSource))[0]).toMatchObject({ eventCount: 12 });
    } finally {
      await dataSource.destroy();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

async function rows(ds: DataSource): Promise<RunListRow[]> {
  return JSON.parse(await dumpReadModel(ds, runListProjection)) as RunListRow[];
}

/** The store, with a count of its readStream calls. */
function countingStreamReads(store: EventStore): { store: EventStore; streamReads(): number } {
  let reads = 0;
  const counted = new Proxy(store, {
    get(target, property) {
      if (property === 'readStream') return (...args: Parameters<EventStore['readStream']>) => ((reads += 1), target.readStream(...args));
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: counted, streamReads: () => reads };
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of iterable) out.push(x);
  return out;
}

