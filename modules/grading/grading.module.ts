import path from 'node:path';
import { Module } from '@nestjs/common';
import { SETTINGS, type Settings } from '../settings/settings.port.js';
import { BaselineCache } from './baseline-cache.js';
import { EnvService } from './env.service.js';
import { GradingSockets } from './grading-sockets.js';
import { GradingController } from './grading.controller.js';
import { detectAvailableGpus } from './gpus.js';
import { DEFAULT_GRADING_OPTIONS, GRADING_OPTIONS, type GradingOptions, loadOrCreateOperatorToken, OPERATOR_TOKEN } from './grading.options.js';
import { OperatorGuard, RunTokenGuard } from './grading.guards.js';
import { RegradeService } from './regrade.service.js';
import { RunRegistry } from './run-registry.js';
import { SubmissionService } from './submission.service.js';

/**
 * The grading API. Runs are served once registered with RunRegistry (the run orchestrator does
 * that with the run's RunContext). Needs SETTINGS (provided globally by the app shell); OPERATOR_TOKEN and
 * GRADING_OPTIONS can be overridden. The app must be set up with configureGradingHttp().
 */
@Module({
  controllers: [GradingController],
  providers: [
    RunRegistry,
    SubmissionService,
    RegradeService,
    EnvService,
    GradingSockets,
    RunTokenGuard,
    OperatorGuard,
    {
      provide: GRADING_OPTIONS,
      inject: [SETTINGS],
      useFactory: (config: Settings): GradingOptions => ({
        ...DEFAULT_GRADING_OPTIONS,
        stagingDir: path.join(config.home, 'grading-staging'),
        availableGpus: detectAvailableGpus(),
      }),
    },
    { provide: OPERATOR_TOKEN, inject: [SETTINGS], useFactory: (config: Settings) => loadOrCreateOperatorToken(config.home) },
    { provide: BaselineCache, inject: [SETTINGS], useFactory: (config: Settings) => new BaselineCache(path.join(config.home, 'baselines.json')) },
  ],
  exports: [RunRegistry, BaselineCache, OPERATOR_TOKEN, GradingSockets, RegradeService],
})
export class GradingModule {}
