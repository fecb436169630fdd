import { Body, Controller, Get, HttpCode, Inject, NotFoundException, Param, Post, ServiceUnavailableException, UnauthorizedException, UseFilters, UseGuards, UsePipes } from '@nestjs/common';
import { Public } from '../access/access.decorators.js';
import type { RunMetaFields } from '../workspace-fs/layout.js';
import { EnvResetDto, EnvStepDto, GradingBodyPipe, SetBaselineDto, SubmitDto } from './grading.dto.js';
import { GradingExceptionFilter } from './grading-exception.filter.js';
import { GRADING_OPTIONS, type GradingOptions } from './grading.options.js';
import { CurrentRun, OperatorGuard, RunTokenGuard } from './grading.guards.js';
import { EnvService, type EnvResetResponse, type EnvStepResponse } from './env.service.js';
import { type ActiveRun, RunRegistry } from './run-registry.js';
import { SubmissionService, type SubmitResponse } from './submission.service.js';

interface ServerHealth {
  status: 'ok';
  service: 'a2rl-grading';
  /** GPU ids `gpu` may name (the paper's field). */
  available_gpus: string[];
}

/** The paper's health answer (task, workspace, available_gpus) plus a2rl's service and run_id. */
interface RunHealth extends ServerHealth {
  run_id: string;
  task: string;
  workspace: string;
}

/** run_meta.json's fields (epoch seconds) with the paper's `now`/`remaining` and a2rl's own. */
interface TimeResponse extends RunMetaFields {
  now: number;
  /** Whole seconds, max(timeout_s − (now − start_time), 0). */
  remaining: number;
  elapsed_s: number;
  remaining_s: number;
  timeout_s: number;
  deadline: string;
}

/** Each route is served plainly (bearer token) and under the capability prefix `/g/<token>`. */
const both = (route: string) => [route, `g/:token/${route}`];

/** The grading API the agent talks to, compatible with the paper's grading server. */
// The agent's API: its own per-run token (RunTokenGuard), never an a2rl API token (modules/access).
@Public()
@Controller()
@UseFilters(GradingExceptionFilter)
@UsePipes(GradingBodyPipe)
export class GradingController {
  constructor(
    private readonly registry: RunRegistry,
    private readonly submissions: SubmissionService,
    private readonly env: EnvService,
    @Inject(GRADING_OPTIONS) private readonly options: GradingOptions,
  ) {}

  @Get('health')
  health(): ServerHealth {
    return { status: 'ok', service: 'a2rl-grading', available_gpus: this.options.availableGpus };
  }

  /** Needs no credential beyond the URL itself; tells the agent which run the URL belongs to. */
  @Get('g/:token/health')
  runHealth(@Param('token') token: string): RunHealth {
    const run = this.registry.byToken(token);
    if (!run) throw new UnauthorizedException('the token in this URL names no active run (the run may have ended)');
    return { ...this.health(), available_gpus: run.ctx.gpus ?? this.options.availableGpus, run_id: run.ctx.runId, task: run.ctx.task.id, workspace: run.ctx.workspace.root };
  }

  @Post(both('submit'))
  @HttpCode(200)
  @UseGuards(RunTokenGuard)
  submit(@CurrentRun() run: ActiveRun, @Body() body: SubmitDto): Promise<SubmitResponse> {
    return this.submissions.submit(run, body.model_path, body.gpu);
  }

  /** The paper's run_meta.json plus `now` and `remaining`, and a2rl's elapsed/remaining from the submission deadline. */
  @Get(both('time'))
  @UseGuards(RunTokenGuard)
  time(@CurrentRun() run: ActiveRun): TimeResponse {
    const nowMs = Date.now();
    const meta = run.runMeta();
    const now = nowMs / 1000;
    const start = meta.start_time ?? run.startedAt.getTime() / 1000;
    const timeout = meta.timeout_s ?? run.ctx.budgetSeconds;
    return {
      ...meta,
      now,
      remaining: Math.max(0, Math.floor(timeout - (now - start))),
      elapsed_s: Math.max(0, Math.round((nowMs - run.startedAt.getTime()) / 1000)),
      remaining_s: Math.max(0, Math.round((run.deadline.getTime() - nowMs) / 1000)),
      timeout_s: timeout,
      deadline: run.deadline.toISOString(),
    };
  }

  @Post(both('set_baseline'))
  @HttpCode(200)
  @UseGuards(OperatorGuard)
  async setBaseline(@Body() body: SetBaselineDto): Promise<{ run_id: string; baseline_score: number; status: 'set' }> {
    const run = this.registry.byRunId(body.run_id);
    if (!run) throw new NotFoundException(`no active run "${body.run_id}"`);
    try {
      await run.ctx.record('BaselineEvaluated', { score: body.score, cached: false, evaluatorVersion: 'operator' });
    } catch (err) {
      throw new ServiceUnavailableException(`the ledger could not record the new baseline: ${(err as Error).message}`);
    }
    run.baselineScore = body.score;
    return { run_id: run.ctx.runId, baseline_score: run.baselineScore, status: 'set' };
  }

  @Post(both('env/reset'))
  @HttpCode(200)
  @UseGuards(RunTokenGuard)
  envReset(@CurrentRun() run: ActiveRun, @Body() body: EnvResetDto): Promise<EnvResetResponse> {
    return this.env.reset(run, body.seed);
  }

  @Post(both('env/step'))
  @HttpCode(200)
  @UseGuards(RunTokenGuard)
  envStep(@CurrentRun() run: ActiveRun, @Body() body: EnvStepDto): Promise<EnvStepResponse> {
    return this.env.step(run, body.session_id, body.action);
  }
}
