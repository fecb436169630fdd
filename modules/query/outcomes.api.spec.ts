import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { analysisFixture, memoryBlobs } from '../../projections/run-analysis/testing/run-fixture.js';
import type { BlobReader } from '../../projections/blob-reader.js';
import type { ResultsRun } from '../reports/results-csv.js';
import { RUN_LOCKS, type RunLock, type RunLocks } from '../ledger/run-locks.port.js';
import { RunSource } from './run-source.js';
import { startQueryApi } from './testing/query-api.js';

// GET /runs and GET /scoreboard over outcomes: set-up failures and cancellations as their own states
// (left off the scoreboard unless asked), no failure class before a run ends, and an open run whose
// harness is gone (its lock's pid dead) shown interrupted without anything being recorded.

const NEVER_ALIVE = 2 ** 22 + 7; // above any pid_max

const fx = (runId: string, state: ResultsRun['state'], cls: ResultsRun['failure']['class'], best: number | null = null) =>
  analysisFixture({ runId, state, best, failure: { class: cls, rule: 'r', evidence: [] } });

class Source extends RunSource {
  readonly blobs: BlobReader = memoryBlobs([]);
  async runs(): Promise<ResultsRun[]> {
    return [
      fx('r-cancelled', 'cancelled', 'cancelled', 70),
      fx('r-done', 'completed', 'success', 40),
      fx('r-gone', 'running', 'no_improvement'),
      fx('r-live', 'running', 'no_improvement'),
      fx('r-setup', 'setup_failed', 'infra_setup'),
    ];
  }
  async run(): Promise<ResultsRun | null> {
    return null;
  }
  async events(): Promise<A2rlEvent[]> {
    return [];
  }
}

const locks: RunLock[] = [{ runId: 'r-gone', pid: NEVER_ALIVE }, { runId: 'r-live', pid: process.pid }];
const runLocks: RunLocks = { list: () => locks, write: () => undefined, remove: () => undefined, pidFile: (id) => `/nowhere/${id}` };

let app: INestApplication;
let base: string;
beforeAll(async () => {
  ({ app, base } = await startQueryApi([{ provide: RunSource, useClass: Source }, { provide: RUN_LOCKS, useValue: runLocks }]));
});
afterAll(async () => {
  await app?.close();
});

const get = async (p: string) => {
  const res = await fetch(`${base}${p}`);
  return { status: res.status, body: JSON.parse(await res.text()) };
};
const ids = (body: { items: Array<{ runId: string }> }) => body.items.map((r) => r.runId);

describe('GET /runs: outcomes', () => {
  it('lists each state, an open run whose harness is gone as interrupted, and no failure class before a run ends', async () => {
    const { body } = await get('/runs');
    const byId = Object.fromEntries(body.items.map((r: { runId: string }) => [r.runId, r]));
    expect(byId['r-setup']).toMatchObject({ state: 'setup_failed', failureClass: 'infra_setup' });
    expect(byId['r-cancelled']).toMatchObject({ state: 'cancelled', failureClass: 'cancelled' });
    expect(byId['r-live']).toMatchObject({ state: 'running', failureClass: null });
    expect(byId['r-live']).not.toHaveProperty('harnessGone');
    expect(byId['r-gone']).toMatchObject({ state: 'interrupted', harnessGone: true, failureClass: null });
  });

  it('filters on the states as shown', async () => {
    expect(ids((await get('/runs?state=running')).body)).toEqual(['r-live']);
    expect(ids((await get('/runs?state=interrupted')).body)).toEqual(['r-gone']);
    expect(ids((await get('/runs?state=setup_failed')).body)).toEqual(['r-setup']);
    expect(ids((await get('/runs?state=cancelled')).body)).toEqual(['r-cancelled']);
    expect(ids((await get('/runs?failure_class=no_improvement')).body)).toEqual([]);
    expect((await get('/runs?state=finished')).status).toBe(400);
  });
});

describe('GET /scoreboard: outcomes', () => {
  it('leaves set-up failures and cancelled runs out unless include_unfinished=true', async () => {
    const [row] = (await get('/scoreboard')).body;
    expect(row.runIds).toEqual(['r-done', 'r-gone', 'r-live']);
    const [all] = (await get('/scoreboard?include_unfinished=true')).body;
    expect(all.runIds).toEqual(['r-cancelled', 'r-done', 'r-gone', 'r-live', 'r-setup']);
    expect((await get('/scoreboard?include_unfinished=yes')).status).toBe(400);
  });
});
