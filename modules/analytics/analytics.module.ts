import { Module } from '@nestjs/common';
import { AccessModule } from '../access/access.module.js';
import { QueryModule } from '../query/query.module.js';
import { SqlController } from './sql.controller.js';
import { UserProjectionTables } from './user-projection-tables.js';

/**
 * SQL over the read models and the ledger for operators (GET /query) and the user projections kept
 * live by `a2rl serve` (docs/analysis.md). Needs the global adapters (EVENT_STORE, SETTINGS, CLOCK).
 */
@Module({
  imports: [QueryModule, AccessModule],
  controllers: [SqlController],
  providers: [UserProjectionTables],
  exports: [UserProjectionTables],
})
export class AnalyticsModule {}
