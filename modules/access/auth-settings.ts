import { isIP } from 'node:net';
import { ConfigError, type AuthRole, type AuthSettings, type ProxyAuthSettings, type Settings } from '../settings/settings.port.js';

// A2RL_AUTH* as the app shell reads them (src/config/config.ts). Pure: the environment is passed in.

const ROLES: readonly AuthRole[] = ['viewer', 'operator'];
/** An HTTP header name (RFC 9110 token), never one that carries other credentials. */
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/;
const RESERVED_HEADERS = new Set(['authorization', 'cookie', 'host', 'x-a2rl-proxy-secret', 'content-type', 'content-length']);
const PROXY_USER = /^[^\s,=]{1,200}$/;

/** Whether `host` (A2RL_HTTP_HOST) names only this machine: 127.0.0.0/8, ::1 or localhost. */
export function isLoopback(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || h === '0:0:0:0:0:0:0:1' || /^::ffff:127\./.test(h);
  return false;
}

/** A2RL_AUTH, A2RL_AUTH_PROXY_HEADER, A2RL_AUTH_PROXY_ROLES, A2RL_AUTH_PROXY_SECRET, checked; throws ConfigError naming the variable. */
export function authSettings(env: NodeJS.ProcessEnv, httpHost: string): AuthSettings {
  const mode = (env.A2RL_AUTH?.trim() || 'auto').toLowerCase();
  if (mode !== 'auto' && mode !== 'required' && mode !== 'off') throw new ConfigError('A2RL_AUTH', `expected auto, required or off, got "${env.A2RL_AUTH}"`);
  const loopback = isLoopback(httpHost);
  if (mode === 'off' && !loopback) {
    throw new ConfigError('A2RL_AUTH', `off is allowed only on loopback, but A2RL_HTTP_HOST is ${httpHost}: anyone who reaches it would read every run (create a token with \`a2rl tokens create\`)`);
  }
  return { mode, required: mode === 'required' || (mode === 'auto' && !loopback), proxy: proxySettings(env) };
}

/** What a Settings without `auth` (tests, older callers) means: required exactly beyond loopback. */
export function effectiveAuth(settings: Pick<Settings, 'httpHost' | 'auth'>): AuthSettings {
  return settings.auth ?? { mode: 'auto', required: !isLoopback(settings.httpHost), proxy: null };
}

function proxySettings(env: NodeJS.ProcessEnv): ProxyAuthSettings | null {
  const header = env.A2RL_AUTH_PROXY_HEADER?.trim() ?? '';
  const roles = env.A2RL_AUTH_PROXY_ROLES?.trim() ?? '';
  const secret = env.A2RL_AUTH_PROXY_SECRET?.trim() ?? '';
  if (!header) {
    if (roles) throw new ConfigError('A2RL_AUTH_PROXY_ROLES', 'set A2RL_AUTH_PROXY_HEADER too (the header your reverse proxy puts the user name in)');
    if (secret) throw new ConfigError('A2RL_AUTH_PROXY_SECRET', 'set A2RL_AUTH_PROXY_HEADER too (the header your reverse proxy puts the user name in)');
    return null;
  }
  if (!HEADER_NAME.test(header) || RESERVED_HEADERS.has(header.toLowerCase())) {
    throw new ConfigError('A2RL_AUTH_PROXY_HEADER', `"${header}" is not a usable header name (e.g. x-forwarded-user; not Authorization, Cookie or Host)`);
  }
  if (!roles) throw new ConfigError('A2RL_AUTH_PROXY_ROLES', 'needed with A2RL_AUTH_PROXY_HEADER: user=role pairs, e.g. "alice=operator,*=viewer"');
  if (secret && secret.length < 16) throw new ConfigError('A2RL_AUTH_PROXY_SECRET', 'at least 16 characters (a random value your proxy sends as X-A2rl-Proxy-Secret)');
  return { header: header.toLowerCase(), roles: proxyRoles(roles), secret: secret || null };
}

function proxyRoles(text: string): ProxyAuthSettings['roles'] {
  const seen = new Set<string>();
  return text.split(',').map((pair) => {
    const [user, role, extra] = pair.split('=').map((p) => p.trim());
    if (extra !== undefined || !user || !PROXY_USER.test(user) || !ROLES.includes(role as AuthRole)) {
      throw new ConfigError('A2RL_AUTH_PROXY_ROLES', `"${pair.trim()}" is not user=role (role viewer or operator; * for any other user), e.g. "alice=operator,*=viewer"`);
    }
    if (seen.has(user)) throw new ConfigError('A2RL_AUTH_PROXY_ROLES', `user "${user}" is listed twice`);
    seen.add(user);
    return { user, role: role as AuthRole };
  });
}
