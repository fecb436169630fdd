import path from 'node:path';
import { Global, Inject, Module, type OnApplicationShutdown } from '@nestjs/common';
import { openReadModels } from '../infra/readmodels/data-source.js';
import { FsRunLocks } from '../infra/runs/fs-run-locks.js';
import type { ArtifactStore } from '../modules/artifacts/artifact-store.port.js';
import { ARTIFACT_STORE } from '../modules/artifacts/artifacts.module.js';
import type { EventStore } from '../modules/ledger/event-store.port.js';
import { CLOCK, type Clock, EVENT_STORE } from '../modules/ledger/tokens.js';
import { READ_MODEL_STORES, type ReadModelStores } from '../modules/readmodels/read-models.port.js';
import { RUN_LOCKS, type RunLocks } from '../modules/ledger/run-locks.port.js';
import { SETTINGS, type Settings } from '../modules/settings/settings.port.js';
import { ConfigModule } from './config/config.module.js';
import { openArtifacts, openLedger, opening } from './open-stores.js';

// The composition root: the one place that chooses adapters (infra/) for the ports the modules
// declare, from the settings, and opens them. Modules receive ports by injection and never import
// infra/ or src/ (test/architecture.spec.ts holds them to it). Commands that work without Nest
// (`a2rl export`, `a2rl verify`) open their stores with the same functions (open-stores.ts).

export { openArtifacts, openLedger };

/** The read models the settings name; scratch stores are embedded SQLite files. */
export function readModelStores(settings: Pick<Settings, 'readModelUrl'>): ReadModelStores {
  return {
    open: () => opening({ variable: 'A2RL_READMODEL_URL', what: 'read models', url: settings.readModelUrl }, openReadModels),
    openScratch: (dir) => openReadModels(`sqlite://${path.join(path.resolve(dir), 'readmodels.db')}`),
  };
}

/** Lock files of open runs, under `<home>/runs/` (outside every workspace). */
export function runLocks(settings: Pick<Settings, 'home'>): RunLocks {
  return new FsRunLocks(path.join(settings.home, 'runs'));
}

/** The harness clock: read once per event, then recorded. */
export const systemClock: Clock = () => new Date();

/**
 * Every adapter, provided globally so that feature modules inject the ports without importing
 * anything that builds them. It opened the stores, so it closes them: a global module's shutdown
 * hook runs after every other module's (Nest orders hooks by import distance, globals last), i.e.
 * once live projections and runs have stopped using them.
 */
@Global()
@Module({
  imports: [ConfigModule],
  providers: [
    { provide: EVENT_STORE, inject: [SETTINGS], useFactory: openLedger },
    { provide: ARTIFACT_STORE, inject: [SETTINGS], useFactory: openArtifacts },
    { provide: READ_MODEL_STORES, inject: [SETTINGS], useFactory: readModelStores },
    { provide: RUN_LOCKS, inject: [SETTINGS], useFactory: runLocks },
    { provide: CLOCK, useValue: systemClock },
  ],
  exports: [EVENT_STORE, ARTIFACT_STORE, READ_MODEL_STORES, RUN_LOCKS, CLOCK],
})
export class AdaptersModule implements OnApplicationShutdown {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(ARTIFACT_STORE) private readonly artifacts: ArtifactStore,
  ) {}

  async onApplicationShutdown(): Promise<void> {
    // Both are closed even if one fails; the first failure is reported.
    const results = await Promise.allSettled([this.store.close(), this.artifacts.close()]);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}
