import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { inspect } from 'node:util';
import { sqlitePath } from '../../modules/settings/store-url.js';
import { ConfigError, redact } from './config.js';
import { inertLine, inertText } from '../../modules/reports/inert-text.js';

// Failures to open what the configuration names (a backend, A2RL_HOME, a path given on the command
// line) are the operator's to fix, not bugs: each becomes one OpenError line that names the variable
// or path and what to do. src/cli.ts prints it as `a2rl: <message>` and exits 2; the adapter's error
// stays attached as `cause` for A2RL_DEBUG=1.

/** Something the configuration or the command line names cannot be opened; the message says what to do. */
export class OpenError extends Error {
  override readonly name = 'OpenError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(oneLine(message), options);
  }
}

/**
 * How the CLI and the server report a failure: one `a2rl:` line, the stack (and causes) only with
 * A2RL_DEBUG=1. Returns the exit code: 2 for configuration and open failures, 1 for the rest.
 */
export function reportFailure(err: unknown, env: NodeJS.ProcessEnv = process.env): number {
  const message = err instanceof ConfigError ? `configuration error: ${err.message}` : messageOf(err);
  // Messages can quote recorded data (a run id, a bundle's file names): one inert line (modules/reports/inert-text.ts).
  process.stderr.write(`a2rl: ${inertLine(message)}\n`);
  if (env.A2RL_DEBUG === '1') process.stderr.write(`${inertText(inspect(err, { depth: 6 }))}\n`);
  return err instanceof ConfigError || err instanceof OpenError ? 2 : 1;
}

/** What is being opened, for the message: the variable that names it and its URL. */
export interface OpenTarget {
  variable: string;
  /** e.g. "ledger", "artifact store", "read models". */
  what: string;
  url: string;
}

/** The OpenError for an adapter's failure to open `target`. */
export function openFailure(target: OpenTarget, err: unknown): OpenError {
  if (err instanceof OpenError) return err;
  return new OpenError(`${target.variable}: cannot open the ${target.what} at ${redact(target.url)}: ${explain(target, err)}`, { cause: err });
}

/** A2RL_HOME must be a writable directory (created if missing): keys, lock files and the default stores live there. */
export function checkHome(home: string): void {
  try {
    mkdirSync(home, { recursive: true });
    accessSync(home, constants.W_OK);
  } catch (err) {
    const code = codeOf(err);
    const problem = code === 'EEXIST' || code === 'ENOTDIR' ? 'is not a directory' : `is not writable (${code ?? messageOf(err)})`;
    throw new OpenError(`A2RL_HOME: ${home} ${problem}: a2rl keeps its keys, lock files and default stores there; set A2RL_HOME to a writable directory`, { cause: err });
  }
}

