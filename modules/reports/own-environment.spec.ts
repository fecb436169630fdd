import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { analyzeRun } from '../../projections/run-analysis/analyze.js';
import { memoryBlobs, sha } from '../../projections/run-analysis/testing/run-fixture.js';
import { renderReport } from './render.js';

// The report's "Own environment" row (projections/run-analysis/env-copy.ts): only for a flagged run.

const AT = '2026-03-01T10:00:00.000Z';
const GAME = sha('game');

function run(extra: Array<[string, Record<string, unknown>]>): A2rlEvent[] {
  const prepared: [string, Record<string, unknown>] = ['WorkspacePrepared', { workspace: '/ws', sandbox: 'bwrap', mounts: [], dataManifest: [{ path: 'data/train/t/game.tw-pddl', sha256: GAME, size: 4 }] }];
  return [prepared, ...extra].map(([type, data], seq) => buildEvent(type as never, 'run-env', seq, AT, data as never));
}

const report = async (events: A2rlEvent[]) => renderReport({ analysis: await analyzeRun(events, memoryBlobs([])), events, blobs: memoryBlobs([]) }, 'md');

describe('the report of a run that played its own environment', () => {
  it('has a flagged "Own environment" row citing the evidence, and a clean run has none', async () => {
    const md = await report(run([
      ['ProcessStarted', { pid: 1, ppid: 0, argv: ['pip3', 'install', 'alfworld'], cwd: '/ws', observedAt: AT }],
      ['FileChanged', { path: 'code/g.tw-pddl', op: 'create', sha256: GAME, size: 4, observedAt: AT }],
    ]));
    expect(md.split('\n').find((l) => l.includes('Own environment'))).toBe('| Own environment | **flagged** — installs\\_environment, copies\\_training\\_games: episodes played outside /env are not recorded [seq 1–2] |');
    expect(await report(run([['RolloutBatchRecorded', { env: 'alfworld/v1', episodes: 1, steps: 4, successRate: 1, meanReturn: 1, observedAt: AT }]]))).not.toContain('Own environment');
  });
});
