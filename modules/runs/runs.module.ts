import { Module } from '@nestjs/common';
import { ArtifactsModule } from '../artifacts/artifacts.module.js';
import { GradingModule } from '../grading/grading.module.js';
import { LedgerModule } from '../ledger/ledger.module.js';
import { RunService } from './run.service.js';

/** Benchmark runs: workspace, sandbox, agent process, budget, instrumentation, orchestration. */
@Module({
  imports: [LedgerModule, ArtifactsModule, GradingModule],
  providers: [RunService],
  exports: [RunService],
})
export class RunsModule {}
