// Nest 12 ships ES modules only, so the suite runs in Jest's native ESM mode
// (`--experimental-vm-modules`, see package.json) with ts-jest transpiling TypeScript as ESM.
// Type checking is done once by `tsc` (npm run build / typecheck), not per test file.
export default {
  testEnvironment: 'node',
  roots: ['<rootDir>/src', '<rootDir>/modules', '<rootDir>/projections', '<rootDir>/tasks', '<rootDir>/infra', '<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  // The agent CLIs' own packages (1 GB of node_modules) are not the project's code.
  modulePathIgnorePatterns: ['<rootDir>/infra/agent-clis/node_modules/'],
  // The dashboard's browser sources are built by Vite and tested in a browser (test/e2e/dashboard*.spec.ts).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/modules/dashboard/web/'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  // Generous: end-to-end specs run real agents and servers, and the suite must pass on a busy machine.
  testTimeout: 120000,
  maxWorkers: 2,
};
