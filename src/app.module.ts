import { Module } from '@nestjs/common';
import { AccessModule } from '../modules/access/access.module.js';
import { AnalyticsModule } from '../modules/analytics/analytics.module.js';
import { RunActionsModule } from '../modules/run-actions/run-actions.module.js';
import { CampaignsModule } from '../modules/campaigns/campaigns.module.js';
import { DashboardModule } from '../modules/dashboard/dashboard.module.js';
import { ArtifactsModule } from '../modules/artifacts/artifacts.module.js';
import { GradingModule } from '../modules/grading/grading.module.js';
import { HealthModule } from '../modules/health/health.module.js';
import { LedgerModule } from '../modules/ledger/ledger.module.js';
import { QueryModule } from '../modules/query/query.module.js';
import { ReadModelsModule } from '../modules/readmodels/readmodels.module.js';
import { RunsModule } from '../modules/runs/runs.module.js';
import { AdaptersModule } from './composition.js';

/** The application: the composition root's adapters (global) and the feature modules that use them. */
@Module({
  imports: [AdaptersModule, LedgerModule, ArtifactsModule, ReadModelsModule, HealthModule, GradingModule, RunsModule, CampaignsModule, QueryModule, AccessModule, RunActionsModule, DashboardModule, AnalyticsModule],
})
export class AppModule {}
