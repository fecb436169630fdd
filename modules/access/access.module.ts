import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { processLauncher } from '../runs/agent-launcher.js';
import { CampaignsModule } from '../campaigns/campaigns.module.js';
import { GradingModule } from '../grading/grading.module.js';
import { LedgerModule } from '../ledger/ledger.module.js';
import { AccessControl } from './access-control.js';
import { AccessController } from './access.controller.js';
import { AccessGuard } from './access.guard.js';
import { AccessLedger } from './access-ledger.js';
import { HARNESS_SIGNALS, RunActionsController, TASK_LEVELS, type HarnessSignals, type TaskLevels } from './run-actions.controller.js';

const harnessSignals: HarnessSignals = {
  alive: (pid) => processLauncher.alive(pid),
  signal: (pid, signal) => process.kill(pid, signal),
  self: process.pid,
};

const taskLevels: TaskLevels = async () => {
  const { TASKS } = await import('../../tasks/index.js');
  return (task) => TASKS.find((t) => t.id === task)?.level ?? null;
};

/**
 * Who may look (docs/security.md): API tokens and the access stream, the global guard (required
 * beyond loopback), sign-in, and the operator's actions over HTTP (export, cancel, regrade, verify).
 * Needs the global adapters (EVENT_STORE, ARTIFACT_STORE, RUN_LOCKS, CLOCK, SETTINGS).
 */
@Module({
  imports: [LedgerModule, CampaignsModule, GradingModule],
  controllers: [AccessController, RunActionsController],
  providers: [AccessLedger, AccessControl, { provide: HARNESS_SIGNALS, useValue: harnessSignals },
    { provide: TASK_LEVELS, useValue: taskLevels }, { provide: APP_GUARD, useClass: AccessGuard }],
  exports: [AccessLedger, AccessControl],
})
export class AccessModule {}
