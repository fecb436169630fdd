import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import { MemoryArtifactStore } from '../../infra/artifacts/memory-artifact-store.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { streamName } from '../ledger/events/ids.js';
import { LedgerService } from '../ledger/ledger.service.js';
import { Instrumentation } from './instrumentation.js';
import { RedactingArtifactStore } from './redacting-artifact-store.js';
import { RunRecorder } from './run-recorder.js';
import { RunRedaction } from './run-redaction.js';
import { sha } from '../../test/testing/helpers.js';

const TOKEN = ['tok', 'Zq81LmX0vB7nR4sT2wY6'].join('_');
const AT = new Date('2026-01-01T00:00:02.000Z');

/** Text of `size` bytes with the token at the given offsets. */
function textWithToken(size: number, at: number[]): Buffer {
  const text = Buffer.alloc(size, 'lorem ipsum dolor sit amet\n');
  for (const offset of at) Buffer.from(TOKEN).copy(text, offset);
  return text;
}

/** A stream that hands out `bytes` in pieces of `piece` bytes. */
const streamOf = (bytes: Buffer, piece = 64 * 1024) =>
  Readable.from(
    (function* () {
      for (let off = 0; off < bytes.length; off += piece) yield bytes.subarray(off, off + piece);
    })(),
  );

const everyBlobLacks = (store: MemoryArtifactStore, needle: string) => [...store.blobs.values()].every((b) => !b.includes(needle));

describe('RedactingArtifactStore', () => {
  let inner: MemoryArtifactStore;
  let redaction: RunRedaction;
  let spoolDir: string;
  let store: RedactingArtifactStore;

  beforeEach(() => {
    inner = new MemoryArtifactStore();
    redaction = new RunRedaction({ secrets: [{ kind: 'run-token', value: TOKEN }] });
    spoolDir = mkdtempSync(join(tmpdir(), 'a2rl-spool-'));
    store = new RedactingArtifactStore(inner, redaction, { tmpDir: spoolDir });
  });
  afterEach(() => rmSync(spoolDir, { recursive: true, force: true }));

  it('stores a text blob holding a secret redacted, under its own hash, and remembers the original hash', async () => {
    const original = Buffer.from(`export TOKEN=${TOKEN}\n`);
    const put = await store.put(original, { sha256: sha(original), size: original.length });

    const redacted = Buffer.from('export TOKEN=[REDACTED:run-token]\n');
    expect(put).toEqual({ sha256: sha(redacted), size: redacted.length, key: `sha256/${sha(redacted).slice(0, 2)}/${sha(redacted)}`, created: true });
    expect((await buffer(await store.get(put.sha256))).equals(redacted)).toBe(true);
    expect(await inner.exists(sha(original))).toBe(false);
    expect(everyBlobLacks(inner, TOKEN)).toBe(true);
    expect(redaction.blobs.get(sha(original))).toEqual({ ref: { sha256: put.sha256, size: put.size, key: put.key }, hits: [{ kind: 'run-token', count: 1 }] });
  });

  it('passes clean and binary blobs through untouched', async () => {
    const clean = Buffer.from('print("hello")\n');
    const binary = Buffer.concat([Buffer.from([0, 1, 2]), Buffer.from(TOKEN)]);
    for (const bytes of [clean, binary]) {
      const put = await store.put(bytes, { sha256: sha(bytes), size: bytes.length });
      expect(put.sha256).toBe(sha(bytes));
      expect(inner.blobs.get(sha(bytes))!.equals(bytes)).toBe(true);
    }
    expect(redaction.blobs.size).toBe(0);
  });

  it('redacts a streamed text blob window by window, to the bytes a whole-blob redaction gives', async () => {
    const original = textWithToken(3 * 1024 * 1024 + 5, [0, 1024 * 1024 - 7, 2 * 1024 * 1024 + 100, 3 * 1024 * 1024 + 5 - TOKEN.length]);
    const put = await store.put(streamOf(original), { sha256: sha(original), size: original.length });

    const expected = redaction.redactor.redactBlob(original)!;
    expect(expected.hits).toEqual([{ kind: 'run-token', count: 4 }]);
    expect(put.sha256).toBe(sha(expected.bytes));
    expect(inner.blobs.get(put.sha256)!.equals(expected.bytes)).toBe(true);
    expect(everyBlobLacks(inner, TOKEN)).toBe(true);
    expect(redaction.blobs.get(sha(original))?.hits).toEqual([{ kind: 'run-token', count: 4 }]);
    expect(readdirSync(spoolDir)).toEqual([]); // the spool is gone
  });

  it('passes a streamed binary or clean blob through as it came', async () => {
    const binary = Buffer.concat([Buffer.alloc(100), textWithToken(2 * 1024 * 1024, [5000])]);
    const clean = textWithToken(2 * 1024 * 1024, []);
    for (const bytes of [binary, clean]) {
      const put = await store.put(streamOf(bytes, 1000), { sha256: sha(bytes), size: bytes.length });
      expect(put.sha256).toBe(sha(bytes));
      expect(inner.blobs.get(sha(bytes))!.equals(bytes)).toBe(true);
    }
    expect(redaction.blobs.size).toBe(0);
    expect(readdirSync(spoolDir)).toEqual([]);
  });

  it('refuses a streamed blob that does not match its declaration (changed while read), storing nothing', async () => {
    const original = textWithToken(1024 * 1024, [10]);
    const changed = Buffer.from(original);
    changed[500_000] ^= 1;
    await expect(store.put(streamOf(changed), { sha256: sha(original), size: original.length })).rejects.toMatchObject({ name: 'ArtifactIntegrityError' });
    await expect(store.put(streamOf(Buffer.concat([original, Buffer.from('x')])), { sha256: sha(original), size: original.length })).rejects.toMatchObject({
      name: 'ArtifactIntegrityError',
    });
    expect(inner.blobs.size).toBe(0);
    expect(redaction.blobs.size).toBe(0);
    expect(readdirSync(spoolDir)).toEqual([]);
  });
});

