import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { A2rlEvent, EventType } from '../ledger/events/catalog.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import { artifactBlobReader, type BlobReader } from '../../projections/blob-reader.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import type { ReportInput } from '../reports/report-model.js';
import type { ResultsRun } from '../reports/results-csv.js';

// Reading runs without Nest: the seam (RunSource) the CLI, the HTTP controllers and the specs share,
// the paged event reads, and the run source over the ledger and the run_analysis read model. The
// read-only commands (`a2rl runs`, `events`, `report`, `scoreboard`, `logs`, `blob`) use these
// without building the Nest application (src/commands/read-side.ts), so they start fast.

/** Which events of a run to read: seq > afterSeq, at most `limit`, of `types` only (null: every type). */
export interface EventPageQuery {
  afterSeq: number;
  limit: number;
  types?: ReadonlySet<EventType> | null;
}

/** How many events one store read asks for while a type filter skips events (bounds every read). */
const READ_CHUNK = 1000;

/**
 * A run's events with seq > afterSeq (of the given types), at most `limit`, in seq order, read from
 * the store from revision afterSeq + 1 in bounded reads (stream revision = seq): a page costs what
 * it returns plus what the type filter skips, never the whole run. `a2rl events` and
 * GET /runs/:id/events both read through this.
 */
export async function* runEventsFrom(store: EventStore, runId: string, query: EventPageQuery): AsyncGenerator<A2rlEvent> {
  const stream = streamName(runId);
  const types = query.types ?? null;
  let from = BigInt(query.afterSeq + 1);
  let left = query.limit;
  while (left > 0) {
    const maxCount = types ? READ_CHUNK : Math.min(left, READ_CHUNK);
    let read = 0;
    for await (const { event, revision } of store.readStream(stream, { fromRevision: from, maxCount })) {
      read += 1;
      from = revision + 1n;
      if (types && !types.has(event.type)) continue;
      yield event;
      if (--left <= 0) return;
    }
    if (read < maxCount) return;
  }
}

/** One page of a run's events (runEventsFrom), or null when the ledger has no such run. */
export async function readEventPage(store: EventStore, runId: string, query: EventPageQuery): Promise<A2rlEvent[] | null> {
  const page: A2rlEvent[] = [];
  for await (const event of runEventsFrom(store, runId, query)) page.push(event);
  if (!page.length && (await store.streamRevision(streamName(runId))) === null) return null;
  return page;
}

/**
 * Where the scoreboard, reports and the query API read runs from: each run's analysis (with its
 * workspace path), its events and the blobs they reference. One abstract class so the CLI, the HTTP
 * controllers and the specs share one seam.
 */
export abstract class RunSource {
  abstract readonly blobs: BlobReader;
  /** Every run's analysis, ordered by run id. */
  abstract runs(): Promise<ResultsRun[]>;
  /** One run's analysis, or null when the ledger has no such run. */
  abstract run(runId: string): Promise<ResultsRun | null>;
  /** A run's events in seq order (empty for an unknown run). */
  abstract events(runId: string): Promise<A2rlEvent[]>;

  /**
   * One page of a run's events (seq > afterSeq, at most limit), or null for an unknown run. This
   * default filters `events()`; the ledger's source reads just the page from the store.
   */
  async page(runId: string, query: EventPageQuery): Promise<A2rlEvent[] | null> {
    const all = await this.events(runId);
    if (!all.length) return null;
    return all.filter((e) => e.seq > query.afterSeq && (!query.types || query.types.has(e.type))).slice(0, query.limit);
  }

  /** A run's events with seq > afterSeq, in seq order (what a follower reads on each poll). */
  async eventsAfter(runId: string, afterSeq: number): Promise<A2rlEvent[]> {
    return (await this.events(runId)).filter((e) => e.seq > afterSeq);
  }

  /**
   * Everything a run report is rendered from, or null for an unknown run: the run's analysis (its
   * projection row) and its events, read once into one array (the report cites and times events
   * across the whole run, so it is held while the report is built; nothing else keeps a copy).
   * `events`: the run's events already read by the caller, used instead of reading them again.
   */
  async reportInput(runId: string, events?: readonly A2rlEvent[]): Promise<ReportInput | null> {
    const analysis = await this.run(runId);
    if (!analysis) return null;
    // The task packs (imported here, on use: reading runs does not load every task's module).
    const { TASKS } = await import('../../tasks/index.js');
    const level = TASKS.find((t) => t.id === analysis.task)?.level ?? null;
    return { analysis, events: events ?? (await this.events(runId)), blobs: this.blobs, level };
  }
}

/** What the run source needs of the read models: caught up, then every run's analysis or one. */
export interface RunAnalysesReader {
  catchUp(): Promise<unknown>;
  runAnalyses(): Promise<RunAnalysis[]>;
  runAnalysis(runId: string): Promise<RunAnalysis | null>;
}

/**
 * Runs as the run_analysis read model has them (caught up first): the rows hold each run's full
 * analysis as canonical JSON, so the scoreboard, reports and API read what a rebuild reproduces.
 * Events are read from the ledger, pages of them by revision.
 */
export class StoreRunSource extends RunSource {
  readonly blobs: BlobReader;

  constructor(
    private readonly analyses: RunAnalysesReader,
    private readonly store: EventStore,
    artifacts: ArtifactStore,
  ) {
    super();
    this.blobs = artifactBlobReader(artifacts);
  }

  async runs(): Promise<ResultsRun[]> {
    await this.analyses.catchUp();
    return this.analyses.runAnalyses();
  }

  async run(runId: string): Promise<ResultsRun | null> {
    await this.analyses.catchUp();
    return this.analyses.runAnalysis(runId);
  }

  async events(runId: string): Promise<A2rlEvent[]> {
    const events: A2rlEvent[] = [];
    for await (const recorded of this.store.readStream(streamName(runId))) events.push(recorded.event);
    return events;
  }

  override page(runId: string, query: EventPageQuery): Promise<A2rlEvent[] | null> {
    return readEventPage(this.store, runId, query);
  }

  override async eventsAfter(runId: string, afterSeq: number): Promise<A2rlEvent[]> {
    return (await readEventPage(this.store, runId, { afterSeq, limit: Infinity })) ?? [];
  }
}
