import type { CampaignScheduled } from '../../../modules/ledger/events/catalog.js';

/** A local campaign of `cells` seeds of ref-arith × reference, for the fold's and the decider's specs. */
export const testPlan = (cells = 2, retries = 1, concurrency = 1): CampaignScheduled => ({
  matrix: { tasks: ['ref-arith'], agents: ['reference'], drivers: [], seeds: cells },
  cells: Array.from({ length: cells }, (_, i) => ({ cell: i, task: 'ref-arith', agent: 'reference', seed: i, gpus: 0 })),
  budgetSeconds: 60,
  retries,
  queue: 'local',
  concurrency,
});
