import type { IncomingHttpHeaders } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { AccessAction, AccessRole, EventData } from '../ledger/events/catalog.js';
import { bearerToken } from './bearer-token.js';
import { CLOCK, type Clock } from '../ledger/tokens.js';
import { SETTINGS, type AuthSettings, type Settings } from '../settings/settings.port.js';
import { AccessLedger } from './access-ledger.js';
import { effectiveAuth } from './auth-settings.js';
import { Coalescer } from './coalescer.js';

export const SESSION_COOKIE = 'a2rl_session';
export const PROXY_SECRET_HEADER = 'x-a2rl-proxy-secret';

/** Who a request acts as. On loopback without credentials: an anonymous operator (auth is off there). */
export interface Identity {
  kind: 'token' | 'proxy' | 'anonymous';
  /** Token id, proxy user name, or (anonymous) the source address. */
  id: string;
  name: string;
  role: AccessRole;
}

/** What the guard and the controllers read of a request (Express's request has all of it). */
export interface AccessRequest {
  method: string;
  path: string;
  ip?: string;
  headers: IncomingHttpHeaders;
  socket?: { remoteAddress?: string };
  a2rlIdentity?: Identity;
}

/** A request's credential: none, one that is good, or one that is not (with why, and whose when known). */
export type Identified = { none: true } | { identity: Identity } | { refused: string; actor: Identity | null };

export type Target = EventData<'AccessRecorded'>['target'];

/** At most one refusal record per source address per minute; one token-use record per token per 10 minutes. */
const REFUSAL_WINDOW_MS = 60_000;
const USE_WINDOW_MS = 10 * 60_000;

const ROLE_RANK: Record<AccessRole, number> = { viewer: 0, operator: 1 };

export function hasRole(identity: Identity, needed: AccessRole): boolean {
  return ROLE_RANK[identity.role] >= ROLE_RANK[needed];
}

/**
 * Who may look: resolves a request's credential (reverse-proxy header when configured, bearer
 * token, session cookie) and records access in the access stream. Token use is recorded at most
 * once per token per 10 minutes per server process (each request would otherwise be an event: a
 * dashboard's polls and live streams would write thousands an hour and bury the records that
 * matter); sign-in, export, regrade, cancel and verify are recorded every time.
 */
@Injectable()
export class AccessControl {
  private readonly logger = new Logger('access');
  private readonly refusals = new Coalescer(REFUSAL_WINDOW_MS);
  private readonly uses = new Coalescer(USE_WINDOW_MS);
  readonly auth: AuthSettings;

  constructor(
    readonly ledger: AccessLedger,
    @Inject(SETTINGS) settings: Settings,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    this.auth = effectiveAuth(settings);
  }

  get required(): boolean {
    return this.auth.required;
  }

  async identify(req: AccessRequest): Promise<Identified> {
    const proxy = this.auth.proxy;
    const proxyUser = proxy ? headerValue(req.headers, proxy.header) : null;
    if (proxy && proxyUser !== null) return this.proxyIdentity(req, proxyUser);
    const secret = bearerToken(req.headers) ?? cookieValue(req.headers, SESSION_COOKIE);
    if (secret === null) return { none: true };
    return this.tokenIdentity(secret);
  }

  async tokenIdentity(secret: string): Promise<Identified> {
    const checked = await this.ledger.check(secret);
    if ('token' in checked) return { identity: { kind: 'token', id: checked.token.tokenId, name: checked.token.name, role: checked.token.role } };
    const token = checked.tokenId === null ? null : (await this.ledger.read()).tokens.get(checked.tokenId) ?? null;
    return { refused: checked.refused, actor: token && { kind: 'token', id: token.tokenId, name: token.name, role: token.role } };
  }

  /** Anyone who reaches a loopback server without auth acts as this. */
  anonymous(req: AccessRequest): Identity {
    return { kind: 'anonymous', id: sourceOf(req), name: 'anonymous', role: 'operator' };
  }

