import { openArtifactStore } from '../infra/artifacts/open-artifact-store.js';
import { openEventStore } from '../infra/eventstore/open-event-store.js';
import type { ArtifactStore } from '../modules/artifacts/artifact-store.port.js';
import type { EventStore } from '../modules/ledger/event-store.port.js';
import type { Settings } from '../modules/settings/settings.port.js';
import { openFailure, type OpenTarget } from './config/open-errors.js';

// The ledger and the artifact store, opened from the settings without Nest (composition.ts provides
// them to the app; commands that need only these two import them from here and start faster).

/** The ledger the settings name (SQLite, PostgreSQL, KurrentDB, or in-memory). */
export function openLedger(settings: Pick<Settings, 'ledgerUrl'>): Promise<EventStore> {
  return opening({ variable: 'A2RL_LEDGER_URL', what: 'ledger', url: settings.ledgerUrl }, openEventStore);
}

/** The artifact store the settings name (filesystem or S3/MinIO). */
export function openArtifacts(settings: Pick<Settings, 'artifactsUrl'>): Promise<ArtifactStore> {
  return opening({ variable: 'A2RL_ARTIFACTS_URL', what: 'artifact store', url: settings.artifactsUrl }, openArtifactStore);
}


/**
 * Opens what `target.url` names; an adapter's failure becomes one OpenError line naming the
 * variable and what to do (src/cli.ts: exit 2, the adapter's stack only with A2RL_DEBUG=1).
 */
export async function opening<T>(target: OpenTarget, open: (url: string) => Promise<T>): Promise<T> {
  try {
    return await open(target.url);
  } catch (err) {
    throw openFailure(target, err);
  }
}

