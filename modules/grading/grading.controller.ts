import { Body, Controller, Get, HttpCode, NotFoundException, Param, Post, ServiceUnavailableException, UnauthorizedException, UseFilters, UseGuards, UsePipes } from '@nestjs/common';
import { EnvResetDto, EnvStepDto, GradingBodyPipe, SetBaselineDto, SubmitDto } from './grading.dto.js';
import { GradingExceptionFilter } from './grading-exception.filter.js';
import { CurrentRun, OperatorGuard, RunTokenGuard } from './grading.guards.js';
import { EnvService, type EnvResetResponse, type EnvStepResponse } from './env.service.js';
import { type ActiveRun, RunRegistry } from './run-registry.js';
import { SubmissionService, type SubmitResponse } from './submission.service.js';

/** Each route is served plainly (bearer token) and under the capability prefix `/g/<token>`. */
const both = (route: string) => [route, `g/:token/${route}`];

/** The grading API the agent talks to, compatible with the paper's grading server. */
@Controller()
@UseFilters(GradingExceptionFilter)
@UsePipes(GradingBodyPipe)
export class GradingController {
  constructor(
    private readonly registry: RunRegistry,
    private readonly submissions: SubmissionService,
    private readonly env: EnvService,
  ) {}

  @Get('health')
  health(): { status: 'ok'; service: 'a2rl-grading' } {
    return { status: 'ok', service: 'a2rl-grading' };
  }

  /** Needs no credential beyond the URL itself; tells the agent which run the URL belongs to. */
  @Get('g/:token/health')
  runHealth(@Param('token') token: string): { status: 'ok'; service: 'a2rl-grading'; run_id: string; task: string } {
    const run = this.registry.byToken(token);
    if (!run) throw new UnauthorizedException('the token in this URL names no active run (the run may have ended)');
    return { status: 'ok', service: 'a2rl-grading', run_id: run.ctx.runId, task: run.ctx.task.id };
  }

  @Post(both('submit'))
  @HttpCode(200)
  @UseGuards(RunTokenGuard)
  submit(@CurrentRun() run: ActiveRun, @Body() body: SubmitDto): Promise<SubmitResponse> {
    return this.submissions.submit(run, body.model_path, body.gpu);
  }

  @Get(both('time'))
  @UseGuards(RunTokenGuard)
  time(@CurrentRun() run: ActiveRun): { elapsed_s: number; remaining_s: number; timeout_s: number; deadline: string } {
    const now = Date.now();
    return {
      elapsed_s: Math.max(0, Math.round((now - run.startedAt.getTime()) / 1000)),
      remaining_s: Math.max(0, Math.round((run.deadline.getTime() - now) / 1000)),
      timeout_s: run.ctx.budgetSeconds,
      deadline: run.deadline.toISOString(),
    };
  }

  @Post(both('set_baseline'))
  @HttpCode(200)
  @UseGuards(OperatorGuard)
  async setBaseline(@Body() body: SetBaselineDto): Promise<{ run_id: string; baseline_score: number }> {
    const run = this.registry.byRunId(body.run_id);
    if (!run) throw new NotFoundException(`no active run "${body.run_id}"`);
    try {
      await run.ctx.record('BaselineEvaluated', { score: body.score, cached: false, evaluatorVersion: 'operator' });
    } catch (err) {
      throw new ServiceUnavailableException(`the ledger could not record the new baseline: ${(err as Error).message}`);
    }
    run.baselineScore = body.score;
    return { run_id: run.ctx.runId, baseline_score: run.baselineScore };
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
