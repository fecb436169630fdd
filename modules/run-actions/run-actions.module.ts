import { Module } from '@nestjs/common';
import { AccessModule } from '../access/access.module.js';
import { CampaignsModule } from '../campaigns/campaigns.module.js';
import { GradingModule } from '../grading/grading.module.js';
import { LedgerModule } from '../ledger/ledger.module.js';
import { processLauncher } from '../runs/agent-launcher.js';
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
 * The operator's actions on a run or campaign over HTTP (export, cancel, regrade, verify), each
 * allowed by a role and recorded in the access stream (AccessControl, modules/access/). Kept out of
 * the access room, which every room's controllers import for their decorators, so that the rooms
 * these actions call (grading, audit, campaigns) never import back into it. Needs the global
 * adapters (EVENT_STORE, ARTIFACT_STORE, RUN_LOCKS, CLOCK, SETTINGS).
 */
@Module({
  imports: [LedgerModule, AccessModule, CampaignsModule, GradingModule],
  controllers: [RunActionsController],
  providers: [{ provide: HARNESS_SIGNALS, useValue: harnessSignals }, { provide: TASK_LEVELS, useValue: taskLevels }],
})
export class RunActionsModule {}