/** A file the command will write (`-o`): its directory must exist and be writable, and it must not be a directory. */
export function checkOutputFile(option: string, file: string): void {
  const target = path.resolve(file);
  const dir = path.dirname(target);
  const fix = `choose another ${option} path`;
  if (isDirectory(target)) throw new OpenError(`${option} ${file}: is a directory; name the file to write, e.g. ${path.join(file, 'bundle.tar.gz')}`);
  if (!isDirectory(dir)) throw new OpenError(`${option} ${file}: directory ${dir} does not exist; create it (mkdir -p ${dir}) or ${fix}`);
  try {
    accessSync(dir, constants.W_OK);
  } catch (err) {
    throw new OpenError(`${option} ${file}: directory ${dir} is not writable (${codeOf(err) ?? messageOf(err)}); ${fix}`, { cause: err });
  }
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

// --- Translating an adapter's error into what happened and what to do -------------------------

const SERVERS: Record<string, string> = {
  postgres: 'PostgreSQL',
  postgresql: 'PostgreSQL',
  kurrentdb: 'KurrentDB',
  'kurrentdb+discover': 'KurrentDB',
  esdb: 'KurrentDB',
  'esdb+discover': 'KurrentDB',
  s3: 'the S3/MinIO server',
};

function explain(target: OpenTarget, err: unknown): string {
  const scheme = target.url.slice(0, target.url.indexOf(':'));
  if (scheme === 'sqlite' || scheme === 'file') return explainPath(target, scheme === 'sqlite' ? 'a database file' : 'a directory', err);
  const server = SERVERS[scheme];
  if (!server) return `${innermostMessage(err)}; correct ${target.variable}`;
  return explainServer(target, server, err);
}

function explainServer({ variable, url: raw }: OpenTarget, server: string, err: unknown): string {
  const url = parseUrl(raw);
  const where = url ? hostPort(url) : 'the server';
  const user = url?.username ? decodeURIComponent(url.username) : '';
  const code = codeOf(err);
  switch (code) {
    case 'ECONNREFUSED':
      return `nothing is listening at ${where} (connection refused); start ${server} there, or correct the host or port in ${variable}`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `host "${url?.hostname}" is not known (${code}); correct the host in ${variable}`;
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'TIMEOUT':
      return `no answer from ${where} (${code === 'TIMEOUT' ? 'timed out' : code}); check that ${server} is up and reachable from here, or correct ${variable}`;
    case 'ECONNRESET':
    case 'CLOSED':
      return `${where} closed the connection; check that ${server} (not another service) listens there and whether it needs TLS, or correct ${variable}`;
    // PostgreSQL SQLSTATEs.
    case '3D000': {
      const db = decodeURIComponent(url?.pathname.replace(/^\//, '') ?? '') || user;
      return `database "${db}" does not exist; create it (createdb -h ${url?.hostname} ${db}) or name an existing database in ${variable}`;
    }
    case '28P01':
    case '28000':
      return `the server refused user "${user}" (${innermostMessage(err)}); correct the user or password in ${variable}`;
    case '42501':
      return `user "${user}" may not create or use the schema (${innermostMessage(err)}); grant it CREATE on the database, or name a schema it owns with ?schema= in ${variable}`;
    // S3 error codes.
    case 'AccessDenied':
    case 'InvalidAccessKeyId':
    case 'SignatureDoesNotMatch':
      return `the server refused the credentials (${code}); correct ACCESS_KEY:SECRET_KEY in ${variable}`;
  }
  if (server === 'KurrentDB') {
    return `no usable answer from ${where} (${innermostMessage(err)}); start KurrentDB there, or correct ${variable} (a node without TLS needs ?tls=false)`;
  }
  return `${innermostMessage(err)}; check that ${server} at ${where} is up, or correct ${variable}`;
}

/** SQLite files and artifact directories: explain from what is at the path, whatever the driver said. */
function explainPath({ variable, url }: OpenTarget, expected: string, err: unknown): string {
  const file = path.resolve(sqlitePath(url));
  const fix = `set ${variable} to ${expected} in a writable directory`;
  if (expected === 'a database file' && isDirectory(file)) return `${file} is a directory; name a database file in it, e.g. sqlite://${path.join(file, 'a2rl.db')}`;
  const code = codeOf(err);
  if (code === 'EEXIST' || code === 'ENOTDIR') return `${file} or a directory above it is a file (${code}); ${fix}`;
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return `${file} is not writable (${code}); ${fix}`;
  if (code === 'ENOSPC' || code === 'SQLITE_FULL') return `the disk holding ${file} is full; free space or ${fix}`;
  return `${innermostMessage(err)}; check the path and its permissions, or ${fix}`;
}

// --- Reading errors -----------------------------------------------------------------------------

/** The error, its causes and (for AggregateError: one per address tried) their parts. */
function chain(err: unknown): unknown[] {
  const out: unknown[] = [];
  const visit = (e: unknown) => {
    if (e === undefined || e === null || out.includes(e) || out.length > 20) return;
    out.push(e);
    if (e instanceof AggregateError) e.errors.forEach(visit);
    if (e instanceof Error) visit(e.cause);
  };
  visit(err);
  return out;
}

/** The most specific code in the chain: errno, SQLSTATE or S3 code; TIMEOUT / CLOSED from the message. */
function codeOf(err: unknown): string | undefined {
  const errors = chain(err).reverse();
  for (const e of errors) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code) return code;
  }
  const message = errors.map(messageOf).join(' ');
  if (/time(d)? ?out/i.test(message)) return 'TIMEOUT';
  if (/connection terminated unexpectedly|socket hang up/i.test(message)) return 'CLOSED';
  return undefined;
}

function innermostMessage(err: unknown): string {
  const messages = chain(err).map(messageOf).filter(Boolean);
  return messages.at(-1) ?? String(err);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function parseUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

function hostPort(url: URL): string {
  const defaults: Record<string, string> = { 'postgres:': '5432', 'postgresql:': '5432', 'kurrentdb:': '2113', 'esdb:': '2113' };
  return `${url.hostname}:${url.port || defaults[url.protocol] || (url.searchParams.get('ssl') === 'false' ? '80' : '443')}`;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
