import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { streamName } from '../ledger/events/ids.js';
import { SqliteRawScan } from '../ledger/stores/raw-scan.js';
import { initSigningKey, type SigningKey } from '../ledger/tree-head.js';
import { SignedRunWriter } from './bundle/testing/signed-run.js';
import { sqlitePageScanner } from './page-scan-threads.js';
import { scanRecord } from './record-scan.js';

// `a2rl verify`'s paged read of an SQLite ledger in real worker threads, each opening the file read-only.

const RUN = 'pages-1';
const AT = '2026-01-01T00:00:00.000Z';

describe('sqlitePageScanner', () => {
  let dir: string;
  let file: string;
  let store: SqliteEventStore;
  let key: SigningKey;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-page-threads-'));
    key = initSigningKey(dir);
    file = path.join(dir, 'ledger.db');
    store = await SqliteEventStore.open(file);
    const w = new SignedRunWriter(store, RUN, key, { headEvery: 250, batch: 1000 });
    await w.add('RunScheduled', { task: 'ref-arith', agent: 'ref', baseModel: 'arith-cue-base', budgetSeconds: 60, seed: 0, mode: 'free' });
    for (let i = 0; i < 3000; i++) {
      const sha256 = (i % 16).toString(16).repeat(64);
      await w.add('AgentOutput', { stream: 'stdout', chunk: { sha256, size: 100 + (i % 16), key: `sha256/${sha256.slice(0, 2)}/${sha256}` }, observedAt: AT });
    }
    await w.add('RunCompleted', { submissions: 0 });
    await w.seal();
  });
  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads pages in threads that join into exactly what one read of the store finds', async () => {
    const one = await scanRecord(store, RUN, key.publicKeyPem);
    expect(one).toMatchObject({ count: 3002 + 13 });
    const raw = SqliteRawScan.open(file);
    try {
      const pages = (runId: string, from: number, count: number) => raw.pages(streamName(runId), from, count, 300);
      expect(await scanRecord(store, RUN, key.publicKeyPem, { pages, parallel: { scanner: sqlitePageScanner(file), threads: 3, minEvents: 0, chunkSize: 256 } })).toEqual(one);
    } finally {
      raw.close();
    }
  });

  it('fails naming the thread when the ledger file cannot be opened there', async () => {
    const scanner = sqlitePageScanner(path.join(dir, 'missing', 'ledger.db'));
    await expect(scanRecord(store, RUN, key.publicKeyPem, { parallel: { scanner, threads: 2, minEvents: 0, chunkSize: 256 } })).rejects.toThrow(/cannot open the ledger in a verify thread/);
  });
});
