import path from 'node:path';
import { authSettings } from '../../modules/access/auth-settings.js';
import { ConfigError, type Settings } from '../../modules/settings/settings.port.js';
import { sqlitePath } from '../../modules/settings/store-url.js';

// Configuration comes only from the environment. Every value is checked at start; a bad value
// fails with a ConfigError that names the variable, before anything is opened or written.

export { ConfigError };
/** The checked configuration: the modules' Settings port. */
export type A2rlConfig = Settings;

// `memory:` is for tests and throwaway runs: the ledger lives only as long as the process.
const LEDGER_SCHEMES = ['sqlite:', 'postgres:', 'postgresql:', 'kurrentdb:', 'kurrentdb+discover:', 'esdb:', 'esdb+discover:', 'memory:'];
const ARTIFACT_SCHEMES = ['file:', 's3:'];
const READMODEL_SCHEMES = ['sqlite:', 'postgres:', 'postgresql:'];

function checkUrl(variable: string, value: string, schemes: string[]): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(variable, `not a URL: "${value}" (expected one of ${schemes.map((s) => `${s}//…`).join(', ')})`);
  }
  if (!schemes.includes(url.protocol)) {
    throw new ConfigError(variable, `unsupported scheme "${url.protocol}" in "${value}" (expected one of ${schemes.map((s) => `${s}//…`).join(', ')})`);
  }
  if ((url.protocol === 'sqlite:' || url.protocol === 'file:') && !sqlitePath(value)) {
    throw new ConfigError(variable, `"${value}" names no file path`);
  }
  if (url.protocol === 's3:') {
    if (!url.hostname) throw new ConfigError(variable, `"${value}" needs an endpoint host: s3://ACCESS_KEY:SECRET_KEY@host:port/bucket`);
    if (!url.pathname.replace(/^\/+/, '')) throw new ConfigError(variable, `"${value}" needs a bucket: s3://ACCESS_KEY:SECRET_KEY@host:port/bucket`);
    if (!url.username || !url.password) throw new ConfigError(variable, `"${redact(value)}" needs credentials: s3://ACCESS_KEY:SECRET_KEY@host:port/bucket (percent-encode special characters)`);
  }
  if (url.protocol === 'postgres:' || url.protocol === 'postgresql:') {
    checkSchema(variable, url.searchParams.get('schema'));
    checkPool(variable, url.searchParams.get('pool'));
  }
  return value;
}

// What both PostgreSQL adapters accept as `?schema=`: a plain identifier, not in PostgreSQL's reserved pg_ namespace.
const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,49}$/;

function checkSchema(variable: string, schema: string | null): void {
  if (schema === null) return;
  if (!SCHEMA_NAME.test(schema) || /^pg_/i.test(schema)) {
    throw new ConfigError(variable, `?schema=${schema} is not a usable schema name: letters, digits and _, not starting with a digit or pg_, at most 50 characters`);
  }
}

function checkPool(variable: string, pool: string | null): void {
  if (pool === null) return;
  if (!/^\d+$/.test(pool) || Number(pool) < 1 || Number(pool) > 1000) {
    throw new ConfigError(variable, `?pool=${pool} is not a pool size: a whole number of connections from 1 to 1000`);
  }
}

/** Hides credentials in URLs printed to the console. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):([^@/]+)@/, '//$1:***@');
}


const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
/** Defaults of A2RL_TREE_HEAD_EVERY: a signed head at most every 10 s or 10,000 events, and at seal. */
export const DEFAULT_TREE_HEAD_EVERY = { ms: 10_000, events: 10_000 };

/**
 * A2RL_TREE_HEAD_EVERY=`<duration>,<events>` (e.g. `10s,10000`; either part alone keeps the other's
 * default): a run signs a tree head once this long has passed since the first event no head covers,
 * or once this many events are uncovered, whichever comes first, and when it is sealed.
 */
function treeHeadEvery(value: string | undefined): { ms: number; events: number } {
  const every = { ...DEFAULT_TREE_HEAD_EVERY };
  if (!value?.trim()) return every;
  const usage = `expected "<duration>,<events>", e.g. "10s,10000" (duration in ms, s, m or h; events a positive integer), got "${value}"`;
  const seen = new Set<string>();
  for (const part of value.split(',').map((p) => p.trim())) {
    const duration = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(part);
    const kind = duration ? 'ms' : /^\d+$/.test(part) ? 'events' : null;
    if (!kind || seen.has(kind)) throw new ConfigError('A2RL_TREE_HEAD_EVERY', usage);
    seen.add(kind);
    if (duration) every.ms = Number(duration[1]) * DURATION_UNITS_MS[duration[2]];
    else every.events = Number(part);
  }
  if (!(every.ms >= 1 && every.ms <= 24 * 3_600_000)) throw new ConfigError('A2RL_TREE_HEAD_EVERY', `the duration must be between 1ms and 24h, got "${value}"`);
  if (!Number.isSafeInteger(every.events) || every.events < 1) throw new ConfigError('A2RL_TREE_HEAD_EVERY', `the event count must be a positive integer, got "${value}"`);
  return every;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): A2rlConfig {
  const home = path.resolve(env.A2RL_HOME?.trim() || './.a2rl');
  const port = env.A2RL_HTTP_PORT?.trim() || '8080';
  if (!/^\d+$/.test(port) || Number(port) > 65535) throw new ConfigError('A2RL_HTTP_PORT', `not a TCP port: "${port}"`);
  const httpHost = env.A2RL_HTTP_HOST?.trim() || '127.0.0.1';
  return {
    home,
    ledgerUrl: checkUrl('A2RL_LEDGER_URL', env.A2RL_LEDGER_URL?.trim() || `sqlite://${path.join(home, 'ledger.db')}`, LEDGER_SCHEMES),
    artifactsUrl: checkUrl('A2RL_ARTIFACTS_URL', env.A2RL_ARTIFACTS_URL?.trim() || `file://${path.join(home, 'artifacts')}`, ARTIFACT_SCHEMES),
    readModelUrl: checkUrl('A2RL_READMODEL_URL', env.A2RL_READMODEL_URL?.trim() || `sqlite://${path.join(home, 'readmodels.db')}`, READMODEL_SCHEMES),
    workspacesDir: path.resolve(env.A2RL_WORKSPACES_DIR?.trim() || path.join(home, 'workspaces')),
    httpPort: Number(port),
    httpHost,
    treeHeadEvery: treeHeadEvery(env.A2RL_TREE_HEAD_EVERY),
    // A2RL_AUTH (auto|required|off; off only on loopback) and the reverse-proxy identity header.
    auth: authSettings(env, httpHost),
  };
}