  /** Records an access that was allowed (and done), every time. */
  async recorded(identity: Identity, action: AccessAction, target: Target, extra: Pick<EventData<'AccessRecorded'>, 'verified' | 'detail'> = {}): Promise<void> {
    await this.ledger.record({ actor: actorOf(identity), action, target, outcome: 'ok', ...clean(extra) });
  }

  /** Records that an authenticated request for `action` on `target` was not carried out (why in `detail`), every time. */
  async notDone(identity: Identity, action: AccessAction, target: Target, detail: string): Promise<void> {
    await this.ledger.record({ actor: actorOf(identity), action, target, outcome: 'refused', detail: clip(detail) });
  }

  /**
   * Records a 401/403 at most once a minute per source address (per token or proxy user when the
   * caller is known, so one viewer's refused export is not hidden by a scanner on the same address);
   * a failed record never turns a refusal into an error.
   */
  async refused(req: AccessRequest, actor: Identity | null, action: AccessAction, target: Target, detail: string): Promise<void> {
    const source = sourceOf(req);
    if (!this.refusals.admit(actor ? `${actor.kind}:${actor.id}` : `ip:${source}`, this.clock().getTime())) return;
    const who = actor ?? { kind: 'anonymous' as const, id: source, name: 'anonymous' };
    try {
      await this.ledger.record({ actor: actorOf(who), action, target, outcome: 'refused', detail: clip(`${req.method} ${req.path} from ${source}: ${detail}`) });
    } catch (err) {
      this.logger.warn(`could not record a refused request: ${(err as Error).message}`);
    }
  }

  /** Records a token's (or proxy user's) use, at most once per 10 minutes per process. */
  async used(req: AccessRequest, identity: Identity): Promise<void> {
    if (identity.kind === 'anonymous' || !this.uses.admit(`${identity.kind}:${identity.id}`, this.clock().getTime())) return;
    await this.ledger.record({ actor: actorOf(identity), action: 'token-use', target: null, outcome: 'ok', detail: clip(`${req.method} ${req.path} from ${sourceOf(req)}`) });
  }

  private proxyIdentity(req: AccessRequest, user: string): Identified {
    const proxy = this.auth.proxy!;
    if (proxy.secret !== null && !sameSecret(headerValue(req.headers, PROXY_SECRET_HEADER), proxy.secret)) {
      return { refused: `the ${proxy.header} header came without the proxy's secret (not through the configured proxy)`, actor: null };
    }
    if (!/^[^\s,=]{1,200}$/.test(user)) return { refused: `the ${proxy.header} header is not a user name`, actor: null };
    const entry = proxy.roles.find((r) => r.user === user) ?? proxy.roles.find((r) => r.user === '*');
    if (!entry) return { refused: `proxy user ${user} has no role (A2RL_AUTH_PROXY_ROLES)`, actor: null };
    return { identity: { kind: 'proxy', id: user, name: user, role: entry.role } };
  }
}

function actorOf(who: { kind: Identity['kind']; id: string; name: string; role?: AccessRole }): EventData<'AccessRecorded'>['actor'] {
  // Anonymous callers are recorded without a role unless auth is off and they acted as operators.
  return { kind: who.kind, id: clip(who.id, 200), name: clip(who.name, 200), ...(who.role ? { role: who.role } : {}) };
}

function clean<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

function clip(text: string, max = 1000): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The peer address (no proxy's X-Forwarded-For is believed), IPv4-mapped IPv6 shown as IPv4. */
export function sourceOf(req: AccessRequest): string {
  const ip = req.ip ?? req.socket?.remoteAddress ?? 'unknown';
  return ip.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1') || 'unknown';
}

export function cookieValue(headers: IncomingHttpHeaders, name: string): string | null {
  for (const part of (headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim() || null;
  }
  return null;
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | null {
  const value = headers[name];
  const text = Array.isArray(value) ? value[0] : value;
  return text === undefined || text.trim() === '' ? null : text.trim();
}

function sameSecret(presented: string | null, secret: string): boolean {
  if (presented === null) return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(secret);
  return a.length === b.length && timingSafeEqual(a, b);
}
