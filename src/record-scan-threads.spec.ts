import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { PostgresEventStore } from '../infra/eventstore/postgres-event-store.js';
import { SqliteEventStore } from '../infra/eventstore/sqlite-event-store.js';
import { streamName } from '../modules/ledger/events/ids.js';
import { SignedRunWriter } from '../modules/audit/bundle/testing/signed-run.js';
import { scanRecord } from '../modules/audit/record-scan.js';
import { initSigningKey, type SigningKey } from '../modules/ledger/tree-head.js';
import { threadedSegmentScanner } from './record-scan-threads.js';

// `a2rl verify`'s parallel read in real worker threads, each opening the ledger (SQLite, PostgreSQL
// as .ci/run starts it) by its URL.

const RUN = 'threads-1';
const AT = '2026-01-01T00:00:00.000Z';

describe('threadedSegmentScanner', () => {
  let dir: string;
  let store: SqliteEventStore;
  let key: SigningKey;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-scan-threads-'));
    key = initSigningKey(dir);
    store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
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

  it('reads segments in threads that join into exactly what one read finds', async () => {
    const one = await scanRecord(store, RUN, key.publicKeyPem);
    expect(one).toMatchObject({ count: 3002 + 13 });
    const scanner = threadedSegmentScanner(`sqlite://${path.join(dir, 'ledger.db')}`);
    expect(await scanRecord(store, RUN, key.publicKeyPem, { parallel: { scanner, threads: 3, minEvents: 0, chunkSize: 256 } })).toEqual(one);
  }, 60_000);

  it('reads segments of a PostgreSQL ledger in threads the same way', async () => {
    const schema = `a2rl_scan_${process.pid}`;
    const url = `postgres://postgres@127.0.0.1:5432/test?schema=${schema}`;
    const pgStore = await PostgresEventStore.open(url);
    try {
      for await (const r of store.readStream(streamName(RUN))) await pgStore.append(streamName(RUN), [r.event], r.revision === 0n ? 'no_stream' : r.revision - 1n);
      const one = await scanRecord(pgStore, RUN, key.publicKeyPem);
      expect(one).toEqual(await scanRecord(store, RUN, key.publicKeyPem));
      expect(await scanRecord(pgStore, RUN, key.publicKeyPem, { parallel: { scanner: threadedSegmentScanner(url), threads: 3, minEvents: 0, chunkSize: 256 } })).toEqual(one);
    } finally {
      const client = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/test' });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
      await pgStore.close();
    }
  }, 120_000);

  it('fails in one line when a thread cannot open the ledger', async () => {
    writeFileSync(path.join(dir, 'a-file'), '');
    const scanner = threadedSegmentScanner(`sqlite://${path.join(dir, 'a-file', 'ledger.db')}`);
    await expect(scanRecord(store, RUN, key.publicKeyPem, { parallel: { scanner, threads: 2, minEvents: 0, chunkSize: 256 } })).rejects.toThrow(/cannot open the ledger in a verify thread/);
  }, 60_000);
});
