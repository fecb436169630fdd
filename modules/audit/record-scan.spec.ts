import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import type { EventStore } from '../ledger/event-store.port.js';
import { streamName } from '../ledger/events/ids.js';
import { SignedRunWriter } from './bundle/testing/signed-run.js';
import { randomBytes } from 'node:crypto';
import { scanChunks, scanRecord, storedChunks, type PageReader, type SegmentScanner } from './record-scan.js';
import { initSigningKey, type SigningKey } from '../ledger/tree-head.js';
import { MerkleAccumulator } from '../ledger/merkle.js';
import { SqliteRawScan } from '../ledger/stores/raw-scan.js';
import { LeafAccumulator } from './leaf-accumulator.js';
import { artifactRefs } from './artifact-refs.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';

// The fast check of a run's record: it vouches for an intact run, alone or in parallel segments,
// and gives up (an anomaly, so that the full check names the failure) on anything else.

const RUN = 'scan-1';
const AT = '2026-01-01T00:00:00.000Z';
const blob = (i: number) => ({ sha256: (i % 16).toString(16).repeat(64), size: 10 + i, key: `sha256/${(i % 16).toString(16).repeat(2)}/${(i % 16).toString(16).repeat(64)}` });

async function writeRun(store: EventStore, key: SigningKey, runId: string, opts: { seal?: boolean; events?: number } = {}): Promise<void> {
  const w = new SignedRunWriter(store, runId, key, { headEvery: 97, batch: 500 });
  await w.add('RunScheduled', { task: 'ref-arith', agent: 'ref', baseModel: 'arith-cue-base', budgetSeconds: 60, seed: 0, mode: 'free' });
  await w.add('AgentStarted', { command: 'bash start.sh' });
  for (let i = 0; i < (opts.events ?? 1000); i++) {
    if (i % 3 === 0) await w.add('FileChanged', { path: `logs/${i % 5}.log`, op: 'modify', ...blob(i), previousSha256: blob(i + 1).sha256, observedAt: AT });
    else await w.add('AgentOutput', { stream: 'stdout', chunk: blob(i + 7), observedAt: AT });
  }
  if (opts.seal !== false) {
    await w.add('AgentExited', { exitCode: 0, reason: 'completed', observedAt: AT });
    await w.add('RunCompleted', { submissions: 0 });
  }
  await w.seal();
}

/** Scans segments in this thread, as a worker thread would (record-scan-threads.spec.ts runs real threads). */
const inThread = (store: EventStore): SegmentScanner => (runId, queue, onProgress) => scanChunks(storedChunks(store, queue.stream), runId, queue, onProgress);

describe('LeafAccumulator', () => {
  it('splits the leaves into the same perfect subtrees as MerkleAccumulator, at every size', () => {
    const reference = new MerkleAccumulator();
    const fast = new LeafAccumulator();
    for (let n = 1; n <= 300; n++) {
      const leaf = randomBytes(32);
      reference.push(leaf);
      fast.push(leaf.toString('latin1'));
      expect(fast.size).toBe(n);
      expect(fast.subtrees().map((t) => `${t.size}:${t.hash.toString('hex')}`)).toEqual(reference.subtrees().map((t) => `${t.size}:${t.hash.toString('hex')}`));
    }
  });
});

