import { Inject, Injectable } from '@nestjs/common';
import type { EventStore } from '../ledger/event-store.port.js';
import { LedgerService } from '../ledger/ledger.service.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { ProjectionRunnerService } from '../readmodels/readmodels.module.js';
import { StoreRunSource } from './run-reading.js';

// The run source as the Nest app provides it (QueryModule); what it does lives in run-reading.ts,
// which the CLI's read-only commands import without Nest.

export { RunSource, StoreRunSource, readEventPage, runEventsFrom, type EventPageQuery, type RunAnalysesReader } from './run-reading.js';

/** StoreRunSource over the app's projections (caught up on each read), ledger and artifact store. */
@Injectable()
export class LedgerRunSource extends StoreRunSource {
  constructor(
    projections: ProjectionRunnerService,
    // Kept for the injection signature (specs and benches build it with these four).
    _ledger: LedgerService,
    @Inject(ARTIFACT_STORE) artifacts: ArtifactStore,
    @Inject(EVENT_STORE) store: EventStore,
  ) {
    super(projections, store, artifacts);
  }
}
