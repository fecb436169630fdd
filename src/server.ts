import 'reflect-metadata';
import { type INestApplication, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { configureGradingHttp } from '../modules/grading/grading-http.js';
import { setupOpenApi } from '../modules/query/openapi.js';
import { ProjectionRunnerService } from '../modules/readmodels/readmodels.module.js';
import { AppModule } from './app.module.js';
import { A2RL_CONFIG } from './config/config.module.js';
import type { A2rlConfig } from './config/config.js';

/** Builds the HTTP application: every request body and query is validated at the edge. */
export async function createHttpApp(): Promise<INestApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule, { logger: ['error', 'warn'], bodyParser: false });
  configureGradingHttp(app);
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  setupOpenApi(app);
  return app;
}

/** `a2rl serve` / `npm start`: HTTP API plus projections kept live from the ledger. */
export async function serve(): Promise<INestApplication> {
  const app = await createHttpApp();
  // The long-running server closes cleanly on SIGINT/SIGTERM; CLI runs handle those signals themselves (withRunApp).
  app.enableShutdownHooks();
  const config = app.get<A2rlConfig>(A2RL_CONFIG);
  await app.get(ProjectionRunnerService).start();
  await app.listen(config.httpPort, config.httpHost);
  console.log(`a2rl HTTP API listening on http://${config.httpHost}:${config.httpPort} (GET /health)`);
  console.log(`  ledger:      ${redact(config.ledgerUrl)}`);
  console.log(`  artifacts:   ${redact(config.artifactsUrl)}`);
  console.log(`  read models: ${redact(config.readModelUrl)}`);
  return app;
}

/** Hides credentials in URLs printed to the console. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):([^@/]+)@/, '//$1:***@');
}
