import type { CliAccessRecord } from '../../modules/access/cli-access.js';
import type { EventStore } from '../../modules/ledger/event-store.port.js';
import type { A2rlConfig } from '../config/config.js';

// `a2rl verify`, `export`, `regrade` and `campaign cancel` leave an access record (modules/access/cli-access.ts):
// who (the OS user, actor kind `cli`), what, on which run or campaign, and how it went.

/** Ids the access stream's targets hold (AccessTarget); anything else names no run that could be recorded. */
const TARGET_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * Records a CLI action in the access stream, in `store` or else in the ledger the settings name
 * (opened for it and closed). A record that cannot be written is a warning on stderr: the action's
 * own outcome (a verification's verdict, a written bundle) stands and is reported as usual.
 */
export async function recordCliAction(config: Pick<A2rlConfig, 'ledgerUrl'>, record: CliAccessRecord, store?: EventStore): Promise<void> {
  const id = record.target.runId ?? record.target.campaignId;
  if (id === undefined || !TARGET_ID.test(id)) return;
  try {
    const { recordCliAccess } = await import('../../modules/access/cli-access.js');
    if (store) {
      await recordCliAccess(store, record);
      return;
    }
    const { openLedger } = await import('../open-stores.js');
    const ledger = await openLedger(config);
    try {
      await recordCliAccess(ledger, record);
    } finally {
      await ledger.close();
    }
  } catch (err) {
    process.stderr.write(`a2rl: warning: this ${record.action} is not in the access stream: ${(err as Error).message.split('\n')[0]}\n`);
  }
}
