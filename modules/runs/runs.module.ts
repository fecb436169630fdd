import { Module } from '@nestjs/common';
import { ArtifactsModule } from '../artifacts/artifacts.module.js';
import { GradingModule } from '../grading/grading.module.js';
import { LedgerModule } from '../ledger/ledger.module.js';
import { processLauncher } from './agent-launcher.js';
import { getTask } from '../../tasks/index.js';
import { AGENT_LAUNCHER, DIAGNOSTICS, ENVIRONMENT, randomRunIds, RUN_IDS, SANDBOX_PLANNER, TASK_CATALOG, type Diagnostics } from './run.ports.js';
import { sandboxPlan } from '../sandbox/capabilities.js';
import { RunService } from './run.service.js';

/** What a person should know about a run, on the harness's stderr. */
const stderrDiagnostics: Diagnostics = { warn: (message) => void process.stderr.write(`${message}\n`) };

/**
 * Benchmark runs: workspace, sandbox, agent process, budget, orchestration. The lock files
 * (RUN_LOCKS), the settings and the clock come from the composition root (src/); the process's
 * environment and stderr are provided here (ENVIRONMENT, DIAGNOSTICS), read nowhere else in the run pipeline.
 */
@Module({
  imports: [LedgerModule, ArtifactsModule, GradingModule],
  providers: [
    RunService,
    { provide: RUN_IDS, useValue: randomRunIds },
    { provide: AGENT_LAUNCHER, useValue: processLauncher },
    { provide: TASK_CATALOG, useValue: getTask },
    { provide: SANDBOX_PLANNER, useValue: sandboxPlan },
    { provide: ENVIRONMENT, useValue: process.env },
    { provide: DIAGNOSTICS, useValue: stderrDiagnostics },
  ],
  exports: [RunService],
})
export class RunsModule {}