describe('scanRecord', () => {
  let dir: string;
  let file: string;
  let store: SqliteEventStore;
  let key: SigningKey;
  let raw: SqliteRawScan;
  /** The SQLite ledger read in pages (small ones, so that a run has many), as `a2rl verify` reads it. */
  const pages: PageReader = (runId, from, count) => raw.pages(streamName(runId), from, count, 100);
  const inPageThread = (): SegmentScanner => (runId, queue, onProgress) => scanChunks((from, count) => pages(runId, from, count), runId, queue, onProgress);

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-record-scan-'));
    key = initSigningKey(dir);
    file = path.join(dir, 'ledger.db');
    store = await SqliteEventStore.open(file);
    await writeRun(store, key, RUN);
    await writeRun(store, key, 'open-run', { seal: false, events: 50 });
    raw = SqliteRawScan.open(file);
  });
  afterAll(async () => {
    raw.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  type Row = { position: number; stream: string; revision: number; id: string; type: string; data: Buffer };

  /** Runs `work` with the stored row of the first event of `type` after `after` changed by `change`, then restores it. */
  async function tampered(type: string, after: number, change: (row: Row) => Partial<Row>, work: () => Promise<void>): Promise<void> {
    const db = new Database(file);
    const row = db.prepare("SELECT * FROM events WHERE stream = 'run-scan-1' AND type = ? AND revision > ? ORDER BY revision LIMIT 1").get(type, after) as Row;
    const update = db.prepare('UPDATE events SET type = @type, data = @data, id = @id, revision = @revision WHERE position = @position');
    try {
      update.run({ ...row, ...change(row) });
      await work();
    } finally {
      update.run(row);
      db.close();
    }
  }

  it('vouches for an intact run: its heads, its blobs once each, the events later checks read', async () => {
    const record = await scanRecord(store, RUN, key.publicKeyPem);
    expect(record).not.toBeNull();
    if (!record || 'anomaly' in record) throw new Error(`expected a record, got ${JSON.stringify(record)}`);
    expect(record.count).toBe(1004 + Math.ceil(1004 / 97));
    expect(record.heads.map((h) => h.treeSize)).toEqual(Array.from({ length: Math.ceil(1004 / 97) }, (_, i) => Math.min(97 * (i + 1), 1004) + i));
    expect(record.refs.map((r) => r.sha256).sort()).toEqual(Array.from({ length: 16 }, (_, i) => i.toString(16).repeat(64)).sort());
    expect(record.kept.map((e) => e.type)).toEqual(['RunScheduled']);
  });

  it('joins parallel segments into exactly what one read finds', async () => {
    const one = await scanRecord(store, RUN, key.publicKeyPem);
    const progress: number[] = [];
    const three = await scanRecord(store, RUN, key.publicKeyPem, { parallel: { scanner: inThread(store), threads: 3, minEvents: 0, chunkSize: 128 }, onProgress: (n) => progress.push(n) });
    expect(three).toEqual(one);
    expect(progress.length).toBeGreaterThan(0);
  });

  it('reads the same record from pages of stored bytes, in one segment or several', async () => {
    const one = await scanRecord(store, RUN, key.publicKeyPem);
    expect(await scanRecord(store, RUN, key.publicKeyPem, { pages })).toEqual(one);
    expect(await scanRecord(store, RUN, key.publicKeyPem, { pages, parallel: { scanner: inPageThread(), threads: 3, minEvents: 0, chunkSize: 128 } })).toEqual(one);
  });

  it('finds the blobs the per-event fold finds, several to an event, whatever events share a page', async () => {
    // Blob hashes are found once a page (each search goes on from where the last one stopped):
    // events naming known and new blobs, unkept executables, kept scripts, next to each other in
    // pages of 1, 2, 7 and 1,024 events.
    const runId = 'refs-run';
    const w = new SignedRunWriter(store, runId, key, { headEvery: 13, batch: 100 });
    const hex = (i: number) => (i % 16).toString(16);
    const file = (i: number, name: string) => ({ path: `/ws/${name}${i}`, sha256: hex(i).repeat(63) + hex(i + 1), size: 100 + i });
    await w.add('RunScheduled', { task: 'ref-arith', agent: 'ref', baseModel: 'arith-cue-base', budgetSeconds: 60, seed: 0, mode: 'free' });
    await w.add('WorkspacePrepared', { workspace: '/ws', sandbox: 'none', mounts: [], dataManifest: [file(1, 'd'), file(2, 'd'), file(1, 'again')] });
    await w.add('AgentStarted', { command: 'bash start.sh' });
    for (let i = 0; i < 80; i++) {
      const kept = (j: number) => ({ sha256: file(j, '').sha256, size: file(j, '').size, key: `sha256/${hex(j).repeat(2)}/${hex(j).repeat(63)}${hex(j + 1)}` });
      const unkept = { path: '/usr/bin/python3', sha256: 'e'.repeat(64), size: 5_000_000 };
      if (i % 4 === 0) await w.add('FileChanged', { path: `logs/${i % 3}.log`, op: 'modify', ...kept(i % 11), previousSha256: kept(i % 7).sha256, observedAt: AT });
      else if (i % 4 === 1) await w.add('ProcessStarted', { pid: 100 + i, ppid: 1, argv: ['python3', 'x.py'], cwd: '/ws', executable: '/usr/bin/python3', exe: unkept, ...(i % 8 === 1 ? { script: { path: '/ws/x.py', ...kept(i % 13), via: 'argument' } } : {}), observedAt: AT });
      // Every other output names a hash that differs from a known one in its last digit only.
      else if (i % 4 === 2) await w.add('AgentOutput', { stream: 'stdout', chunk: i % 8 === 6 ? { ...kept(i % 5), sha256: kept(i % 5).sha256.slice(0, 63) + hex(i % 5 + 2 + (i % 3)) } : kept(i % 5), observedAt: AT });
      else await w.add('ProcessStarted', { pid: 100 + i, ppid: 1, argv: ['./tool'], cwd: '/ws', executable: '/ws/tool', exe: { path: '/ws/tool', ...kept(i % 17) }, observedAt: AT });
    }
    await w.add('RunCompleted', { submissions: 0 });
    await w.seal();
    const events: A2rlEvent[] = [];
    for await (const { event } of store.readStream(streamName(runId))) events.push(event);
    const expected = artifactRefs(events);
    expect(expected.length).toBeGreaterThan(15);
    for (const rows of [1, 2, 7, 1024]) {
      const scan = await scanRecord(store, runId, key.publicKeyPem, { pages: (run, from, count) => raw.pages(streamName(run), from, count, rows) });
      if (!scan || 'anomaly' in scan) throw new Error(`the fast check gave up: ${scan?.anomaly}`);
      expect(scan.refs).toEqual(expected);
    }
  });

  it('is null for a run with no events', async () => {
    expect(await scanRecord(store, 'nope', key.publicKeyPem)).toBeNull();
  });

  it.each([
    ['an edited event', 'AgentOutput', (r: Row) => ({ data: Buffer.from(r.data.toString().replace('"stdout"', '"stderr"')) }), 'does not verify'],
    ['a changed type column', 'FileChanged', () => ({ type: 'AgentExited' }), 'type column'],
    ['bytes that no longer parse', 'AgentOutput', () => ({ data: Buffer.from('{broken') }), 'do not parse'],
    ['a changed id column', 'AgentOutput', (r: Row) => ({ id: r.id.replace(/^./, (c) => (c === 'a' ? 'b' : 'a')) }), 'id or type column'],
    ['an envelope edited at its end', 'FileChanged', (r: Row) => ({ data: Buffer.from(r.data.toString().replace('"type":"FileChanged"', '"type":"AgentExited"')) }), ''],
    ['a blob reference edited where the fast read skips it', 'AgentOutput', (r: Row) => ({ data: Buffer.from(r.data.toString().replace(/"sha256":"(.)/, (_m, c: string) => `"sha256":"${c === 'a' ? 'b' : 'a'}`)) }), 'does not verify'],
    ['an event filed under the next revision', 'AgentOutput', (r: Row) => ({ revision: r.revision + 100_000 }), ''],
    // Parsed where it is read (a worker thread too) and validated at the join.
    ['a head not in canonical form', 'TreeHeadSigned', (r: Row) => ({ data: Buffer.from(r.data.toString().replace('{"data":{', '{"data":{ ')) }), 'not in canonical form'],
  ])('gives up on %s, in whichever segment it lies', async (_what, type, change, anomaly) => {
    for (const after of [3, 500, 990]) {
      await tampered(type, after, change, async () => {
        expect(await scanRecord(store, RUN, key.publicKeyPem)).toEqual({ anomaly: expect.stringContaining(anomaly) });
        expect(await scanRecord(store, RUN, key.publicKeyPem, { parallel: { scanner: inThread(store), threads: 4, minEvents: 0, chunkSize: 64 } })).toEqual({ anomaly: expect.stringContaining(anomaly) });
        expect(await scanRecord(store, RUN, key.publicKeyPem, { pages })).toEqual({ anomaly: expect.stringContaining(anomaly) });
        expect(await scanRecord(store, RUN, key.publicKeyPem, { pages, parallel: { scanner: inPageThread(), threads: 4, minEvents: 0, chunkSize: 64 } })).toEqual({ anomaly: expect.stringContaining(anomaly) });
      });
    }
    expect(await scanRecord(store, RUN, key.publicKeyPem)).not.toHaveProperty('anomaly');
  });

  it('gives up on a run that is not sealed, on a head no key can check, and on a head signed by another key', async () => {
    expect(await scanRecord(store, 'open-run', key.publicKeyPem)).toEqual({ anomaly: 'the run is not sealed' });
    expect(await scanRecord(store, RUN, null)).toEqual({ anomaly: expect.stringContaining('no public key') });
    const other = initSigningKey(path.join(dir, 'other'));
    expect(await scanRecord(store, RUN, other.publicKeyPem)).toEqual({ anomaly: expect.stringContaining('does not verify') });
  });

  it('gives up on a run whose last events were deleted (the last head no longer covers it)', async () => {
    const db = new Database(file);
    const last = db.prepare("SELECT * FROM events WHERE stream = 'run-scan-1' ORDER BY revision DESC LIMIT 1").get() as Record<string, unknown>;
    try {
      db.prepare('DELETE FROM events WHERE position = ?').run(last.position);
      expect(await scanRecord(store, RUN, key.publicKeyPem)).toEqual({ anomaly: expect.stringMatching(/cover|sealed/) });
    } finally {
      db.prepare('INSERT INTO events (position, stream, revision, id, type, data) VALUES (@position, @stream, @revision, @id, @type, @data)').run(last);
      db.close();
    }
  });
});
