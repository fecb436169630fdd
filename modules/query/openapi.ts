import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';

/** Serves the OpenAPI document: UI at /docs, JSON at /docs/json (the UI's assets come from this server). */
export function setupOpenApi(app: INestApplication): void {
  const config = new DocumentBuilder()
    .setTitle('a2rl')
    .setDescription('Agent² RL-Bench audit ledger: runs, events, run reports and the scoreboard (read-only)')
    .setVersion('1')
    .build();
  SwaggerModule.setup('docs', app, () => SwaggerModule.createDocument(app, config), { jsonDocumentUrl: 'docs/json', yamlDocumentUrl: 'docs/yaml' });
}
