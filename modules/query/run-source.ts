import { Inject, Injectable } from '@nestjs/common';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import { LedgerService } from '../ledger/ledger.service.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { ProjectionRunnerService } from '../readmodels/readmodels.module.js';
import { artifactBlobReader, type BlobReader } from '../../projections/run-analysis/blob-reader.js';
import type { ReportInput } from '../reports/report-model.js';
import type { ResultsRun } from '../reports/results-csv.js';
import { TASKS } from '../../tasks/index.js';

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

  /** A run's events with seq > afterSeq, in seq order (what a follower reads on each poll). */
  async eventsAfter(runId: string, afterSeq: number): Promise<A2rlEvent[]> {
    return (await this.events(runId)).filter((e) => e.seq > afterSeq);
  }

  /** Everything a run report is rendered from, or null for an unknown run. */
  async reportInput(runId: string): Promise<ReportInput | null> {
    const analysis = await this.run(runId);
    if (!analysis) return null;
    const level = TASKS.find((t) => t.id === analysis.task)?.level ?? null;
    return { analysis, events: await this.events(runId), blobs: this.blobs, level };
  }
}

/**
 * Runs as the run_analysis read model has them (caught up first): the rows hold each run's full
 * analysis as canonical JSON, so the scoreboard, reports and API read what a rebuild reproduces.
 */
@Injectable()
export class LedgerRunSource extends RunSource {
  readonly blobs: BlobReader;

  constructor(
    private readonly projections: ProjectionRunnerService,
    private readonly ledger: LedgerService,
    @Inject(ARTIFACT_STORE) artifacts: ArtifactStore,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {
    super();
    this.blobs = artifactBlobReader(artifacts);
  }

  async runs(): Promise<ResultsRun[]> {
    await this.projections.catchUp();
    return this.projections.runAnalyses();
  }

  async run(runId: string): Promise<ResultsRun | null> {
    await this.projections.catchUp();
    return this.projections.runAnalysis(runId);
  }

  async events(runId: string): Promise<A2rlEvent[]> {
    const events: A2rlEvent[] = [];
    for await (const event of this.ledger.events(runId)) events.push(event);
    return events;
  }

  override async eventsAfter(runId: string, afterSeq: number): Promise<A2rlEvent[]> {
    const events: A2rlEvent[] = [];
    for await (const r of this.store.readStream(streamName(runId), { fromRevision: BigInt(afterSeq + 1) })) events.push(r.event);
    return events;
  }
}
