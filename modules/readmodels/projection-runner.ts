import type { DataSource, EntityManager } from 'typeorm';
import type { KeyedRow, Projection } from '../../projections/projection.js';
import type { BlobReader } from '../../projections/blob-reader.js';
import { isRunProjection, type AnyProjection, type RunProjection } from '../../projections/run-projection.js';
import { allPages, type EventStore, type RecordedEvent } from '../ledger/event-store.port.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import { streamName } from '../ledger/events/ids.js';
import { KeyedMutex } from '../ledger/keyed-mutex.js';
import { KeyFilter } from './key-filter.js';
import { withRebuildDurability } from './rebuild-durability.js';
import { ProjectionCheckpoint } from './projection-checkpoint.entity.js';
import { InvalidProjectionError, ROWS_PER_STATEMENT, rowTable, type RowTable } from './row-table.js';

export { InvalidProjectionError };

/** Events applied per transaction by default: large enough to amortise commits, small enough to bound memory. */
const BATCH_SIZE = 1000;
/**
 * Events per transaction of a rebuild, unless `batchSize` is given: a rebuild has no reader
 * waiting for its next batch, so it commits less often. On PostgreSQL each transaction costs its
 * round trips (BEGIN, one checkpoint UPDATE per projection, COMMIT), each a wake-up of the server
 * process, which on a busy machine took a third of a rebuild at 1,000 (measured: 4.2 s of 8.9 s
 * writing at load 15; 1.0 s of 6.5 s at 5,000). Memory: two batches of events at a time.
 */
const REBUILD_BATCH_SIZE = 5000;
/** A live batch is flushed at most this long after its first event arrived. */
const FLUSH_AFTER_MS = 50;

export interface ProjectionProgress {
  name: string;
  processed: number;
}

export interface ProjectionRunnerOptions {
  /** Events per transaction (default 1000; a rebuild's 5000). */
  batchSize?: number;
  /** Content-addressed blobs for run-recompute projections (required when there is one). */
  blobs?: BlobReader;
  /** Canonical bytes of events a rebuild holds for run projections (default 64 MiB; see HeldRuns). */
  heldRunBytes?: number;
}

export interface ProjectionStatus {
  name: string;
  /** The version the code defines. */
  version: number;
  /** The version the stored rows were built with; null before the first run. A mismatch means the
   *  next catch-up rebuilds from zero (and `lag` counts every event). */
  builtVersion: number | null;
  checkpoint: string | null;
  eventsProcessed: number;
  lag: number;
}

export class UnknownProjectionError extends Error {
  override readonly name = 'UnknownProjectionError';
  constructor(readonly projection: string, known: string[]) {
    super(`unknown projection "${projection}" (known: ${known.join(', ') || 'none'})`);
  }
}

/** A projection's evolve/keyOf (or a run projection's analyze) threw; the batch holding the event was rolled back with its checkpoint. */
export class ProjectionFailedError extends Error {
  override readonly name = 'ProjectionFailedError';
  constructor(readonly projection: string, readonly event: RecordedEvent, options: { cause: unknown }) {
    const e = event.event;
    super(`projection ${projection} failed on ${e.type} (run ${e.runId}, seq ${e.seq}, position ${event.position}): ${String((options.cause as Error)?.message ?? options.cause)}`, options);
  }
}

/** Internal: the stored checkpoint is no longer where this runner left it (another writer moved it). */
class CheckpointMovedError extends Error {
  override readonly name = 'CheckpointMovedError';
}

/**
 * Applies keyed-row projections to TypeORM read models. Each batch of events is applied in ONE
 * transaction that loads the affected rows, evolves them in memory, upserts the changed ones and
 * advances the checkpoint, so rows and checkpoint are always committed together.
 *
 * Run-recompute projections (projections/run-projection.ts) get, per batch, the runs it touched
 * re-analysed from their complete streams, in the same transaction as the checkpoint. A catch-up
 * (or rebuild) reads everything first and recomputes each touched run once, writing all rows and
 * the final checkpoint in one transaction.
 *
 * Transactions are serialised per DataSource: on SQLite, TypeORM shares one connection and a second
 * concurrent transaction would silently become a savepoint of the first. Another writer of the same
 * projection (a second process) is detected by the checkpoint check; this runner then resumes from
 * the stored checkpoint.
 */
