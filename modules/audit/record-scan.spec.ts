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
import { EnvelopeTail } from './record-scan.js';
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
const inThread = (store: EventStore): SegmentScanner => (runId, queue, onProgress) => scanChunks(storedChunks(store, runId), runId, queue, onProgress);

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

describe('EnvelopeTail', () => {
  // What the fast check reads off the end of an event's bytes, as the regular expression that read it before reads it.
  const TAIL = /,"id":"([^"\\]*)","occurredAt":"[^"\\]*","runId":"([^"\\]*)","schemaVersion":([1-9][0-9]{0,8}),"seq":(0|[1-9][0-9]{0,15}),"type":"([^"\\]*)"\}$/;
  const runId = 'tail-run';
  const window = 240 + runId.length;
  const expected = (bytes: Buffer) => {
    const m = TAIL.exec(bytes.toString('latin1', Math.max(0, bytes.length - window)));
    return m && { id: m[1], runMatches: m[2] === runId, version: Number(m[3]), seq: Number(m[4]), type: m[5] };
  };
  const read = (bytes: Buffer) => {
    const tail = new EnvelopeTail(runId, window);
    // The event in the middle of a page, after a separator, as the scan reads it.
    const page = Buffer.concat([Buffer.from(' {"x":1} '), bytes, Buffer.from(' {"y":2}')]);
    const start = 9;
    if (!tail.read(page, start, start + bytes.length)) return null;
    return { id: page.toString('latin1', tail.idStart, tail.idEnd), runMatches: tail.runMatches, version: tail.version, seq: tail.seq, type: page.toString('latin1', tail.typeStart, tail.typeEnd) };
  };
  const event = (fields: { id?: string; run?: string; version?: string; seq?: string; type?: string; data?: string } = {}) =>
    Buffer.from(`{"data":${fields.data ?? '{"a":"b"}'},"id":"${fields.id ?? '0e0c4c2e-9d1c-5f55-a0a4-7d3c33c2b0a1'}","occurredAt":"2026-01-01T00:00:00.000Z","runId":"${fields.run ?? runId}","schemaVersion":${fields.version ?? '1'},"seq":${fields.seq ?? '12'},"type":"${fields.type ?? 'AgentOutput'}"}`, 'latin1');

  it('reads an envelope as the regular expression does, and not where it does not', () => {
    const cases = [
      event(), event({ seq: '0' }), event({ seq: '1234567890123456' }), event({ seq: '12345678901234567' }), event({ seq: '012' }), event({ seq: '' }),
      event({ version: '0' }), event({ version: '123456789' }), event({ version: '1234567890' }), event({ type: '' }), event({ type: 'Agent\\Output' }),
      event({ run: 'other-run' }), event({ run: 'tail-ru' }), event({ run: 'tail-run2' }), event({ run: '' }), event({ id: '' }), event({ id: 'a"b' }),
      event({ id: 'x'.repeat(200) }), event({ id: 'x'.repeat(150) }), event({ data: '{"id":"nested","seq":3}' }), event({ type: 'Ag\xe9nt' }),
      Buffer.from('{"seq":1,"type":"AgentOutput"}'), Buffer.from('}'), Buffer.from(''), Buffer.from('"}'),
    ];
    for (const bytes of cases) expect([bytes.toString('latin1'), read(bytes)]).toEqual([bytes.toString('latin1'), expected(bytes)]);
  });

  it('reads every byte changed, dropped or added near the end as the regular expression does', () => {
    const base = event();
    const bytes = [0x22, 0x5c, 0x2c, 0x3a, 0x30, 0x31, 0x7d, 0x61, 0x20, 0xe9];
    let matched = 0;
    for (let at = Math.max(0, base.length - 200); at < base.length; at++) {
      for (const b of bytes) {
        const changed = Buffer.from(base);
        changed[at] = b;
        const dropped = Buffer.concat([base.subarray(0, at), base.subarray(at + 1)]);
        const added = Buffer.concat([base.subarray(0, at), Buffer.from([b]), base.subarray(at)]);
        for (const variant of [changed, dropped, added]) {
          const want = expected(variant);
          if (want) matched += 1;
          expect([variant.toString('latin1'), read(variant)]).toEqual([variant.toString('latin1'), want]);
        }
      }
    }
    expect(matched).toBeGreaterThan(100);
  });
});
