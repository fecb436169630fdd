import type { IncomingHttpHeaders } from 'node:http';
import {
  type CanActivate,
  createParamDecorator,
  type ExecutionContext,
  ForbiddenException,
  Inject,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';
import { OPERATOR_TOKEN } from './grading.options.js';
import { bearerToken } from '../access/bearer-token.js';
import { type ActiveRun, RunRegistry, tokensEqual } from './run-registry.js';

interface GradingRequest {
  params: Record<string, string | undefined>;
  headers: IncomingHttpHeaders;
  gradingRun?: ActiveRun;
}

const HOW_TO_AUTHENTICATE =
  'call the grading API through $GRADING_SERVER_URL (it carries the run token) or send "Authorization: Bearer $A2RL_RUN_TOKEN"';

function unauthorized(message: string): UnauthorizedException {
  return new UnauthorizedException({ statusCode: 401, error: 'Unauthorized', message });
}

/**
 * Finds the run a request acts for: the token in the capability path `/g/<token>/…` and/or the
 * bearer token. A missing or unknown token, or two tokens naming different runs, is a 401.
 */
@Injectable()
export class RunTokenGuard implements CanActivate {
  constructor(private readonly registry: RunRegistry) {}

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<GradingRequest>();
    const fromPath = req.params.token;
    const fromHeader = bearerToken(req.headers);
    if (fromPath === undefined && fromHeader === null) throw unauthorized(`missing run credential: ${HOW_TO_AUTHENTICATE}`);
    const byPath = fromPath === undefined ? null : this.registry.byToken(fromPath);
    if (fromPath !== undefined && !byPath) throw unauthorized('the token in this URL names no active run (the run may have ended)');
    const byHeader = fromHeader === null ? null : this.registry.byToken(fromHeader);
    if (fromHeader !== null && !byHeader) throw unauthorized('the bearer token names no active run (the run may have ended)');
    if (byPath && byHeader && byPath !== byHeader) throw unauthorized('the URL token and the bearer token name different runs');
    req.gradingRun = (byPath ?? byHeader)!;
    return true;
  }
}

/** `POST /set_baseline` is the operator's: a run's own token is refused with 403, anything else with 401. */
@Injectable()
export class OperatorGuard implements CanActivate {
  constructor(
    private readonly registry: RunRegistry,
    @Inject(OPERATOR_TOKEN) private readonly operatorToken: string,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<GradingRequest>();
    const presented = bearerToken(req.headers);
    const refused = new ForbiddenException({ statusCode: 403, error: 'Forbidden', message: 'set_baseline is for the operator; a run token cannot set the baseline' });
    if (req.params.token !== undefined) throw refused;
    if (presented === null) throw unauthorized('set_baseline needs "Authorization: Bearer <operator token>" (A2RL_HOME/operator.token)');
    if (tokensEqual(presented, this.operatorToken)) return true;
    if (this.registry.byToken(presented)) throw refused;
    throw unauthorized('the bearer token is not the operator token');
  }
}

/** The run the RunTokenGuard authenticated. */
export const CurrentRun = createParamDecorator((_: unknown, context: ExecutionContext): ActiveRun => {
  const run = context.switchToHttp().getRequest<GradingRequest>().gradingRun;
  if (!run) throw new Error('CurrentRun used on a route without RunTokenGuard');
  return run;
});
