import 'reflect-metadata';
import { ConsoleLogger, type INestApplication, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { configureGradingHttp } from '../modules/grading/grading-http.js';
import { setupOpenApi } from '../modules/query/openapi.js';
import { ProjectionRunnerService } from '../modules/readmodels/readmodels.module.js';
import { AppModule } from './app.module.js';
import { A2RL_CONFIG } from './config/config.module.js';
import { type A2rlConfig, loadConfig, redact } from './config/config.js';
import { checkHome, OpenError } from './config/open-errors.js';
import { UserProjectionTables } from '../modules/analytics/user-projection-tables.js';

/**
 * Nest's console logger (errors and warnings) without the two reports of a failed start: the
 * ExceptionHandler's stack of a provider that could not be built (a store that did not open) and
 * NestApplication's listen error. With `abortOnError: false` those errors are thrown to the caller,
 * which reports them as one `a2rl:` line (src/cli.ts, src/main.ts; the stack with A2RL_DEBUG=1).
 */
class StartupQuietLogger extends ConsoleLogger {
  override error(message: unknown, ...rest: unknown[]): void {
    if (REPORTED_BY_CALLER.has(rest.at(-1) as string)) return;
    super.error(message, ...rest);
  }
}
const REPORTED_BY_CALLER = new Set(['ExceptionHandler', 'NestApplication']);

/** Options for every Nest app the CLI and the server build: failures to start are thrown, not logged and exited. */
export function nestOptions() {
  return { logger: new StartupQuietLogger({ logLevels: ['error', 'warn'] }), abortOnError: false } as const;
}

/** Builds the HTTP application: every request body and query is validated at the edge. */
export async function createHttpApp(): Promise<INestApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule, { ...nestOptions(), bodyParser: false });
  configureGradingHttp(app);
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  setupOpenApi(app);
  return app;
}

/** `a2rl serve` / `npm start`: HTTP API plus projections kept live from the ledger. */
export async function serve(): Promise<INestApplication> {
  checkHome(loadConfig().home); // a bad variable or home fails here, naming it, before anything is opened
  const app = await createHttpApp();
  // The long-running server closes cleanly on SIGINT/SIGTERM; CLI runs handle those signals themselves (withRunApp).
  app.enableShutdownHooks();
  const config = app.get<A2rlConfig>(A2RL_CONFIG);
  await app.get(ProjectionRunnerService).start();
  await app.get(UserProjectionTables).start(); // user projections (modules/analytics), each in its own thread
  try {
    await app.listen(config.httpPort, config.httpHost);
  } catch (err) {
    // Close what started (live projections, stores) so that the process can exit now.
    await app.close().catch(() => undefined);
    throw listenFailure(config, err);
  }
  console.log(`a2rl HTTP API listening on http://${config.httpHost}:${config.httpPort} (GET /health)`);
  console.log(`  dashboard:   http://${browsable(config.httpHost)}:${config.httpPort}/`);
  console.log(`  access:      ${accessLine(config)}`);
  console.log(`  ledger:      ${redact(config.ledgerUrl)}`);
  console.log(`  artifacts:   ${redact(config.artifactsUrl)}`);
  console.log(`  read models: ${redact(config.readModelUrl)}`);
  return app;
}

/** A host a browser can open: a wildcard bind is reached on loopback. */
function browsable(host: string): string {
  return host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
}

/** Who may read this server: said at start so an operator sees at once whether tokens are needed. */
function accessLine(config: A2rlConfig): string {
  const auth = config.auth;
  if (!auth?.required) return 'open on loopback (beyond it, API tokens are required: a2rl tokens create)';
  const proxy = auth.proxy ? `, or the ${auth.proxy.header} header of the configured reverse proxy` : '';
  return `API token required (a2rl tokens create --role viewer|operator; sign in at /#/sign-in${proxy}); every sign-in, export, regrade and refusal is recorded (a2rl access)`;
}

/** The one line for a port that cannot be listened on, naming the variable to change. */
export function listenFailure(config: A2rlConfig, err: unknown): OpenError {
  const code = (err as NodeJS.ErrnoException).code;
  const at = `${config.httpHost}:${config.httpPort}`;
  const [variable, why] =
    code === 'EADDRINUSE' ? ['A2RL_HTTP_PORT', 'the port is in use (another a2rl serve?); stop that process or set A2RL_HTTP_PORT to a free port']
    : code === 'EACCES' ? ['A2RL_HTTP_PORT', `not permitted (${code}); use a port above 1023 in A2RL_HTTP_PORT`]
    : code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' ? ['A2RL_HTTP_HOST', `${config.httpHost} is not an address of this machine (${code}); correct A2RL_HTTP_HOST`]
    : ['A2RL_HTTP_PORT', `${(err as Error).message}; check A2RL_HTTP_HOST and A2RL_HTTP_PORT`];
  return new OpenError(`${variable}: cannot listen on ${at}: ${why}`, { cause: err });
}

export { redact };
