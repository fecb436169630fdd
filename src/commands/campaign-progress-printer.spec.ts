import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent, EventData } from '../../modules/ledger/events/catalog.js';
import { emptyCampaign, evolveCampaign, type CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { CampaignProgressPrinter } from './campaign-progress-printer.js';

// The live progress's lines, fed the way CampaignLedger.follow feeds them: one state per event.

const ID = 'cmp-1';
const worker = { id: 'h-1-abcd', host: 'h', pid: 1, gpus: [] };
const plan: EventData<'CampaignScheduled'> = {
  matrix: { tasks: ['ref-arith'], agents: ['reference'], drivers: [], seeds: 2 },
  cells: [0, 1].map((seed) => ({ cell: seed, task: 'ref-arith', agent: 'reference', seed, gpus: 0 })),
  budgetSeconds: 60,
  retries: 1,
  queue: 'local',
  concurrency: 1,
};

/** Folds `events` one at a time into the printer; returns what it wrote. */
function print(events: Array<[string, unknown]>, opts: { printExisting?: boolean; skipFirst?: number } = {}): string[] {
  const out: string[] = [];
  const stream = { isTTY: false, write: (s: string) => out.push(...s.trimEnd().split('\n')) } as unknown as NodeJS.WriteStream;
  const printer = new CampaignProgressPrinter({ stream, printExisting: opts.printExisting });
  let state: CampaignProgress = emptyCampaign(ID);
  events.forEach(([type, data], seq) => {
    state = evolveCampaign(state, { type, data, runId: ID, seq, occurredAt: `2026-01-01T00:00:0${seq % 10}.000Z`, schemaVersion: 1 } as A2rlEvent);
    if (seq >= (opts.skipFirst ?? 0)) printer.update(state);
  });
  printer.stop();
  return out;
}

const scheduled: Array<[string, unknown]> = [
  ['CampaignScheduled', plan],
  ['RunRequested', { cell: 0, attempt: 1 }],
  ['RunRequested', { cell: 1, attempt: 1 }],
];

describe('CampaignProgressPrinter', () => {
  it('prints one line per finished run, with the cell, its matrix coordinates and the best score', () => {
    const lines = print([
      ...scheduled,
      ['RunAssigned', { cell: 0, attempt: 1, runId: 'run-a', worker, gpus: [] }],
      ['RunFinished', { cell: 0, attempt: 1, runId: 'run-a', outcome: 'completed', best: 87, baseline: 10 }],
    ]);
    expect(lines).toEqual(['[cmp-1] cell 0 ref-arith × reference × - seed 0: completed best 87.0 (run run-a)']);
  });

  it('says a retried attempt once, as a retry, not as a failure', () => {
    const lines = print([
      ...scheduled,
      ['RunAssigned', { cell: 1, attempt: 1, runId: 'run-a', worker, gpus: [] }],
      ['RunFinished', { cell: 1, attempt: 1, runId: 'run-a', outcome: 'lost', reason: 'worker lost' }],
      ['RunRetried', { cell: 1, attempt: 2, reason: 'worker lost' }],
      ['RunRequested', { cell: 1, attempt: 2 }],
      ['RunAssigned', { cell: 1, attempt: 2, runId: 'run-b', worker, gpus: [] }],
      ['RunFinished', { cell: 1, attempt: 2, runId: 'run-b', outcome: 'infra_failed', reason: 'set-up failed: disk full' }],
    ]);
    expect(lines).toEqual([
      '[cmp-1] cell 1 ref-arith × reference × - seed 1: attempt 1 failed (worker lost, run run-a); retrying as attempt 2',
      '[cmp-1] cell 1 ref-arith × reference × - seed 1: failed after 2 attempts: set-up failed: disk full (run run-b)',
    ]);
  });

  it('prints what had ended before it started only when asked (a followed campaign)', () => {
    const events: Array<[string, unknown]> = [
      ...scheduled,
      ['RunAssigned', { cell: 0, attempt: 1, runId: 'run-a', worker, gpus: [] }],
      ['RunFinished', { cell: 0, attempt: 1, runId: 'run-a', outcome: 'completed' }],
      ['CampaignCancelled', { reason: 'enough' }],
    ];
    expect(print(events, { skipFirst: 4 })).toEqual(['[cmp-1] cell 1 ref-arith × reference × - seed 1: cancelled']);
    expect(print(events, { skipFirst: 4, printExisting: true })).toEqual([
      '[cmp-1] cell 0 ref-arith × reference × - seed 0: completed best - (run run-a)',
      '[cmp-1] cell 1 ref-arith × reference × - seed 1: cancelled',
    ]);
  });
});
