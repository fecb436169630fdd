import { describe, expect, it } from '@jest/globals';
import { CODEGEN_PATHS, committedText, generatedFiles } from './openapi-codegen.js';

// The committed api-schemas.ts and the dashboard's api-types.ts are generated (npm run openapi:types):
// regenerated here in memory, each must equal its committed copy, so neither can drift from the code.
describe('the generated OpenAPI schemas and dashboard API types', () => {
  it('are up to date with api-types.ts and the query routes (else: npm run openapi:types)', async () => {
    const fresh = await generatedFiles();
    expect(Object.keys(fresh).sort()).toEqual([CODEGEN_PATHS.dashboardTypes, CODEGEN_PATHS.schemas].sort());
    for (const [file, text] of Object.entries(fresh)) {
      const committed = await committedText(file);
      expect({ file, upToDate: committed === text }).toEqual({ file, upToDate: true });
    }
    expect(fresh[CODEGEN_PATHS.dashboardTypes]).toContain('RunSummary: {');
  }, 300_000);
});
