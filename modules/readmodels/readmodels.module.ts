import { Inject, Injectable, Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { PROJECTIONS } from '../../projections/index.js';
import { artifactBlobReader } from '../../projections/blob-reader.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { RunAnalysisRow } from '../../projections/run-analysis/run-analysis.entity.js';
import { RunListRow } from '../../projections/run-list/run-list.entity.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { ARTIFACT_STORE, ArtifactsModule } from '../artifacts/artifacts.module.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { LedgerModule } from '../ledger/ledger.module.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { ProjectionRunner, type ProjectionProgress, type ProjectionStatus } from './projection-runner.js';
import { READ_MODEL_STORES, READ_MODELS, type ReadModelStores } from './read-models.port.js';

export { READ_MODELS };

/** Nest face of the ProjectionRunner: one-shot catch-up/rebuild for the CLI, live following for `serve`. */
@Injectable()
export class ProjectionRunnerService implements OnApplicationShutdown {
  private readonly logger = new Logger('projections');
  private readonly runner: ProjectionRunner;
  private live?: { abort: AbortController; done: Promise<void> };

  constructor(
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(READ_MODELS) private readonly dataSource: DataSource,
    @Inject(ARTIFACT_STORE) artifacts: ArtifactStore,
  ) {
    this.runner = new ProjectionRunner(store, dataSource, PROJECTIONS, { blobs: artifactBlobReader(artifacts) });
  }

  catchUp(name?: string, onProgress?: (p: ProjectionProgress) => void): Promise<ProjectionProgress[]> {
    return this.runner.catchUp(name, onProgress);
  }

  rebuild(name?: string, onProgress?: (p: ProjectionProgress) => void): Promise<ProjectionProgress[]> {
    return this.runner.rebuild(name, onProgress);
  }

  status(): Promise<ProjectionStatus[]> {
    return this.runner.status();
  }

  /** The run list read model, ordered by run id. */
  runList(): Promise<RunListRow[]> {
    return this.dataSource.getRepository(RunListRow).find({ order: { runId: 'ASC' } });
  }

  /** Every run's analysis from the run_analysis read model, ordered by run id. */
  async runAnalyses(): Promise<RunAnalysis[]> {
    const rows = await this.dataSource.getRepository(RunAnalysisRow).find({ order: { runId: 'ASC' } });
    return rows.map((row) => JSON.parse(row.analysis) as RunAnalysis);
  }

  async runAnalysis(runId: string): Promise<RunAnalysis | null> {
    const row = await this.dataSource.getRepository(RunAnalysisRow).findOneBy({ runId });
    return row ? (JSON.parse(row.analysis) as RunAnalysis) : null;
  }

  /** Follows the ledger until shutdown; a failure is logged and stops following (rows stay consistent). */
  async start(): Promise<void> {
    if (this.live) return;
    const abort = new AbortController();
    const done = this.runner.run(abort.signal).catch((err: unknown) => {
      this.logger.error(`projections stopped: ${err instanceof Error ? err.message : String(err)}`);
    });
    this.live = { abort, done };
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.live) {
      this.live.abort.abort();
      await this.live.done;
    }
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}

@Module({
  imports: [LedgerModule, ArtifactsModule],
  providers: [
    // Opened here through the port (READ_MODEL_STORES, from the composition root) and destroyed by
    // ProjectionRunnerService, after live following has stopped.
    { provide: READ_MODELS, inject: [READ_MODEL_STORES], useFactory: (stores: ReadModelStores) => stores.open() },
    ProjectionRunnerService,
  ],
  exports: [ProjectionRunnerService, READ_MODELS],
})
export class ReadModelsModule {}
