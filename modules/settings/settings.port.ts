/**
 * The settings port: what modules may know of the configuration. The values are read and checked
 * by the app shell (src/config) and provided under SETTINGS by the composition root; modules never
 * import src/ or read the environment for these themselves.
 */
export interface Settings {
  home: string;
  ledgerUrl: string;
  artifactsUrl: string;
  readModelUrl: string;
  /** Where run workspaces are created (default `$A2RL_HOME/workspaces`). */
  workspacesDir: string;
  httpPort: number;
  httpHost: string;
  /** How often a run signs a tree head (A2RL_TREE_HEAD_EVERY): after `ms` or `events`, whichever first. Absent: the signer's defaults. */
  treeHeadEvery?: { ms: number; events: number };
  /** Who may use the HTTP API (A2RL_AUTH*, modules/access/auth-settings.ts). Absent: required exactly when httpHost is not loopback. */
  auth?: AuthSettings;
}

/** A role an API token or a proxied user has: `viewer` reads; `operator` also exports, regrades, cancels and reads the access stream. */
export type AuthRole = 'viewer' | 'operator';

export interface AuthSettings {
  /** A2RL_AUTH: `auto` (required beyond loopback), `required`, or `off` (loopback only). */
  mode: 'auto' | 'required' | 'off';
  /** Whether API requests need a credential (from mode and the listening host). */
  required: boolean;
  /** A reverse proxy's identity header, trusted only when configured (A2RL_AUTH_PROXY_*). */
  proxy: ProxyAuthSettings | null;
}

export interface ProxyAuthSettings {
  /** Lower-case header name carrying the signed-in user, e.g. `x-forwarded-user`. */
  header: string;
  /** Role per user name; `*` matches any other user. A user with no entry is refused. */
  roles: ReadonlyArray<{ user: string; role: AuthRole }>;
  /** When set, the header is believed only on requests that carry `X-A2rl-Proxy-Secret: <secret>`. */
  secret: string | null;
}

/** Injection token of the Settings (interfaces have no runtime identity in TypeScript). */
export const SETTINGS = Symbol('A2RL_SETTINGS');

/** A configuration value is wrong; the message names the variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly variable: string, message: string) {
    super(`${variable}: ${message}`);
  }
}
