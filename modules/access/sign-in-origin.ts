import { ForbiddenException, Injectable, UnsupportedMediaTypeException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { IncomingHttpHeaders } from 'node:http';
import { AccessControl, type AccessRequest } from './access-control.js';

// Sign-in from the a2rl pages only (login CSRF): a page on another site must not be able to sign a
// visitor's browser in with a token of its choosing (everything the visitor then does or sees is
// under that identity), nor sign them out. A browser says where a request comes from in headers no
// page can set or forge; the rule is the one of Go's net/http CrossOriginProtection:
//   1. Sec-Fetch-Site (every current browser): same-origin or none (typed by the user) passes;
//      same-site (another port or subdomain) and cross-site are refused.
//   2. Without it (older browsers), Origin: it must name this server's host (Host, or the
//      X-Forwarded-Host a reverse proxy sets: a cross-site page can set neither); `null` is refused.
//      The scheme is not compared (a proxy that terminates TLS changes it; one host:port serves one scheme).
//   3. Neither header: not a browser (curl, scripts), which cannot be made to post for someone else: passes.
// And sign-in takes JSON only: an HTML form can post urlencoded, multipart or text/plain bodies, but
// a page can send application/json cross-site only after a CORS preflight, which this server never grants.

type Headers = Partial<Record<'origin' | 'host' | 'x-forwarded-host' | 'sec-fetch-site' | 'content-type', IncomingHttpHeaders[string]>>;

const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value)?.split(',')[0].trim();

/** Why a request is refused as cross-origin (null: it may sign in or out). */
export function crossOriginRefusal(headers: Headers): string | null {
  const site = first(headers['sec-fetch-site'])?.toLowerCase();
  if (site !== undefined) return site === 'same-origin' || site === 'none' ? null : `Sec-Fetch-Site is ${site}: sign-in is only taken from this server's own pages`;
  const origin = first(headers.origin);
  if (origin === undefined) return null;
  const from = originHost(origin);
  if (from === null) return `Origin ${origin} is not a web origin: sign-in is only taken from this server's own pages`;
  const hosts = [first(headers.host), first(headers['x-forwarded-host'])].filter((h): h is string => !!h).map((h) => normalHost(from.protocol, h));
  return hosts.includes(from.host) ? null : `Origin ${origin} is not this server: sign-in is only taken from this server's own pages`;
}

/** Whether the body is declared JSON (`application/json`, parameters such as charset allowed). */
export function isJsonBody(headers: Headers): boolean {
  return first(headers['content-type'])?.split(';')[0].trim().toLowerCase() === 'application/json';
}

function originHost(origin: string): { protocol: string; host: string } | null {
  try {
    const url = new URL(origin);
    return url.protocol === 'http:' || url.protocol === 'https:' ? { protocol: url.protocol, host: url.host } : null;
  } catch {
    return null;
  }
}

/** `Host: example.org:443` under https is the origin `https://example.org`: compare as URL hosts (default ports dropped, lower case). */
function normalHost(protocol: string, host: string): string | null {
  try {
    return new URL(`${protocol}//${host}`).host;
  } catch {
    return null;
  }
}

/**
 * POST /auth/login and /auth/logout: refuses cross-origin browser requests (403), and for sign-in any
 * body but JSON (415), before the body is validated; refusals are recorded like other sign-in refusals.
 */
@Injectable()
export class SameOriginSignIn implements CanActivate {
  constructor(private readonly access: AccessControl) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<AccessRequest>();
    const crossOrigin = crossOriginRefusal(req.headers);
    const signIn = req.path.endsWith('/login');
    if (crossOrigin) {
      if (signIn) await this.access.refused(req, null, 'sign-in', null, crossOrigin);
      throw new ForbiddenException(crossOrigin);
    }
    if (signIn && !isJsonBody(req.headers)) throw new UnsupportedMediaTypeException('sign-in takes a JSON body: {"token": "a2rl_…"} with Content-Type: application/json');
    return true;
  }
}
