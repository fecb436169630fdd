import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { sqlitePath } from '../../modules/settings/store-url.js';
import { isLocked, openWhileLocked } from '../sqlite/open-retry.js';
import { ProjectionCheckpoint } from '../../modules/readmodels/projection-checkpoint.entity.js';
import { RunAnalysisRow } from '../../projections/run-analysis/run-analysis.entity.js';
import { RunListRow } from '../../projections/run-list/run-list.entity.js';
import { WorkspaceRevisionRow } from '../../projections/workspace-revisions/workspace-revision.entity.js';
import { CreateReadModels1767225600000 } from './migrations/1767225600000-create-read-models.js';
import { CreateRunAnalysis1767312000000 } from './migrations/1767312000000-create-run-analysis.js';
import { CreateWorkspaceRevisions1767398400000 } from './migrations/1767398400000-create-workspace-revisions.js';
import { RunAnalysisFailureClassNullable1767484800000 } from './migrations/1767484800000-run-analysis-failure-class-nullable.js';

/** Every read-model entity, listed explicitly (no globbing: the build must see what it ships). */
export const READ_MODEL_ENTITIES = [ProjectionCheckpoint, RunListRow, RunAnalysisRow, WorkspaceRevisionRow];
export const READ_MODEL_MIGRATIONS = [CreateReadModels1767225600000, CreateRunAnalysis1767312000000, CreateWorkspaceRevisions1767398400000, RunAnalysisFailureClassNullable1767484800000];

export class UnsupportedReadModelUrlError extends Error {
  override readonly name = 'UnsupportedReadModelUrlError';
}

/** As the PostgreSQL ledger's: connecting (or waiting for a pooled connection) longer than this fails. */
const CONNECT_TIMEOUT_MS = 10_000;

const common = {
  entities: READ_MODEL_ENTITIES,
  migrations: READ_MODEL_MIGRATIONS,
  migrationsTableName: 'read_model_migrations',
  synchronize: false,
  // Migrations run in openReadModels, after the PostgreSQL schema exists.
  migrationsRun: false,
} as const;

/**
 * A DataSource (not yet initialised) for `sqlite://<path>` or `postgres://…[?schema=name]`.
 * Prefer `openReadModels`, which also creates the schema and applies migrations.
 */
export function createReadModelDataSource(url: string): DataSource {
  const scheme = url.slice(0, url.indexOf(':'));
  if (scheme === 'sqlite') {
    const database = sqlitePath(url);
    if (!database) throw new UnsupportedReadModelUrlError(`read-model URL "${url}" names no file path`);
    return new DataSource({
      ...common,
      type: 'better-sqlite3',
      database, // the driver creates the parent directory
      enableWAL: true,
      // Read models are rebuildable and each batch commits rows with their checkpoint, so a lost
      // tail after power loss only means re-projecting it; NORMAL spares an fsync per commit in WAL.
      prepareDatabase: (db: { pragma(sql: string): unknown }) => {
        db.pragma('synchronous = NORMAL');
      },
    });
  }
  if (scheme === 'postgres' || scheme === 'postgresql') {
    const parsed = new URL(url);
    const schema = parsed.searchParams.get('schema') ?? undefined;
    parsed.searchParams.delete('schema');
    if (schema !== undefined && !/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
      throw new UnsupportedReadModelUrlError(`read-model URL schema "${schema}" must be a plain identifier ([A-Za-z_][A-Za-z0-9_]*)`);
    }
    return new DataSource({
      ...common,
      type: 'postgres',
      url: parsed.toString(),
      schema,
      // An unreachable host fails the start in seconds (one line naming A2RL_READMODEL_URL), not after the OS's TCP timeout.
      connectTimeoutMS: CONNECT_TIMEOUT_MS,
      // search_path too, so raw SQL written without a schema prefix also stays inside the schema.
      // synchronous_commit off for the reason SQLite gets synchronous=NORMAL above: a crash loses at
      // most a tail of batches (rows with their checkpoint, atomically), which is re-projected.
      extra: { options: `${schema ? `-c search_path=${schema} ` : ''}-c synchronous_commit=off` },
    });
  }
  throw new UnsupportedReadModelUrlError(`unsupported read-model URL scheme "${scheme}" (expected sqlite://<path> or postgres://…)`);
}

/**
 * Opens and migrates a SQLite read-model file. Besides the WAL switch (`openWhileLocked`), TypeORM
 * creates its migrations table outside the migrations' transaction, so two processes opening one fresh
 * file can both see no table and one fails with "table … already exists". The migrations themselves
 * run in one transaction, so the loser only has to open again: by then the winner's tables and its
 * migration rows are there, or it retries the lot.
 */
function openSqlite(url: string): Promise<DataSource> {
  return openWhileLocked(async () => {
    const dataSource = createReadModelDataSource(url);
    try {
      await dataSource.initialize();
      await dataSource.runMigrations({ transaction: 'all' });
      return dataSource;
    } catch (error) {
      if (dataSource.isInitialized) await dataSource.destroy().catch(() => undefined);
      throw error;
    }
  }, (error) => isLocked(error) || /already exists/i.test(error instanceof Error ? error.message : String(error)));
}

/**
 * Opens the read-model database, creating the PostgreSQL schema if needed, and migrates it. On
 * PostgreSQL several processes may open one fresh schema at once (workers started together): the
 * schema's creation and its migrations run under a session advisory lock named after the schema, so
 * the others wait and then find it made (without it, 25 of 30 opens in five rounds of six failed on
 * duplicate catalog rows). On SQLite the loser of that race opens again (`openSqlite`).
 */
export async function openReadModels(url: string): Promise<DataSource> {
  const dataSource = createReadModelDataSource(url);
  if (dataSource.options.type !== 'postgres') return openSqlite(url);
  await dataSource.initialize();
  try {
    const schema = dataSource.driver.schema;
    const lock = dataSource.createQueryRunner();
    await lock.connect();
    try {
      await lock.query('SELECT pg_advisory_lock(hashtext($1))', [`a2rl-readmodels:${schema ?? 'public'}`]);
      if (schema) await lock.query(`CREATE SCHEMA IF NOT EXISTS ${dataSource.driver.escape(schema)}`);
      await dataSource.runMigrations({ transaction: 'all' });
    } finally {
      // Released with the session too, should the unlock itself fail.
      await lock.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
      await lock.release();
    }
    return dataSource;
  } catch (error) {
    await dataSource.destroy();
    throw error;
  }
}
