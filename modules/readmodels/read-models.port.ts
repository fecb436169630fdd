import type { DataSource } from 'typeorm';

/**
 * The read-model port: opens TypeORM data sources, migrated and ready. Which database (SQLite,
 * PostgreSQL) and how it is migrated is the adapter's business (infra/readmodels), chosen by the
 * composition root. Whoever opens a data source owns it and destroys it.
 */
export interface ReadModelStores {
  /** The configured read models: what `a2rl runs`, reports and the query API read. */
  open(): Promise<DataSource>;
  /**
   * A new, empty store in `dir` (a directory the caller owns), for rebuilding projections from
   * zero beside the live ones (`a2rl verify`); nothing else ever reads it.
   */
  openScratch(dir: string): Promise<DataSource>;
}

/** Injection token of the ReadModelStores. */
export const READ_MODEL_STORES = Symbol('READ_MODEL_STORES');

/** Injection token of the live read models' DataSource (opened by ReadModelsModule through the port). */
export const READ_MODELS = Symbol('READ_MODELS');
