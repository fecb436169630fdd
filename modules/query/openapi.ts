import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import { API_SCHEMAS } from './api-schemas.js';

/** The document's title, description and version (3.1: the schemas use JSON Schema's `type: [..., "null"]`). */
export function openApiConfig(): Omit<OpenAPIObject, 'paths'> {
  return new DocumentBuilder()
    .setOpenAPIVersion('3.1.0')
    .setTitle('a2rl')
    .setDescription('Agent² RL-Bench audit ledger: runs, events, run reports and the scoreboard (read-only)')
    .setVersion('1')
    .build();
}

/**
 * The app's OpenAPI document, with the response types of api-types.ts as its components (the
 * generated api-schemas.ts, or fresh schemas when openapi-codegen.ts regenerates the files).
 */
export function openApiDocument(app: INestApplication, schemas: Record<string, object> = API_SCHEMAS): OpenAPIObject {
  const document = SwaggerModule.createDocument(app, openApiConfig());
  document.components = { ...document.components, schemas: { ...document.components?.schemas, ...schemas } };
  return document;
}

/** Serves the OpenAPI document: UI at /docs, JSON at /docs/json (the UI's assets come from this server). */
export function setupOpenApi(app: INestApplication): void {
  SwaggerModule.setup('docs', app, () => openApiDocument(app), { jsonDocumentUrl: 'docs/json', yamlDocumentUrl: 'docs/yaml' });
}
