import { type CanActivate, type ExecutionContext, ForbiddenException, Injectable, UnauthorizedException } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { AccessAction, AccessRole } from '../ledger/events/catalog.js';
import { AccessControl, hasRole, type AccessRequest, type Target } from './access-control.js';
import { PUBLIC_KEY, ROLE_KEY } from './access.decorators.js';

/** Paths that never need a credential: liveness, and the dashboard's static files (the data they show comes from guarded routes). */
const OPEN_PATHS = /^\/(health|index\.html|favicon\.ico|favicon\.svg|assets\/.*)?$/;

const SIGN_IN = 'sign in: send "Authorization: Bearer <token>" (a2rl tokens create --role viewer) or POST /auth/login';

/**
 * The global guard (APP_GUARD): where auth is required, every route that is not @Public needs a
 * credential (401 without a good one), and an operator route an operator (403 for a viewer).
 * Refusals carry no data and are recorded (coalesced per source address). Where auth is not
 * required, a request without a credential acts as an anonymous operator; one with a good
 * credential is still attributed to it.
 */
@Injectable()
export class AccessGuard implements CanActivate {
  constructor(
    private readonly access: AccessControl,
    private readonly reflector: Reflector,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const targets = [context.getHandler(), context.getClass()];
    const req = context.switchToHttp().getRequest<AccessRequest & { params?: Record<string, string> }>();
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets) || OPEN_PATHS.test(req.path)) return true;
    const needs = this.reflector.getAllAndOverride<{ role: AccessRole; action?: AccessAction }>(ROLE_KEY, targets) ?? { role: 'viewer' as const };
    const action = needs.action ?? 'token-use';
    const target = targetOf(req.params ?? {}, req.path);

    const found = await this.access.identify(req);
    if ('refused' in found && this.access.required) {
      await this.access.refused(req, found.actor, action, target, found.refused);
      throw new UnauthorizedException(`${found.refused}; ${SIGN_IN}`);
    }
    if (!('identity' in found) && this.access.required) {
      await this.access.refused(req, null, action, target, 'no credential');
      throw new UnauthorizedException(`this server requires a credential; ${SIGN_IN}`);
    }
    const identity = 'identity' in found ? found.identity : this.access.anonymous(req);
    if (!hasRole(identity, needs.role)) {
      await this.access.refused(req, identity, action, target, `needs the ${needs.role} role, has ${identity.role}`);
      throw new ForbiddenException(`${req.method} ${req.path} needs the ${needs.role} role; ${identity.kind} ${identity.name} is a ${identity.role}`);
    }
    req.a2rlIdentity = identity;
    await this.access.used(req, identity);
    return true;
  }
}

/** The run or campaign a route names (for the record of a refusal). */
function targetOf(params: Record<string, string>, path: string): Target {
  const id = params.id ?? params.runId;
  if (!id || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(id)) return null;
  return path.startsWith('/campaigns/') ? { campaignId: id } : path.startsWith('/runs/') ? { runId: id } : null;
}
