import type { EventStore } from '../ledger/event-store.port.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { CampaignLedger } from '../campaigns/campaign-ledger.js';
import { streamName } from '../ledger/events/ids.js';
import type { TableRun } from './analysis-tables.js';
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

/**
 * The runs a campaign accepted, as the analysis tables read them: each analysis with RunScheduled's
 * seed (the first event of its stream) and its task's level (`levelOf`, from the task registry).
 */
export async function campaignTableRuns(sources: TableSources, campaignId: string, levelOf: (task: string | null) => string | null): Promise<TableRun[]> {
  const accepted = await new CampaignLedger(sources.store, () => new Date()).acceptedRunIds(campaignId);
  if (!accepted) throw new Error(`no campaign "${campaignId}" in the ledger`);
  const out: TableRun[] = [];
  for (const a of await sources.runs()) {
    if (!accepted.has(a.runId)) continue;
    let seed: number | null = null;
    for await (const r of sources.store.readStream(streamName(a.runId), { maxCount: 1 })) if (r.event.type === 'RunScheduled') seed = r.event.data.seed;
    out.push({ ...a, seed, level: levelOf(a.task) });
  }
  return out;
}
