import { Module } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { ARTIFACT_STORE, ArtifactsModule } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { CampaignsModule } from '../campaigns/campaigns.module.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { LedgerModule } from '../ledger/ledger.module.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { QueryModule } from '../query/query.module.js';
import { ProjectionRunnerService, READ_MODELS, ReadModelsModule } from '../readmodels/readmodels.module.js';
import { ReplayService } from '../replay/replay.service.js';
import { AuditStatusController } from './audit-status.controller.js';
import { BlobsController } from './blobs.controller.js';
import { CampaignFeed } from './campaign-feed.js';
import { CampaignsController } from './campaigns.controller.js';
import { LedgerFeed } from './ledger-feed.js';
import { LiveController } from './live.controller.js';
import { ReplayController } from './replay.controller.js';
import { RunStream } from './run-stream.js';
import { RunsBroadcast } from './runs-broadcast.js';
import { StaticController } from './static.controller.js';
import { Verifications } from './verifications.js';

/**
 * The live web dashboard's server side: the built single page (dist/dashboard-web), Server-Sent
 * Events from the ledger, replay, campaigns and audit status. Its front end is modules/dashboard/web.
 * StaticController is registered last, so its routes never come before an API route.
 */
@Module({
  imports: [LedgerModule, ArtifactsModule, ReadModelsModule, QueryModule, CampaignsModule],
  controllers: [LiveController, ReplayController, BlobsController, CampaignsController, AuditStatusController, StaticController],
  providers: [
    LedgerFeed,
    CampaignFeed,
    RunStream,
    RunsBroadcast,
    Verifications,
    {
      provide: ReplayService,
      inject: [EVENT_STORE, READ_MODELS, ARTIFACT_STORE, ProjectionRunnerService],
      useFactory: (events: EventStore, readModels: DataSource, artifacts: ArtifactStore, projections: ProjectionRunnerService) =>
        new ReplayService({ events, readModels, artifacts, catchUp: () => projections.catchUp('workspace-revisions') }),
    },
  ],
})
export class DashboardModule {}
