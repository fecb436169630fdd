import { sqlitePath } from '../../modules/settings/store-url.js';
import type { EventStore } from '../../modules/ledger/event-store.port.js';

/** Opens the event store adapter a ledger URL names (see docs/operations.md for the URL forms). */
export async function openEventStore(url: string): Promise<EventStore> {
  const scheme = url.slice(0, url.indexOf(':'));
  switch (scheme) {
    case 'sqlite': {
      const { SqliteEventStore } = await import('./sqlite-event-store.js');
      return SqliteEventStore.open(sqlitePath(url));
    }
    case 'postgres':
    case 'postgresql': {
      const { PostgresEventStore } = await import('./postgres-event-store.js');
      return PostgresEventStore.open(url);
    }
    case 'kurrentdb':
    case 'kurrentdb+discover':
    case 'esdb':
    case 'esdb+discover': {
      const { KurrentDbEventStore } = await import('./kurrentdb-event-store.js');
      return KurrentDbEventStore.open(url);
    }
    case 'memory': {
      // `memory://<name>`: one ledger per name in this process; nothing is kept after it exits.
      const { openMemoryEventStore } = await import('./memory-event-store.js');
      return openMemoryEventStore(url.replace(/^memory:(\/\/)?/, ''));
    }
    default:
      throw new Error(`unsupported ledger URL scheme "${scheme}"`);
  }
}
