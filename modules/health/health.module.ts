import { Module } from '@nestjs/common';
import { ArtifactsModule } from '../artifacts/artifacts.module.js';
import { LedgerModule } from '../ledger/ledger.module.js';
import { HealthController } from './health.controller.js';

@Module({ imports: [LedgerModule, ArtifactsModule], controllers: [HealthController] })
export class HealthModule {}
