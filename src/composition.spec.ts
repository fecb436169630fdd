import 'reflect-metadata';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, jest } from '@jest/globals';
import { Test } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { FsArtifactStore } from '../infra/artifacts/fs-artifact-store.js';
import { FsRunLocks } from '../infra/runs/fs-run-locks.js';
import { SqliteEventStore } from '../infra/eventstore/sqlite-event-store.js';
import { ARTIFACT_STORE } from '../modules/artifacts/artifacts.module.js';
import { LedgerModule } from '../modules/ledger/ledger.module.js';
import { LedgerService } from '../modules/ledger/ledger.service.js';
import { CLOCK, EVENT_STORE } from '../modules/ledger/tokens.js';
import { ProjectionRunnerService, ReadModelsModule } from '../modules/readmodels/readmodels.module.js';
import { READ_MODELS } from '../modules/readmodels/read-models.port.js';
import { RUN_LOCKS, type RunLocks } from '../modules/ledger/run-locks.port.js';
import { SETTINGS } from '../modules/settings/settings.port.js';
import { AdaptersModule, readModelStores } from './composition.js';
import { loadConfig } from './config/config.js';

describe('the composition root', () => {
  const home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-composition-'));
  afterAll(() => rmSync(home, { recursive: true, force: true }));
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('opens the adapters the settings name, feature modules inject them, and it closes them after the modules that use them', async () => {
    const storeClose = jest.spyOn(SqliteEventStore.prototype, 'close');
    const artifactsClose = jest.spyOn(FsArtifactStore.prototype, 'close');
    const destroy = jest.spyOn(DataSource.prototype, 'destroy');
    const settings = loadConfig({ A2RL_HOME: home });
    const moduleRef = await Test.createTestingModule({ imports: [AdaptersModule, LedgerModule, ReadModelsModule] })
      .overrideProvider(SETTINGS)
      .useValue(settings)
      .compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();

    expect(app.get(EVENT_STORE)).toBeInstanceOf(SqliteEventStore);
    expect(app.get(ARTIFACT_STORE)).toBeInstanceOf(FsArtifactStore);
    expect(app.get<DataSource>(READ_MODELS).isInitialized).toBe(true);
    expect(app.get<() => Date>(CLOCK)()).toBeInstanceOf(Date);
    expect(app.get(RUN_LOCKS)).toBeInstanceOf(FsRunLocks);
    expect(app.get<RunLocks>(RUN_LOCKS).pidFile('run-1')).toBe(path.join(home, 'runs', 'run-1.pgid')); // under A2RL_HOME, outside workspaces
    expect(existsSync(path.join(home, 'ledger.db'))).toBe(true); // the default ledger, under A2RL_HOME
    expect(app.get(LedgerService).backend).toBe('sqlite'); // the feature module's service got the injected store

    await app.get(ProjectionRunnerService).start(); // live following, as `a2rl serve` does
    await app.close();

    expect(storeClose).toHaveBeenCalledTimes(1);
    expect(artifactsClose).toHaveBeenCalledTimes(1);
    expect(destroy).toHaveBeenCalledTimes(1);
    // ReadModelsModule stops following and destroys its data source before the stores go away.
    expect(destroy.mock.invocationCallOrder[0]).toBeLessThan(storeClose.mock.invocationCallOrder[0]);
    expect(destroy.mock.invocationCallOrder[0]).toBeLessThan(artifactsClose.mock.invocationCallOrder[0]);
  });

  it('gives the whole app what its modules inject: AppModule resolves with every service', async () => {
    // Imported here: the whole app pulls in every module, which the tests above do not need.
    // One after the other: jest's ESM loader can link a module shared by two graphs loading at once before its dependencies ("request for 'node:crypto' is not in cache").
    const { AppModule } = await import('./app.module.js');
    const [{ RunService }, { RunSource }] = [await import('../modules/runs/run.service.js'), await import('../modules/query/run-source.js')];
    const settings = loadConfig({ A2RL_HOME: mkdtempSync(path.join(home, 'app-')) });
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).overrideProvider(SETTINGS).useValue(settings).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    try {
      expect(app.get(RunService)).toBeInstanceOf(RunService);
      expect(app.get(RunSource)).toBeDefined();
    } finally {
      await app.close();
    }
  });

  it('opens a scratch read-model store, migrated, inside the directory it is given', async () => {
    const dir = mkdtempSync(path.join(home, 'scratch-'));
    const scratch = await readModelStores({ readModelUrl: 'postgres://nowhere.invalid/live' }).openScratch(dir);
    try {
      expect(scratch.options.type).toBe('better-sqlite3');
      expect(existsSync(path.join(dir, 'readmodels.db'))).toBe(true);
      const tables = (await scratch.query("SELECT name FROM sqlite_master WHERE type = 'table'")) as { name: string }[];
      expect(tables.map((t) => t.name)).toContain('read_model_migrations');
    } finally {
      await scratch.destroy();
    }
  });
});
