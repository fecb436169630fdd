import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  BadRequestException, Body, ConflictException, Controller, HttpCode, HttpException, Inject, NotFoundException, NotImplementedException, Optional, Param, Post,
  StreamableFile,
} from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { BundleExportError, exportBundle } from '../audit/bundle/index.js';
import { loadPublicKey } from '../ledger/tree-head.js';
import { CampaignService } from '../campaigns/campaign.service.js';
import { RegradeRefusedError, RegradeService } from '../grading/regrade.service.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { RUN_LOCKS, type RunLocks } from '../ledger/run-locks.port.js';
import { SETTINGS, type Settings } from '../settings/settings.port.js';
import { AccessControl, type Identity } from '../access/access-control.js';
import { Caller, Role } from '../access/access.decorators.js';
import { RegradeBody, RUN_OR_CAMPAIGN_ID } from '../access/access.dto.js';
import { cancelRun, type CancelDeps } from './run-cancel.js';
import { checkRun, type RunCheck } from './run-check.js';

/** How this process signals a run's harness (a seam: tests do not signal real processes). */
export const HARNESS_SIGNALS = Symbol('HARNESS_SIGNALS');
export type HarnessSignals = Pick<CancelDeps, 'alive' | 'signal' | 'self'>;
/** A task's level for the bundle's report (the task registry, loaded when first needed). */
export const TASK_LEVELS = Symbol('TASK_LEVELS');
export type TaskLevels = () => Promise<(task: string) => number | null>;

/**
 * What an operator does to runs and campaigns over HTTP: export, cancel, regrade (operators), verify
 * (viewers too). Each is recorded in the access stream with who asked and the target, whether it
 * was done or not (for a known run or campaign).
 */
@ApiTags('access')
@Controller()
export class RunActionsController {
  constructor(
    private readonly access: AccessControl,
    private readonly campaigns: CampaignService,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(ARTIFACT_STORE) private readonly artifacts: ArtifactStore,
    @Inject(SETTINGS) private readonly settings: Settings,
    @Inject(RUN_LOCKS) private readonly locks: RunLocks,
    @Inject(HARNESS_SIGNALS) private readonly signals: HarnessSignals,
    @Inject(TASK_LEVELS) private readonly taskLevels: TaskLevels,
    // GradingModule's; absent where an app is built without it (the route then answers 501).
    @Optional() private readonly regrades?: RegradeService,
  ) {}

