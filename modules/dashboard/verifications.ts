import { Inject, Injectable } from '@nestjs/common';
import type { EventStore } from '../ledger/event-store.port.js';
import { EVENT_STORE } from '../ledger/tokens.js';

/** The last recorded verification of a run: when, whether the chain verified, and who asked. */
export interface LastVerified {
  time: string;
  ok: boolean;
  actor: string;
}

/** The access stream (dash-auth's: modules/access); read by name so this module does not depend on it. */
const ACCESS_LOG = 'access-log';

/**
 * Each run's last verification as the access stream records it (AccessRecorded, action `verify`,
 * outcome `ok`). The stream is read once and then only from where the last read stopped.
 */
@Injectable()
export class Verifications {
  private readonly last = new Map<string, LastVerified>();
  private next = 0n;
  private reading: Promise<void> | null = null;

  constructor(@Inject(EVENT_STORE) private readonly store: EventStore) {}

  async lastOf(runId: string): Promise<LastVerified | null> {
    await (this.reading ??= this.readNew().finally(() => (this.reading = null)));
    return this.last.get(runId) ?? null;
  }

  private async readNew(): Promise<void> {
    for await (const { event, revision } of this.store.readStream(ACCESS_LOG, { fromRevision: this.next })) {
      this.next = revision + 1n;
      if (event.type !== 'AccessRecorded') continue;
      const d = event.data;
      if (d.action !== 'verify' || d.outcome !== 'ok' || !d.target?.runId) continue;
      this.last.set(d.target.runId, { time: event.occurredAt, ok: d.verified === true, actor: d.actor.name });
    }
  }
}