describe('Instrumentation with secrets: the observers archive blobs redacted', () => {
  let home: string;
  let ws: string;

  beforeEach(() => {
    home = mkdtempSync(join(tmpdir(), 'a2rl-redact-'));
    ws = join(home, 'ws');
    for (const d of ['code', 'output', 'data']) mkdirSync(join(ws, d), { recursive: true });
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it('records a file and an output chunk holding the token by their redacted blobs, never the original bytes', async () => {
    const artifacts = new MemoryArtifactStore();
    const events = new MemoryEventStore();
    const ledger = new LedgerService(events, () => new Date());
    const recorder = new RunRecorder({ runId: 'run-1', ledger });
    const instrumentation = new Instrumentation({ root: ws, recorder, artifacts, clock: () => AT, secrets: [{ kind: 'run-token', value: TOKEN }] });
    await instrumentation.start();

    const first = `URL = "http://127.0.0.1:9/g/${TOKEN}"\n`;
    writeFileSync(join(ws, 'code', 'config.py'), first);
    await instrumentation.files.flush();
    const second = `URL = "http://127.0.0.1:9/g/${TOKEN}/submit"\n`;
    writeFileSync(join(ws, 'code', 'config.py'), second);
    await instrumentation.files.flush();
    instrumentation.output.write('stdout', Buffer.from(`submitting with ${TOKEN}\n`));
    await instrumentation.stop();

    const stored: A2rlEvent[] = [];
    for await (const r of events.readStream(streamName('run-1'))) stored.push(r.event);
    const firstRedacted = Buffer.from(first.replace(TOKEN, '[REDACTED:run-token]'));
    const secondRedacted = Buffer.from(second.replace(TOKEN, '[REDACTED:run-token]'));
    const blobFact = (eventType: string, extra: object) => ({ where: 'blob', eventType, ...extra, kind: 'run-token', count: 1, observedAt: AT.toISOString() });
    expect(stored.map((e) => [e.type, e.data])).toEqual([
      ['FileChanged', { path: 'code/config.py', op: 'create', sha256: sha(firstRedacted), size: firstRedacted.length, key: expect.stringContaining(sha(firstRedacted)), observedAt: expect.any(String) }],
      ['SecretRedacted', blobFact('FileChanged', { blob: 'file', path: 'code/config.py' })],
      [
        'FileChanged',
        {
          path: 'code/config.py',
          op: 'modify',
          sha256: sha(secondRedacted),
          size: secondRedacted.length,
          previousSha256: sha(firstRedacted),
          key: expect.stringContaining(sha(secondRedacted)),
          observedAt: expect.any(String),
        },
      ],
      ['SecretRedacted', blobFact('FileChanged', { blob: 'file', path: 'code/config.py' })],
      ['AgentOutput', { stream: 'stdout', chunk: { sha256: expect.any(String), size: expect.any(Number), key: expect.any(String) }, observedAt: AT.toISOString() }],
      ['SecretRedacted', blobFact('AgentOutput', { field: 'chunk', blob: 'output' })],
    ]);
    // Every recorded blob is in the store with the bytes it claims; no blob and no event holds the token.
    for (const e of stored) {
      const ref = e.type === 'FileChanged' ? e.data : e.type === 'AgentOutput' ? e.data.chunk : null;
      if (ref) expect(sha(artifacts.blobs.get(ref.sha256!)!)).toBe(ref.sha256);
    }
    expect((await buffer(await artifacts.get(sha(secondRedacted)))).equals(secondRedacted)).toBe(true);
    expect(await artifacts.exists(sha(first))).toBe(false);
    expect(everyBlobLacks(artifacts, TOKEN)).toBe(true);
    expect(JSON.stringify(stored)).not.toContain(TOKEN);
  });
});
