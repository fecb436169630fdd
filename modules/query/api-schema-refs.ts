import type { ApiSchemaName } from './api-schemas.js';

/** `@ApiOkResponse({ schema })` for a component of the document (setupOpenApi adds them from api-schemas.ts). */
export function schemaRef(name: ApiSchemaName): { $ref: string } {
  return { $ref: `#/components/schemas/${name}` };
}

/** An array of that component. */
export function arrayOf(name: ApiSchemaName): { type: 'array'; items: { $ref: string } } {
  return { type: 'array', items: schemaRef(name) };
}
