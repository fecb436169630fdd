import { Inject, Module, type OnApplicationShutdown } from '@nestjs/common';
import { openEventStore } from '../../infra/eventstore/open-event-store.js';
import { A2RL_CONFIG } from '../../src/config/config.module.js';
import type { A2rlConfig } from '../../src/config/config.js';
import type { EventStore } from './event-store.port.js';
import { LedgerService } from './ledger.service.js';
import { CLOCK, EVENT_STORE } from './tokens.js';

@Module({
  providers: [
    { provide: EVENT_STORE, inject: [A2RL_CONFIG], useFactory: (config: A2rlConfig) => openEventStore(config.ledgerUrl) },
    { provide: CLOCK, useValue: () => new Date() },
    LedgerService,
  ],
  exports: [EVENT_STORE, LedgerService],
})
export class LedgerModule implements OnApplicationShutdown {
  constructor(@Inject(EVENT_STORE) private readonly store: EventStore) {}

  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}
