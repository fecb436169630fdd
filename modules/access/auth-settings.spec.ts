import { describe, expect, it } from '@jest/globals';
import { ConfigError } from '../settings/settings.port.js';
import { authSettings, effectiveAuth, isLoopback } from './auth-settings.js';

describe('A2RL_AUTH and the listening host', () => {
  it.each(['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1'])('treats %s as loopback', (host) => expect(isLoopback(host)).toBe(true));
  it.each(['0.0.0.0', '::', '10.0.0.5', '192.168.1.2', 'example.org', '128.0.0.1', '::2'])('treats %s as beyond loopback', (host) => expect(isLoopback(host)).toBe(false));

  it('requires a credential beyond loopback, or everywhere with A2RL_AUTH=required; off only on loopback', () => {
    expect(authSettings({}, '127.0.0.1')).toEqual({ mode: 'auto', required: false, proxy: null });
    expect(authSettings({}, '0.0.0.0').required).toBe(true);
    expect(authSettings({ A2RL_AUTH: 'required' }, '127.0.0.1').required).toBe(true);
    expect(authSettings({ A2RL_AUTH: 'off' }, 'localhost').required).toBe(false);
    expect(() => authSettings({ A2RL_AUTH: 'off' }, '0.0.0.0')).toThrow(/^A2RL_AUTH: off is allowed only on loopback/);
    expect(() => authSettings({ A2RL_AUTH: 'maybe' }, '127.0.0.1')).toThrow(ConfigError);
    expect(effectiveAuth({ httpHost: '10.1.1.1' }).required).toBe(true);
    expect(effectiveAuth({ httpHost: '127.0.0.1' }).required).toBe(false);
  });

  it('reads a reverse proxy identity header with roles per user and an optional shared secret', () => {
    const auth = authSettings({ A2RL_AUTH_PROXY_HEADER: 'X-Forwarded-User', A2RL_AUTH_PROXY_ROLES: 'alice=operator, *=viewer', A2RL_AUTH_PROXY_SECRET: 's'.repeat(16) }, '0.0.0.0');
    expect(auth.proxy).toEqual({ header: 'x-forwarded-user', roles: [{ user: 'alice', role: 'operator' }, { user: '*', role: 'viewer' }], secret: 's'.repeat(16) });
  });

  it.each([
    [{ A2RL_AUTH_PROXY_ROLES: 'a=viewer' }, 'A2RL_AUTH_PROXY_ROLES'],
    [{ A2RL_AUTH_PROXY_SECRET: 's'.repeat(20) }, 'A2RL_AUTH_PROXY_SECRET'],
    [{ A2RL_AUTH_PROXY_HEADER: 'x-user' }, 'A2RL_AUTH_PROXY_ROLES'],
    [{ A2RL_AUTH_PROXY_HEADER: 'authorization', A2RL_AUTH_PROXY_ROLES: 'a=viewer' }, 'A2RL_AUTH_PROXY_HEADER'],
    [{ A2RL_AUTH_PROXY_HEADER: 'x user', A2RL_AUTH_PROXY_ROLES: 'a=viewer' }, 'A2RL_AUTH_PROXY_HEADER'],
    [{ A2RL_AUTH_PROXY_HEADER: 'x-user', A2RL_AUTH_PROXY_ROLES: 'a=admin' }, 'A2RL_AUTH_PROXY_ROLES'],
    [{ A2RL_AUTH_PROXY_HEADER: 'x-user', A2RL_AUTH_PROXY_ROLES: 'a=viewer,a=operator' }, 'A2RL_AUTH_PROXY_ROLES'],
    [{ A2RL_AUTH_PROXY_HEADER: 'x-user', A2RL_AUTH_PROXY_ROLES: 'a=viewer', A2RL_AUTH_PROXY_SECRET: 'short' }, 'A2RL_AUTH_PROXY_SECRET'],
  ])('refuses %j naming %s', (env, variable) => {
    expect(() => authSettings(env, '0.0.0.0')).toThrow(new RegExp(`^${variable}: `));
  });
});
