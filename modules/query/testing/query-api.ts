import { type INestApplication, type Provider, ValidationPipe } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { setupOpenApi } from '../openapi.js';
import { QueryController } from '../query.controller.js';

/** The query controller over the given providers, validated as createHttpApp does, listening on a free loopback port. */
export async function startQueryApi(providers: Provider[]): Promise<{ app: INestApplication; base: string }> {
  const moduleRef = await Test.createTestingModule({ controllers: [QueryController], providers }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  setupOpenApi(app);
  await app.listen(0, '127.0.0.1');
  return { app, base: `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}` };
}
