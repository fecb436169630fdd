import { Controller, Get, HttpException, HttpStatus, Inject } from '@nestjs/common';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { EVENT_STORE } from '../ledger/tokens.js';

const PROBE_SHA = '0'.repeat(64);

/** Liveness plus a cheap round trip to each backing store, so "ok" means the ledger is usable. */
@Controller()
export class HealthController {
  constructor(
    @Inject(EVENT_STORE) private readonly events: EventStore,
    @Inject(ARTIFACT_STORE) private readonly artifacts: ArtifactStore,
  ) {}

  @Get('health')
  async health(): Promise<{ status: 'ok'; ledger: string; artifacts: string }> {
    try {
      await this.events.streamRevision('run-health-probe');
      await this.artifacts.exists(PROBE_SHA);
    } catch (err) {
      throw new HttpException(
        { status: 'unavailable', error: err instanceof Error ? err.message : String(err) },
        HttpStatus.SERVICE_UNAVAILABLE,
      );
    }
    return { status: 'ok', ledger: this.events.backend, artifacts: this.artifacts.backend };
  }
}
