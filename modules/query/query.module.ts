import { Module } from '@nestjs/common';
import { ArtifactsModule } from '../artifacts/artifacts.module.js';
import { CampaignsModule } from '../campaigns/campaigns.module.js';
import { LedgerModule } from '../ledger/ledger.module.js';
import { ReadModelsModule } from '../readmodels/readmodels.module.js';
import { QueryController } from './query.controller.js';
import { LedgerRunSource, RunSource } from './run-source.js';

/** The read-only query API (runs, events, reports, scoreboard) and the RunSource the CLI shares. */
@Module({
  imports: [LedgerModule, ArtifactsModule, ReadModelsModule, CampaignsModule],
  controllers: [QueryController],
  providers: [{ provide: RunSource, useClass: LedgerRunSource }],
  exports: [RunSource],
})
export class QueryModule {}