export class ProjectionRunner {
  private readonly tables = new Map<string, RowTable>();
  private readonly batchSize: number;
  private readonly rebuildBatchSize: number;
  private readonly blobs: BlobReader | undefined;
  private readonly heldRunBytes: number;
  private readonly advanceSql: ReturnType<typeof checkpointAdvance>;

  constructor(
    private readonly eventStore: EventStore,
    private readonly dataSource: DataSource,
    private readonly projections: AnyProjection[],
    options: ProjectionRunnerOptions = {},
  ) {
    this.batchSize = options.batchSize ?? BATCH_SIZE;
    this.rebuildBatchSize = options.batchSize ?? REBUILD_BATCH_SIZE;
    this.blobs = options.blobs;
    this.heldRunBytes = options.heldRunBytes ?? HELD_RUN_BYTES;
    this.advanceSql = checkpointAdvance(dataSource);
    if (!Number.isSafeInteger(this.batchSize) || this.batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${this.batchSize}`);
    for (const p of projections) {
      if (this.tables.has(p.name)) throw new InvalidProjectionError(`projection name "${p.name}" is used twice`);
      if (isRunProjection(p) && !this.blobs) throw new InvalidProjectionError(`run projection "${p.name}" needs a BlobReader (options.blobs)`);
      this.tables.set(p.name, rowTable(dataSource, p.entity));
    }
  }

  /** Applies every event after each projection's checkpoint; returns how many events each consumed. */
  async catchUp(name?: string, onProgress?: (p: ProjectionProgress) => void): Promise<ProjectionProgress[]> {
    const results: ProjectionProgress[] = [];
    for (const projection of this.select(name)) {
      if (isRunProjection(projection)) {
        results.push(await this.catchUpRuns(projection, onProgress));
        continue;
      }
      let processed = 0;
      await this.retryingWhenMoved(async () => {
        let position = await this.prepare(projection);
        let batch: RecordedEvent[] = [];
        const flush = async () => {
          position = await this.apply(projection, position, batch);
          processed += batch.length;
          batch = [];
          onProgress?.({ name: projection.name, processed });
        };
        for await (const recorded of this.eventStore.readAll({ after: position })) {
          batch.push(recorded);
          if (batch.length >= this.batchSize) await flush();
        }
        if (batch.length) await flush();
      });
      results.push({ name: projection.name, processed });
    }
    return results;
  }

  /** Follows the all-stream live until `signal` aborts; rejects on the first failure of any projection. */
  async run(signal: AbortSignal): Promise<void> {
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) stop.abort();
    try {
      await Promise.all(
        this.projections.map((p) =>
          this.follow(p, stop.signal).catch((error: unknown) => {
            stop.abort();
            throw error;
          }),
        ),
      );
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Deletes the projections' rows and resets their checkpoints in one transaction, then replays the
   * all-stream once for all of them (one read and decode of the ledger, however many projections).
   * SQLite read models are written without fsyncs meanwhile (rebuild-durability.ts).
   */
  async rebuild(name?: string, onProgress?: (p: ProjectionProgress) => void): Promise<ProjectionProgress[]> {
    const selected = this.select(name);
    await this.transaction(async (manager) => {
      for (const projection of selected) await this.reset(manager, projection);
    });
    try {
      return await withRebuildDurability(this.dataSource, (work) => this.serialized(work), () => this.replayFromStart(selected, onProgress));
    } catch (error) {
      // Another runner advanced a projection meanwhile: its rows and checkpoint are consistent,
      // so finishing is an ordinary catch-up from wherever each one stands.
      if (!(error instanceof CheckpointMovedError)) throw error;
      return this.catchUp(name, onProgress);
    }
  }

  async status(): Promise<ProjectionStatus[]> {
    const repo = this.dataSource.getRepository(ProjectionCheckpoint);
    const out: ProjectionStatus[] = [];
    for (const projection of this.projections) {
      const stored = await repo.findOneBy({ name: projection.name });
      const current = stored?.version === projection.version;
      let lag = 0;
      for await (const _ of this.eventStore.readAll({ after: current ? stored.position : null })) lag += 1;
      out.push({
        name: projection.name,
        version: projection.version,
        builtVersion: stored?.version ?? null,
        checkpoint: stored?.position ?? null,
        eventsProcessed: stored?.eventsProcessed ?? 0,
        lag,
      });
    }
    return out;
  }

  /**
   * One pass over the all-stream from the first event, feeding every given (freshly reset)
   * projection. The keyed projections move together: each batch is applied to all of them in one
   * transaction, and is written while the next batch is read (the ledger and the read models are
   * separate databases, so on PostgreSQL the two overlap).
   */
  private async replayFromStart(projections: AnyProjection[], onProgress?: (p: ProjectionProgress) => void): Promise<ProjectionProgress[]> {
    const keyed = projections.filter((p): p is Projection => !isRunProjection(p));
    const runProjections = projections.filter(isRunProjection);
    const held = runProjections.length ? new HeldRuns(this.heldRunBytes) : undefined;
    const touched = new Map<string, RecordedEvent>();
    let processed = 0;
    let last: string | null = null;
    let applied: string | null = null;
    let batch: RecordedEvent[] = [];
    let writing: Promise<void> = Promise.resolve();
    // The tables started empty and only this pass writes them (each transaction proves it by moving
    // the checkpoints on from where the last one left them): a key not written yet needs no lookup.
    const written = new Map(keyed.map((p) => [p.name, new KeyFilter()]));
    const flush = async () => {
      await writing; // at most one batch is written while the next one is read
      const [events, from, count] = [batch, applied, processed];
      batch = [];
      applied = last;
      writing = this.applyToAll(keyed, from, events, written).then(() => {
        for (const projection of keyed) onProgress?.({ name: projection.name, processed: count });
      });
      writing.catch(() => undefined); // surfaces at the next flush or at the end, not as unhandled
    };
    try {
      for await (const page of allPages(this.eventStore, { after: null })) {
        for (const recorded of page) {
          batch.push(recorded);
          touched.set(recorded.event.runId, recorded);
          held?.add(recorded);
          last = recorded.position;
          processed += 1;
          if (batch.length >= this.rebuildBatchSize) await flush();
        }
      }
      if (batch.length) await flush();
      await writing;
    } finally {
      await writing.catch(() => undefined); // a failed read still waits for the write in flight
    }
    for (const projection of runProjections) {
      if (processed) await this.recompute(projection, null, last!, processed, touched, held);
      onProgress?.({ name: projection.name, processed });
    }
    return projections.map((p) => ({ name: p.name, processed }));
  }

  /** Reads everything after the checkpoint, then recomputes each touched run once: rows and final checkpoint in one transaction. */
  private async catchUpRuns(projection: RunProjection, onProgress?: (p: ProjectionProgress) => void): Promise<ProjectionProgress> {
    let processed = 0;
    await this.retryingWhenMoved(async () => {
      processed = 0;
      const from = await this.prepare(projection);
      const touched = new Map<string, RecordedEvent>();
      let to = from;
      for await (const recorded of this.eventStore.readAll({ after: from })) {
        touched.set(recorded.event.runId, recorded);
        to = recorded.position;
        processed += 1;
      }
      if (processed) await this.recompute(projection, from, to!, processed, touched);
    });
    onProgress?.({ name: projection.name, processed });
    return { name: projection.name, processed };
  }

  private select(name?: string): AnyProjection[] {
    if (name === undefined) return this.projections;
    const found = this.projections.find((p) => p.name === name);
    if (!found) throw new UnknownProjectionError(name, this.projections.map((p) => p.name));
    return [found];
  }

  /** Ensures the checkpoint row exists for the current version (rebuilding on a version change); returns its position. */
  private prepare(projection: AnyProjection): Promise<string | null> {
    return this.transaction(async (manager) => {
      const stored = await manager.findOneBy(ProjectionCheckpoint, { name: projection.name });
      if (stored?.version === projection.version) return stored.position;
      await this.reset(manager, projection);
      return null;
    });
  }

  /** Checkpoint first: like `advance`, that waits for a writer's transaction in flight, so the delete then sees its rows too. */
  private async reset(manager: EntityManager, projection: AnyProjection): Promise<void> {
    await manager.upsert(
      ProjectionCheckpoint,
      { name: projection.name, position: null, version: projection.version, eventsProcessed: 0 },
      ['name'],
    );
    await manager.createQueryBuilder().delete().from(projection.entity).execute();
  }

  /**
   * Moves the checkpoint from `from` to `to`. Done first in every transaction: it takes the write
   * lock before any read, and it proves no other writer moved the projection since we read it.
   */
  private async advance(manager: EntityManager, projection: AnyProjection, from: string | null, to: string, count: number): Promise<void> {
    const [sql, parameters] = this.advanceSql(projection.name, from, to, count);
    const moved = await manager.queryRunner!.query(sql, parameters, true);
    if (moved.affected !== 1) throw new CheckpointMovedError(`projection ${projection.name}: checkpoint moved from ${from}`);
  }

  /**
   * Re-analyses each touched run from its whole stream and upserts the rows, with the checkpoint, in
   * one transaction. The next runs' streams are read while one is analysed (READ_AHEAD); a rebuild
   * passes the runs it still holds from its own read of the ledger, which are not read again.
   */
  private recompute(projection: RunProjection, from: string | null, to: string, count: number, touched: Map<string, RecordedEvent>, held?: HeldRuns): Promise<string> {
    const table = this.tables.get(projection.name)!;
    const runIds = [...touched.keys()].sort();
    return this.transaction(async (manager) => {
      await this.advance(manager, projection, from, to, count);
      const streams = readAhead(runIds, async (runId) => held?.events(runId) ?? (await this.runEvents(runId)));
      let rows: object[] = [];
      for (const [i, runId] of runIds.entries()) {
        const events = await streams(i);
        rows.push(await guardAsync(projection, touched.get(runId)!, () => projection.analyze(events, this.blobs!)));
        // Written as they come, so a long catch-up holds at most one statement's rows in memory.
        if (rows.length >= ROWS_PER_STATEMENT) {
          await table.upsert(manager, rows);
          rows = [];
        }
      }
      await table.upsert(manager, rows);
      return to;
    });
  }

  private async runEvents(runId: string): Promise<A2rlEvent[]> {
    const events: A2rlEvent[] = [];
    for await (const recorded of this.eventStore.readStream(streamName(runId))) events.push(recorded.event);
    return events;
  }

  /** Applies one batch after `from` in one transaction; returns the new checkpoint. */
  private async apply(projection: AnyProjection, from: string | null, batch: RecordedEvent[]): Promise<string | null> {
    if (isRunProjection(projection)) {
      const touched = new Map(batch.map((recorded) => [recorded.event.runId, recorded] as const));
      return this.recompute(projection, from, batch[batch.length - 1].position, batch.length, touched);
    }
    await this.applyToAll([projection], from, batch);
    return batch[batch.length - 1].position;
  }

  /**
   * Applies one batch after `from` to keyed projections standing at the same checkpoint, in one
   * transaction. `written`: per projection, the keys of every row in its table (a rebuild's).
   */
  private async applyToAll(projections: Projection[], from: string | null, batch: RecordedEvent[], written?: Map<string, KeyFilter>): Promise<void> {
    if (!projections.length) return;
    const to = batch[batch.length - 1].position;
    await this.transaction(async (manager) => {
      for (const projection of projections) await this.advance(manager, projection, from, to, batch.length);
      for (const projection of projections) await this.applyRows(manager, projection, batch, written?.get(projection.name));
    });
  }

  /**
   * Loads the rows the batch touches (those `written` may hold), evolves them in memory, then
   * inserts the new ones and upserts the changed ones. No other writer can add a row meanwhile:
   * the checkpoint update at the start of the transaction holds them off.
   */
  private async applyRows(manager: EntityManager, projection: Projection, batch: RecordedEvent[], written?: KeyFilter): Promise<void> {
    const table = this.tables.get(projection.name)!;
    const keyed = keyedEvents(projection, batch);
    const rows = await table.load(manager, keysToLoad(keyed.keys, written));
    const stored = rows.size ? new Set(rows.keys()) : null;
    const created: object[] = [];
    const updated: object[] = [];
    for (const key of evolveRows(projection, keyed, rows)) {
      if (stored?.has(key)) updated.push(rows.get(key)!);
      else {
        created.push(rows.get(key)!);
        written?.add(key); // early is harmless: should this transaction fail, so does the rebuild
      }
    }
    await table.insert(manager, created);
    await table.upsert(manager, updated);
  }

  private follow(projection: AnyProjection, signal: AbortSignal): Promise<void> {
    return this.retryingWhenMoved(async () => {
      const position = await this.prepare(projection);
      if (!signal.aborted) await this.followFrom(projection, position, signal);
    });
  }

  private async followFrom(projection: AnyProjection, from: string | null, signal: AbortSignal): Promise<void> {
    let position = from;
    const subscription = this.eventStore.subscribeAll({ after: position });
    const close = () => void subscription.close();
    signal.addEventListener('abort', close, { once: true });
    const events = subscription[Symbol.asyncIterator]();
    let next: Promise<IteratorResult<RecordedEvent>> | null = null;
    let deadline: Deadline | null = null;
    let batch: RecordedEvent[] = [];
    const flush = async () => {
      deadline?.cancel();
      deadline = null;
      position = await this.apply(projection, position, batch);
      batch = [];
    };
    try {
      for (;;) {
        next ??= events.next();
        const result = deadline ? await Promise.race([next, deadline.reached]) : await next;
        if (result === DEADLINE) {
          await flush();
          continue;
        }
        next = null;
        if (result.done) break;
        batch.push(result.value);
        deadline ??= startDeadline(FLUSH_AFTER_MS);
        if (batch.length >= this.batchSize) await flush();
      }
      if (batch.length) await flush();
    } finally {
      deadline?.cancel();
      signal.removeEventListener('abort', close);
      next?.catch(() => undefined); // left pending by a failed flush; the subscription is closing anyway
      await subscription.close();
    }
  }

  /**
   * Runs `work` again, from the stored checkpoint, whenever another writer moved it (a second
   * runner, or a rebuild in another process): rows and checkpoint are always consistent in the
   * database, so resuming from there is correct, and each retry means the other writer progressed.
   */
  private async retryingWhenMoved(work: () => Promise<void>): Promise<void> {
    for (;;) {
      try {
        return await work();
      } catch (error) {
        if (!(error instanceof CheckpointMovedError)) throw error;
      }
    }
  }

  private transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.serialized(() => this.dataSource.transaction(work));
  }

  /** Runs `work` after every transaction queued on this DataSource before it, and before those queued after. */
  private serialized<T>(work: () => Promise<T> | T): Promise<T> {
    return transactions.run(this.dataSource, async () => work());
  }
}

/**
 * The checkpoint UPDATE of `advance` and its parameters, its SQL written once: TypeORM's query
 * builder took longer to build it than the database to run it, three times per batch.
 */
function checkpointAdvance(dataSource: DataSource): (name: string, from: string | null, to: string, count: number) => [string, unknown[]] {
  const { driver } = dataSource;
  const meta = dataSource.getMetadata(ProjectionCheckpoint);
  const table = meta.tablePath.split('.').map((part) => driver.escape(part)).join('.');
  const column = (property: string) => driver.escape(meta.findColumnWithPropertyName(property)!.databaseName);
  const [p1, p2, p3, p4] = [0, 1, 2, 3].map((i) => driver.createParameter(`p${i}`, i));
  const [name, position, processed] = [column('name'), column('position'), column('eventsProcessed')];
  const update = `UPDATE ${table} SET ${position} = ${p1}, ${processed} = ${processed} + ${p2} WHERE ${name} = ${p3} AND ${position}`;
  const fromStart = `${update} IS NULL`;
  const fromPosition = `${update} = ${p4}`;
  return (name, from, to, count) => (from === null ? [fromStart, [to, count, name]] : [fromPosition, [to, count, name, from]]);
}

/** Per DataSource, so that two runners sharing one SQLite connection never interleave transactions (a key is dropped once its queue drains). */
const transactions = new KeyedMutex<DataSource>();

/** Canonical JSON of all rows of a projection's table, ordered by primary key: equal dumps mean equal read models. */
export async function dumpReadModel(dataSource: DataSource, projection: AnyProjection): Promise<string> {
  return canonicalJson(await rowTable(dataSource, projection.entity).all(dataSource.manager));
}

/** The batch's events that update a row of `projection` and, at the same index, that row's key. */
interface KeyedEvents {
  events: RecordedEvent[];
  keys: string[];
}

/** The batch's events that update a row of `projection`, each with that row's key (two arrays: no object per event on a rebuild's hot path). */
function keyedEvents(projection: Projection, batch: RecordedEvent[]): KeyedEvents {
  const keyed: KeyedEvents = { events: [], keys: [] };
  for (const recorded of batch) {
    let key: string | null;
    try {
      key = projection.keyOf(recorded.event);
    } catch (cause) {
      throw new ProjectionFailedError(projection.name, recorded, { cause });
    }
    if (key === null) continue;
    keyed.events.push(recorded);
    keyed.keys.push(key);
  }
  return keyed;
}

/** Each key once, in order of first appearance; during a rebuild, only those `written` may already hold. */
function keysToLoad(keys: string[], written?: KeyFilter): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const key of keys) {
    // Asked first: a rebuild's keys are mostly new, and a key certainly never written need not be
    // remembered (an insert-only projection's batch then builds no set at all).
    if (written && !written.mightHave(key)) continue;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(key);
  }
  return out;
}

/** Applies the events to `rows` in order, skipping those a row has applied already; returns the changed keys. */
function evolveRows(projection: Projection, keyed: KeyedEvents, rows: Map<string, KeyedRow>): Set<string> {
  const changed = new Set<string>();
  const { events, keys } = keyed;
  for (let i = 0; i < events.length; i++) {
    const recorded = events[i];
    const key = keys[i];
    const row = rows.get(key);
    if (row && recorded.event.seq <= row.lastSeq) continue; // already applied
    rows.set(key, evolved(projection, row, recorded));
    changed.add(key);
  }
  return changed;
}

/** The row after `recorded`, as guard would run it (inline: once per event, on the rebuild's hot path). */
function evolved(projection: Projection, row: KeyedRow | undefined, recorded: RecordedEvent): KeyedRow {
  let next: KeyedRow;
  try {
    next = projection.evolve(row, recorded.event);
    // lastSeq is what makes re-delivery harmless; a projection that forgets it is a bug.
    if (next.lastSeq !== recorded.event.seq) throw new Error(`evolve returned lastSeq ${next.lastSeq}, expected the event's seq`);
  } catch (cause) {
    throw new ProjectionFailedError(projection.name, recorded, { cause });
  }
  return next;
}

/** guard for a run projection's analyze; `recorded` is the run's last event in the batch. */
async function guardAsync<T>(projection: RunProjection, recorded: RecordedEvent, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (cause) {
    throw new ProjectionFailedError(projection.name, recorded, { cause });
  }
}

/**
 * Events a rebuild holds per run, by canonical size, so that run projections need not read the
 * runs' streams again after the pass over the ledger. Past the budget, the run whose event does not
 * fit is dropped and read from its stream as in a catch-up; so is a run whose events do not arrive
 * as its stream from seq 0 (the pass starts at the first event, so they always should).
 */
const HELD_RUN_BYTES = 64 * 1024 * 1024;

class HeldRuns {
  private readonly runs = new Map<string, { events: A2rlEvent[]; bytes: number } | null>();
  private bytes = 0;

