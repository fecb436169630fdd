import type { DataSource } from 'typeorm';
import type { RunAnalysis } from '../../../projections/run-analysis/analysis.types.js';
import type { artifactBlobReader } from '../../../projections/blob-reader.js';
import { RunAnalysisRow } from '../../../projections/run-analysis/run-analysis.entity.js';
import type { EventStore } from '../../ledger/event-store.port.js';
import type { A2rlEvent } from '../../ledger/events/catalog.js';
import { RunSource } from '../../query/run-source.js';

/** The run as the live read models have it (as `a2rl report` reads it). */
export class LiveRunSource extends RunSource {
  constructor(private readonly db: DataSource, private readonly store: EventStore, readonly blobs: ReturnType<typeof artifactBlobReader>) {
    super();
  }
  async runs(): Promise<RunAnalysis[]> {
    return (await this.db.getRepository(RunAnalysisRow).find()).map((r) => JSON.parse(r.analysis) as RunAnalysis);
  }
  async run(runId: string): Promise<RunAnalysis | null> {
    const row = await this.db.getRepository(RunAnalysisRow).findOneBy({ runId });
    return row ? (JSON.parse(row.analysis) as RunAnalysis) : null;
  }
  async events(runId: string): Promise<A2rlEvent[]> {
    const out: A2rlEvent[] = [];
    for await (const r of this.store.readStream(`run-${runId}`)) out.push(r.event);
    return out;
  }
}
