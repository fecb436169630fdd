import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { InvalidEventError } from './errors.js';
import { LedgerService } from './ledger.service.js';

describe('LedgerService (the harness as single writer)', () => {
  let dir: string;
  let store: SqliteEventStore;
  let ledger: LedgerService;
  let now: number;

  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-ledger-'));
    store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
    now = Date.parse('2026-05-01T00:00:00.000Z');
    ledger = new LedgerService(store, () => new Date((now += 1000)));
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const all = async (runId: string) => {
    const out = [];
    for await (const e of ledger.events(runId)) out.push(e);
    return out;
  };

  it('numbers concurrent records of one run densely from 0, stamping the harness clock once each', async () => {
    await Promise.all(Array.from({ length: 20 }, (_, i) => ledger.record('r1', 'AgentStarted', { command: `c${i}` })));
    const events = await all('r1');
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(new Set(events.map((e) => e.occurredAt)).size).toBe(20);
  });

  it('continues an existing stream after a restart (reads the head once)', async () => {
    await ledger.record('r2', 'AgentStarted', { command: 'a' });
    const restarted = new LedgerService(store, () => new Date(now));
    const e = await restarted.record('r2', 'AgentExited', { exitCode: 0, reason: 'completed' });
    expect(e.seq).toBe(1);
  });

  it('rejects an invalid payload without writing or consuming a seq', async () => {
    await expect(ledger.record('r3', 'SubmissionGraded', { submissionId: 's', score: -1, improvement: 0 })).rejects.toBeInstanceOf(InvalidEventError);
    const ok = await ledger.record('r3', 'AgentStarted', { command: 'x' });
    expect(ok.seq).toBe(0);
    expect((await all('r3')).length).toBe(1);
  });

  it('appends a batch atomically', async () => {
    const events = await ledger.recordMany('r4', [
      ['AgentStarted', { command: 'x' }],
      ['AgentExited', { exitCode: 1, reason: 'crashed' }],
    ]);
    expect(events.map((e) => e.seq)).toEqual([0, 1]);
    await expect(ledger.recordMany('r4', [['AgentStarted', { command: 'y' }], ['AgentExited', { reason: 'nope' } as never]])).rejects.toThrow(/reason/);
    expect((await all('r4')).length).toBe(2);
  });
});