  constructor(private readonly budget: number) {}

  add(recorded: RecordedEvent): void {
    const { runId, seq } = recorded.event;
    let run = this.runs.get(runId);
    if (run === null) return; // dropped
    if (run === undefined) this.runs.set(runId, (run = { events: [], bytes: 0 }));
    if (seq !== run.events.length || this.bytes + recorded.bytes.length > this.budget) {
      this.bytes -= run.bytes;
      this.runs.set(runId, null);
      return;
    }
    run.events.push(recorded.event);
    run.bytes += recorded.bytes.length;
    this.bytes += recorded.bytes.length;
  }

  /** The run's events from seq 0, or undefined when they were not held. */
  events(runId: string): A2rlEvent[] | undefined {
    return this.runs.get(runId)?.events;
  }
}

/** Runs' streams read ahead of the one being analysed: overlaps the ledger's round trips, while
 *  holding at most this many runs (whole streams) in memory besides it. */
const READ_AHEAD = 4;

/** `read(items[i])` for i in order, each started READ_AHEAD items before it is asked for. */
function readAhead<T, R>(items: T[], read: (item: T) => Promise<R>): (i: number) => Promise<R> {
  const started = new Map<number, Promise<R>>();
  const start = (i: number) => {
    if (i >= items.length || started.has(i)) return;
    const promise = read(items[i]);
    promise.catch(() => undefined); // surfaces when asked for; a read never asked for (a failed analysis) is dropped
    started.set(i, promise);
  };
  return (i) => {
    for (let j = i; j <= i + READ_AHEAD; j++) start(j);
    const promise = started.get(i)!;
    started.delete(i);
    return promise;
  };
}

const DEADLINE = Symbol('deadline');
interface Deadline {
  reached: Promise<typeof DEADLINE>;
  cancel(): void;
}
function startDeadline(ms: number): Deadline {
  let timer: NodeJS.Timeout | undefined;
  const reached = new Promise<typeof DEADLINE>((resolve) => {
    timer = setTimeout(() => resolve(DEADLINE), ms);
  });
  return { reached, cancel: () => clearTimeout(timer) };
}
