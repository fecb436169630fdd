import { Inject, Injectable } from '@nestjs/common';
import type { EventStore } from '../ledger/event-store.port.js';
import { CLOCK, EVENT_STORE, type Clock } from '../ledger/tokens.js';
import { AccessStreamLedger } from './access-stream.js';

export type { CreatedToken, SecretCheck } from './access-stream.js';

/** The access stream (access-stream.ts) as the app injects it. */
@Injectable()
export class AccessLedger extends AccessStreamLedger {
  constructor(@Inject(EVENT_STORE) store: EventStore, @Inject(CLOCK) clock: Clock) {
    super(store, clock);
  }
}
