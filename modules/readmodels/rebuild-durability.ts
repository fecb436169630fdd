import type BetterSqlite3 from 'better-sqlite3';
import type { DataSource } from 'typeorm';

/** Runs `work` between transactions on the DataSource (the runner's per-DataSource queue). */
export type Serialized = <T>(work: () => Promise<T> | T) => Promise<T>;

/** Per SQLite connection: rebuilds running with fsyncs off, and the setting to put back after the last. */
const relaxed = new WeakMap<BetterSqlite3.Database, { rebuilds: number; synchronous: number }>();

/**
 * Runs a from-zero rebuild with SQLite's fsyncs off (`synchronous = OFF`), then restores the
 * connection's setting. Fair for a rebuild only: everything it writes can be written again from the
 * ledger, and each batch still commits its rows with its checkpoint (a crashed process loses
 * nothing the OS was handed). What OFF risks is the read-model file itself on power loss mid-rebuild;
 * that file holds nothing the ledger cannot rebuild. The ledger is another database and keeps its own
 * settings: appends stay as durable as ever. Other writers sharing this connection meanwhile (live
 * projections of the same process) run with fsyncs off too, until the last rebuild ends.
 * PostgreSQL read models already commit with synchronous_commit off: nothing to do there.
 */
export async function withRebuildDurability<T>(dataSource: DataSource, serialized: Serialized, work: () => Promise<T>): Promise<T> {
  const connection = sqliteConnection(dataSource);
  if (!connection) return work();
  // SQLite refuses to change the setting inside a transaction: done between the runner's ones.
  await serialized(() => relax(connection));
  try {
    return await work();
  } finally {
    await serialized(() => restore(connection));
  }
}

function sqliteConnection(dataSource: DataSource): BetterSqlite3.Database | null {
  if (dataSource.driver.options.type !== 'better-sqlite3') return null;
  return (dataSource.driver as unknown as { databaseConnection: BetterSqlite3.Database }).databaseConnection;
}

function relax(connection: BetterSqlite3.Database): void {
  const state = relaxed.get(connection);
  if (state) {
    state.rebuilds += 1;
    return;
  }
  const synchronous = connection.pragma('synchronous', { simple: true }) as number;
  try {
    connection.pragma('synchronous = OFF');
  } catch {
    return; // a transaction not the runner's is open on the connection: the rebuild just keeps the fsyncs
  }
  relaxed.set(connection, { rebuilds: 1, synchronous });
}

function restore(connection: BetterSqlite3.Database): void {
  const state = relaxed.get(connection);
  if (!state || --state.rebuilds > 0) return;
  relaxed.delete(connection);
  if (connection.open) connection.pragma(`synchronous = ${state.synchronous}`);
}
