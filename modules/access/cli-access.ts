import os from 'node:os';
import type { AccessAction, EventData } from '../ledger/events/catalog.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { AccessStreamLedger } from './access-stream.js';

// The access trail of what an operator does from the command line on the ledger's host: `a2rl
// verify`, `export`, `regrade` and `campaign cancel` are recorded in the access stream like the same
// actions over HTTP, with a `cli` actor naming the OS user. The CLI has no token: whoever can run
// it can read the ledger's files, so the record says who did what, not who was allowed to.

/** Details are cut to what AccessRecorded keeps. */
const MAX_DETAIL = 1000;

/** The OS user running this process (its uid when the name cannot be read). */
export function cliUser(): string {
  try {
    return os.userInfo().username || `uid ${process.getuid?.() ?? '?'}`;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}

/** The `cli` actor: id and name are the OS user (kept to the 200 characters an actor holds). */
export function cliActor(user = cliUser()): EventData<'AccessRecorded'>['actor'] {
  const name = user.slice(0, 200) || 'unknown';
  return { kind: 'cli', id: name, name };
}

export interface CliAccessRecord {
  action: Extract<AccessAction, 'verify' | 'export' | 'regrade' | 'cancel'>;
  target: { runId?: string; campaignId?: string };
  /** Whether the action was carried out (a verification that found failures was carried out). */
  done: boolean;
  /** For verify: whether the run verified. */
  verified?: boolean;
  detail?: string;
}

/**
 * Appends one AccessRecorded for a CLI action: outcome 'ok' when it was done, else 'refused' with
 * why in `detail` (an export that failed, a regrade refused), as the HTTP side records what it did
 * not do (AccessControl.notDone).
 */
export async function recordCliAccess(store: EventStore, record: CliAccessRecord, clock: () => Date = () => new Date()): Promise<void> {
  const detail = record.detail === undefined ? undefined : record.detail.length > MAX_DETAIL ? `${record.detail.slice(0, MAX_DETAIL - 1)}…` : record.detail;
  await new AccessStreamLedger(store, clock).record({
    actor: cliActor(),
    action: record.action,
    target: record.target,
    outcome: record.done ? 'ok' : 'refused',
    ...(record.verified === undefined ? {} : { verified: record.verified }),
    ...(detail === undefined ? {} : { detail }),
  });
}
