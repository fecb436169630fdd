import { Module } from '@nestjs/common';
import { ArtifactsModule } from '../artifacts/artifacts.module.js';
import { GradingModule } from '../grading/grading.module.js';
import { LedgerModule } from '../ledger/ledger.module.js';
import { processLauncher } from './agent-launcher.js';
import { getTask } from '../../tasks/index.js';
import { AGENT_LAUNCHER, randomRunIds, RUN_IDS, SANDBOX_PLANNER, TASK_CATALOG } from './run.ports.js';
import { sandboxPlan } from '../sandbox/capabilities.js';
import { RunService } from './run.service.js';

/**
 * Benchmark runs: workspace, sandbox, agent process, budget, orchestration. The lock files
 * (RUN_LOCKS), the settings and the clock come from the composition root (src/).
 */
@Module({
  imports: [LedgerModule, ArtifactsModule, GradingModule],
  providers: [RunService, { provide: RUN_IDS, useValue: randomRunIds }, { provide: AGENT_LAUNCHER, useValue: processLauncher }, { provide: TASK_CATALOG, useValue: getTask }, { provide: SANDBOX_PLANNER, useValue: sandboxPlan }],
  exports: [RunService],
})
export class RunsModule {}