  /** The run's audit bundle (`a2rl export`), written to a scratch file, recorded, then streamed (a bundle that fails is not sent, nor recorded as sent). */
  @Post('runs/:id/export')
  @HttpCode(200)
  @Role('operator', 'export')
  async export(@Param('id') runId: string, @Caller() caller: Identity): Promise<StreamableFile> {
    checkId(runId);
    const key = loadPublicKey(this.settings.home);
    if (!key) throw new ConflictException('this ledger has no signing key, so a bundle could not be verified (a2rl keys init)');
    const taskLevel = await this.taskLevels();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-export-'));
    const file = path.join(dir, `${runId}.tar.gz`);
    try {
      const summary = await exportBundle({ runId, eventStore: this.store, artifacts: this.artifacts, publicKeyPem: key.publicKeyPem, taskLevel }, file).catch(async (err: unknown) => {
        if (!(err instanceof BundleExportError)) throw err;
        if (/^no run /.test(err.message)) throw new NotFoundException(err.message);
        await this.access.notDone(caller, 'export', { runId }, err.message);
        throw new ConflictException(err.message);
      });
      const { size } = await stat(file);
      const sha256 = await fileSha256(file);
      await this.access.recorded(caller, 'export', { runId }, { detail: `bundle of ${summary.events} events, ${size} bytes, sha256 ${sha256}, key id ${key.keyId}` });
      const stream = createReadStream(file);
      stream.once('close', () => void rm(dir, { recursive: true, force: true }));
      return new StreamableFile(stream, { type: 'application/gzip', disposition: `attachment; filename="${runId}.tar.gz"`, length: size });
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** A run started on its own whose harness holds its lock on this machine: that harness gets SIGINT (run-cancel.ts). */
  @Post('runs/:id/cancel')
  @HttpCode(202)
  @Role('operator', 'cancel')
  async cancel(@Param('id') runId: string, @Caller() caller: Identity): Promise<{ runId: string; pid: number; signal: 'SIGINT' }> {
    checkId(runId);
    const outcome = await cancelRun({ store: this.store, locks: this.locks, ...this.signals }, runId);
    if (!outcome.ok) {
      if (outcome.status === 404) throw new NotFoundException(outcome.reason);
      await this.access.notDone(caller, 'cancel', { runId }, outcome.reason);
      throw new ConflictException(outcome.reason);
    }
    await this.access.recorded(caller, 'cancel', { runId }, { detail: `SIGINT to harness pid ${outcome.pid}` });
    return { runId, pid: outcome.pid, signal: 'SIGINT' };
  }

  @Post('campaigns/:id/cancel')
  @HttpCode(200)
  @Role('operator', 'cancel')
  async cancelCampaign(@Param('id') campaignId: string, @Caller() caller: Identity): Promise<{ campaignId: string; status: string }> {
    checkId(campaignId);
    try {
      await this.campaigns.get(campaignId);
    } catch (err) {
      throw new NotFoundException((err as Error).message);
    }
    try {
      const progress = await this.campaigns.cancel(campaignId, `cancelled by ${caller.kind} ${caller.name} over HTTP`);
      await this.access.recorded(caller, 'cancel', { campaignId });
      return { campaignId, status: progress.status };
    } catch (err) {
      if ((err as Error).name !== 'CampaignRuleError') throw err;
      await this.access.notDone(caller, 'cancel', { campaignId }, (err as Error).message);
      throw new ConflictException((err as Error).message);
    }
  }

  /** The checks of `a2rl verify` run now (run-check.ts: a run still open has its chain checked); the outcome is recorded (what the audit page shows as last verified). */
  @Post('runs/:id/verify')
  @HttpCode(200)
  @Role('viewer', 'verify')
  async verify(@Param('id') runId: string, @Caller() caller: Identity): Promise<RunCheck> {
    checkId(runId);
    const publicKeyPem = loadPublicKey(this.settings.home)?.publicKeyPem ?? null;
    const result = await checkRun({ store: this.store, artifacts: this.artifacts, publicKeyPem, taskCacheDir: path.join(this.settings.home, 'tasks') }, runId);
    if (!result) throw new NotFoundException(`no run "${runId}"`);
    const first = result.failures[0];
    const artifacts = result.artifacts === null ? '' : `, ${result.artifacts} artifacts`;
    const detail = result.ok ? `${result.events} events, ${result.treeHeads} signed heads${artifacts}${result.sealed ? '' : ', run still open'}` : `${result.failureCount} failures; first: ${first.message}`;
    await this.access.recorded(caller, 'verify', { runId }, { verified: result.ok, detail });
    return result;
  }

  @Post('runs/:id/regrade')
  @HttpCode(200)
  @Role('operator', 'regrade')
  async regrade(@Param('id') runId: string, @Body() body: RegradeBody, @Caller() caller: Identity): Promise<unknown> {
    checkId(runId);
    const regrader = this.regrades;
    if (!regrader) throw new NotImplementedException('this a2rl has no regrade service');
    if ((await this.store.streamRevision(streamName(runId))) === null) throw new NotFoundException(`no run "${runId}"`);
    const repeat = body.repeat ?? 1;
    try {
      const result = await regrader.regrade(runId, { repeat, ...(body.submissions ? { submissions: body.submissions } : {}) });
      await this.access.recorded(caller, 'regrade', { runId }, { detail: `repeat ${repeat}${body.submissions ? `, submissions ${body.submissions.join(',')}` : ''}` });
      return result;
    } catch (err) {
      if (err instanceof HttpException) throw err;
      const message = (err as Error).message.split('\n')[0];
      await this.access.notDone(caller, 'regrade', { runId }, message);
      if (err instanceof RegradeRefusedError) throw new HttpException(message, err.status);
      throw new ConflictException(message);
    }
  }
}

function checkId(id: string): void {
  if (!RUN_OR_CAMPAIGN_ID.test(id)) throw new BadRequestException(`"${id.slice(0, 130)}" is not a run or campaign id`);
}


async function fileSha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
