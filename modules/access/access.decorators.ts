import { createParamDecorator, type ExecutionContext, SetMetadata } from '@nestjs/common';
import type { AccessAction, AccessRole } from '../ledger/events/catalog.js';
import type { AccessRequest, Identity } from './access-control.js';

export const PUBLIC_KEY = 'a2rl:access:public';
export const ROLE_KEY = 'a2rl:access:role';

/** The route (or every route of the controller) needs no API credential: it has its own (the grading API) or none (health, sign-in). */
export const Public = (): MethodDecorator & ClassDecorator => SetMetadata(PUBLIC_KEY, true);

/** The role a route needs (every other route needs `viewer` where auth is required), and what a refusal of it is recorded as. */
export const Role = (role: AccessRole, action?: AccessAction): MethodDecorator & ClassDecorator => SetMetadata(ROLE_KEY, { role, action });

/** The identity the guard let through (an anonymous operator where auth is not required). */
export const Caller = createParamDecorator((_: unknown, ctx: ExecutionContext): Identity | undefined => ctx.switchToHttp().getRequest<AccessRequest>().a2rlIdentity);
