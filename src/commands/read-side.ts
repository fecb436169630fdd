import path from 'node:path';
import type { DataSource } from 'typeorm';
import type { ArtifactStore } from '../../modules/artifacts/artifact-store.port.js';
import type { EventStore } from '../../modules/ledger/event-store.port.js';
import { StoreRunSource, type RunAnalysesReader, type RunSource } from '../../modules/query/run-reading.js';
import type { ProjectionRunner } from '../../modules/readmodels/projection-runner.js';
import type { RunLocks } from '../../modules/ledger/run-locks.port.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import type { RunListRow } from '../../projections/run-list/run-list.entity.js';
import { loadConfig, type A2rlConfig } from '../config/config.js';
import { checkHome } from '../config/open-errors.js';
import { openArtifacts, openLedger, opening } from '../open-stores.js';

// The read-only commands' stores, opened without Nest (`a2rl runs`, `events`, `report`, `scoreboard`,
// `transcript`, `logs`, `blob`): the ledger and the artifact store as open-stores.ts opens them for
// the app, and the read models (TypeORM, and the projections caught up) only when a command reads
// them. Building the Nest application costs about a second of start-up that these commands do not need.

/** The read models as the read-only commands use them: caught up from the ledger, then read. */
export class ReadModels {
  constructor(
    private readonly runner: ProjectionRunner,
    private readonly dataSource: DataSource,
  ) {}

  catchUp(): Promise<unknown> {
    return this.runner.catchUp();
  }

  /** The run list read model, ordered by run id (as ProjectionRunnerService.runList). */
  async runList(): Promise<RunListRow[]> {
    const { RunListRow } = await import('../../projections/run-list/run-list.entity.js');
    return this.dataSource.getRepository(RunListRow).find({ order: { runId: 'ASC' } });
  }

  /** Every run's analysis, ordered by run id (as ProjectionRunnerService.runAnalyses). */
  async runAnalyses(): Promise<RunAnalysis[]> {
    const { RunAnalysisRow } = await import('../../projections/run-analysis/run-analysis.entity.js');
    const rows = await this.dataSource.getRepository(RunAnalysisRow).find({ order: { runId: 'ASC' } });
    return rows.map((row) => JSON.parse(row.analysis) as RunAnalysis);
  }

  async runAnalysis(runId: string): Promise<RunAnalysis | null> {
    const { RunAnalysisRow } = await import('../../projections/run-analysis/run-analysis.entity.js');
    const row = await this.dataSource.getRepository(RunAnalysisRow).findOneBy({ runId });
    return row ? (JSON.parse(row.analysis) as RunAnalysis) : null;
  }
}

export interface ReadSide {
  config: A2rlConfig;
  store: EventStore;
  artifacts: ArtifactStore;
  /** The read models, opened on first use (the ledger's events alone need none). */
  readModels(): Promise<ReadModels>;
  /** Runs (analyses from the read models, opened when first asked for; events from the ledger), as RunSource gives them to the app. */
  source: RunSource;
  /** Lock files of open runs (as the composition root provides RUN_LOCKS). */
  locks(): Promise<RunLocks>;
}

/** Opens the stores, runs `work`, and closes whatever was opened (each close attempted; the first failure thrown). */
export async function withReadSide<T>(work: (side: ReadSide) => Promise<T>): Promise<T> {
  const config = loadConfig();
  checkHome(config.home); // fail fast, naming the variable, before any store is opened
  const closers: Array<() => Promise<unknown>> = [];
  try {
    const store = await openLedger(config);
    closers.push(() => store.close());
    const artifacts = await openArtifacts(config);
    closers.push(() => artifacts.close());
    let models: Promise<ReadModels> | undefined;
    const readModels = () => (models ??= openReadModels(config, store, artifacts, closers));
    const analyses: RunAnalysesReader = {
      catchUp: async () => (await readModels()).catchUp(),
      runAnalyses: async () => (await readModels()).runAnalyses(),
      runAnalysis: async (runId) => (await readModels()).runAnalysis(runId),
    };
    const side: ReadSide = {
      config,
      store,
      artifacts,
      readModels,
      source: new StoreRunSource(analyses, store, artifacts),
      locks: async () => {
        const { FsRunLocks } = await import('../../infra/runs/fs-run-locks.js');
        return new FsRunLocks(path.join(config.home, 'runs'));
      },
    };
    return await work(side);
  } finally {
    const results = await Promise.allSettled(closers.reverse().map((close) => close()));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}

async function openReadModels(config: A2rlConfig, store: EventStore, artifacts: ArtifactStore, closers: Array<() => Promise<unknown>>): Promise<ReadModels> {
  const [{ openReadModels: open }, { ProjectionRunner }, { PROJECTIONS }, { artifactBlobReader }] = await Promise.all([
    import('../../infra/readmodels/data-source.js'),
    import('../../modules/readmodels/projection-runner.js'),
    import('../../projections/index.js'),
    import('../../projections/blob-reader.js'),
  ]);
  const dataSource = await opening({ variable: 'A2RL_READMODEL_URL', what: 'read models', url: config.readModelUrl }, open);
  closers.push(async () => {
    if (dataSource.isInitialized) await dataSource.destroy();
  });
  return new ReadModels(new ProjectionRunner(store, dataSource, PROJECTIONS, { blobs: artifactBlobReader(artifacts) }), dataSource);
}
