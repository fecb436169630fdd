import type { EventStore } from '../ledger/event-store.port.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { CampaignLedger } from '../campaigns/campaign-ledger.js';
import type { TableData } from './table-schemas.js';
import { analysisTables, EventRows } from './tables.js';

/** Where the built-in tables come from: the run analyses (read models, caught up) and the ledger. */
export interface TableSources {
  runs(): Promise<RunAnalysis[]>;
  store: EventStore;
}

/**
 * The built-in tables, for every run or for the runs a campaign accepted (one per completed cell ×
 * seed, as `a2rl scoreboard --campaign` counts them). Throws naming an unknown campaign.
 */
export async function collectTables(sources: TableSources, options: { campaign?: string } = {}): Promise<TableData[]> {
  let keep: ((runId: string) => boolean) | undefined;
  if (options.campaign !== undefined) {
    const accepted = await new CampaignLedger(sources.store, () => new Date()).acceptedRunIds(options.campaign);
    if (!accepted) throw new Error(`no campaign "${options.campaign}" in the ledger`);
    keep = (runId) => accepted.has(runId);
  }
  const analyses = (await sources.runs()).filter((a) => !keep || keep(a.runId));
  const events = new EventRows(keep);
  for await (const recorded of sources.store.readAll({ category: 'run' })) events.add(recorded);
  return [...analysisTables(analyses, events.scheduled), events.table()];
}
