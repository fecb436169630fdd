import { Module } from '@nestjs/common';
import { LedgerService } from './ledger.service.js';

/**
 * The ledger: LedgerService over the EventStore port. The store itself (EVENT_STORE) and the
 * clock (CLOCK) are provided globally by the app's composition root (src/composition.ts), which
 * opens the adapter the settings name and closes it at shutdown.
 */
@Module({
  providers: [LedgerService],
  exports: [LedgerService],
})
export class LedgerModule {}
