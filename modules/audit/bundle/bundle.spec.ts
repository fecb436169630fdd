import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FsArtifactStore } from '../../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../../infra/eventstore/sqlite-event-store.js';
import { canonicalBytes } from '../../ledger/events/canonical-json.js';
import type { EventData } from '../../ledger/events/catalog.js';
import { buildEvent } from '../../ledger/events/envelope.js';
import { streamName } from '../../ledger/events/ids.js';
import { initSigningKey, keyIdOf, type SigningKey } from '../../ledger/tree-head.js';
import { BundleExportError, exportBundle } from './export.js';
import { blobPath } from './layout.js';
import { inflateLimit, readTarGz, writeTarGz } from './tar-io.js';
import { gzipBomb } from './testing/gzip-bomb.js';
import { SignedRunWriter } from './testing/signed-run.js';
import { REPORT_RENDERER } from './reports.js';
import { describeFailure, verifyBundle, type BundleVerification } from './verify.js';
import { BodyStore } from '../../llm-gateway/body-store.js';
import { rebuildBody, recordedBody } from '../../llm-gateway/request-pieces.js';
import { llmCall } from '../../../projections/transcript/testing/llm-call.js';

// The tamper matrix: a bundle exported from a small signed run verifies; each kind of mutation
// (re-packed into an otherwise intact archive) fails verification, and the first failure names the
// line, blob or file that was touched.

const RUN = 'run-bundle-spec';
let dir: string;
let key: SigningKey;
let otherKey: SigningKey;
let artifacts: FsArtifactStore;
let good: string;
let goodFiles: Map<string, Buffer>;
let checkpointSha: string;
let codeSha: string;

async function blob(content: string): Promise<{ sha256: string; size: number; key: string }> {
  const body = Buffer.from(content);
  const sha256 = createHash('sha256').update(body).digest('hex');
  const put = await artifacts.put(body, { sha256, size: body.length });
  return { sha256, size: body.length, key: put.key };
}

type IntegrityCheck = EventData<'WorkspaceIntegrityChecked'>;

/** A small completed run, signed by `signer` with a head every 4 events; `checks` adds integrity checks before the grading and at the end. */
async function writeRun(file: string, signer: SigningKey, runId = RUN, checks: { grading?: IntegrityCheck; end?: IntegrityCheck } = {}): Promise<SqliteEventStore> {
  const store = await SqliteEventStore.open(file);
  const w = new SignedRunWriter(store, runId, signer, { headEvery: 4 });
  const data = await blob('question,answer\n1+1,2\n');
  const base = await blob('{"weights":[0]}\n');
  const code1 = await blob('print("train v1")\n');
  const code2 = await blob('print("train v2")\nimport trl  # sft\n');
  const out = await blob('epoch 1 loss 0.5\n');
  const weights = await blob('{"weights":[1,2,3]}\n');
  const manifest = [{ path: 'weights.json', sha256: weights.sha256, size: weights.size }];
  const manifestBlob = await blob(JSON.stringify(manifest));
  checkpointSha = weights.sha256;
  codeSha = code2.sha256;
  await w.add('RunScheduled', { task: 'ref-arith', agent: 'reference', baseModel: 'tiny-base', budgetSeconds: 60, seed: 0, mode: 'free' });
  await w.add('WorkspacePrepared', {
    workspace: '/tmp/ws', sandbox: 'none', mounts: [],
    dataManifest: [{ path: 'data/train.csv', sha256: data.sha256, size: data.size }, { path: 'models/tiny-base/weights.json', sha256: base.sha256, size: base.size }],
  });
  await w.add('BaselineEvaluated', { score: 10, cached: false });
  await w.add('AgentStarted', { command: 'bash start.sh' });
  await w.add('FileChanged', { path: 'code/train.py', op: 'create', ...code1, observedAt: '2026-01-01T00:00:04.000Z' });
  await w.add('ProcessStarted', { pid: 100, ppid: 1, argv: ['python', 'code/train.py'], cwd: '/tmp/ws', executable: '/usr/bin/python3', observedAt: '2026-01-01T00:00:05.000Z' });
  await w.add('AgentOutput', { stream: 'stdout', chunk: out, observedAt: '2026-01-01T00:00:05.000Z' });
  await w.add('ProcessExited', { pid: 100, exitCode: 0, durationMs: 1500, observedAt: '2026-01-01T00:00:06.500Z' });
  await w.add('FileChanged', { path: 'code/train.py', op: 'modify', ...code2, previousSha256: code1.sha256, observedAt: '2026-01-01T00:00:08.000Z' });
  await w.add('SubmissionReceived', { submissionId: 's1', modelPath: 'output/ckpt1', manifest, checkpoint: manifestBlob });
  if (checks.grading) await w.add('WorkspaceIntegrityChecked', checks.grading);
  await w.add('SubmissionGraded', { submissionId: 's1', score: 40, improvement: 30 });
  await w.add('AgentExited', { exitCode: 0, reason: 'completed' });
  if (checks.end) await w.add('WorkspaceIntegrityChecked', checks.end);
  await w.add('RunCompleted', { best: 40, submissions: 1 });
  await w.seal();
  return store;
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-bundle-'));
  key = initSigningKey(path.join(dir, 'home-a'));
  otherKey = initSigningKey(path.join(dir, 'home-b'));
  artifacts = await FsArtifactStore.open(path.join(dir, 'artifacts'));
  const store = await writeRun(path.join(dir, 'ledger.db'), key);
  good = path.join(dir, 'good.tar.gz');
  await exportBundle({ runId: RUN, eventStore: store, artifacts, publicKeyPem: key.publicKeyPem, taskLevel: () => 1 }, good);
  await exportBundle({ runId: RUN, eventStore: store, artifacts, publicKeyPem: key.publicKeyPem, taskLevel: () => 1 }, path.join(dir, 'again.tar.gz'));
  await exportBundle({ runId: RUN, eventStore: store, artifacts, publicKeyPem: key.publicKeyPem, taskLevel: () => 1, withCheckpoints: true }, path.join(dir, 'ckpt.tar.gz'));
  await store.close();
  goodFiles = (await readTarGz(good)).files;
});
afterAll(async () => {
  await artifacts.close();
  rmSync(dir, { recursive: true, force: true });
});

let repacked = 0;
/** Re-packs the good bundle's files after `mutate` and verifies the result. */
async function tampered(mutate: (files: Map<string, Buffer>) => void, publicKeyPem = key.publicKeyPem): Promise<BundleVerification> {
  const files = new Map(goodFiles);
  mutate(files);
  const out = path.join(dir, `tampered-${repacked++}.tar.gz`);
  await writeTarGz(out, [...files].map(([p, body]) => ({ path: p, size: body.length, body })), new Date(0));
  return verifyBundle(out, { publicKeyPem });
}

const lines = () => goodFiles.get('events.ndjson')!.toString('utf8').split('\n').slice(0, -1);
const withLines = (ls: string[]) => (files: Map<string, Buffer>) => files.set('events.ndjson', Buffer.from(ls.map((l) => `${l}\n`).join('')));
const first = (v: BundleVerification) => {
  expect(v.ok).toBe(false);
  return v.failures[0];
};

describe('an exported bundle', () => {
  it('verifies offline: pinned to the signer key, with it among the trusted keys, or with the embedded key accepted unchecked', async () => {
    const ways = [
      [{ publicKeyPem: key.publicKeyPem }, 'pubkey'],
      [{ trustedKeys: [otherKey.publicKeyPem, key.publicKeyPem] }, 'trusted'],
      [{ trustEmbeddedKey: true }, 'embedded'],
      [{ trustedKeys: [otherKey.publicKeyPem], trustEmbeddedKey: true }, 'embedded'],
    ] as const;
    for (const [opts, keyTrust] of ways) {
      const v = await verifyBundle(good, opts);
      expect(v.failures.map(describeFailure)).toEqual([]);
      expect(v).toMatchObject({ ok: true, runId: RUN, events: lines().length, omittedBlobs: 1, keyId: keyIdOf(key.publicKeyPem), keyTrust, renderer: REPORT_RENDERER, reportsChecked: true, notes: [] });
      expect(v.heads).toBeGreaterThanOrEqual(4);
    }
  });

  it('fails when its key is neither given, nor trusted, nor explicitly accepted, saying what to do', async () => {
    for (const opts of [{}, { trustedKeys: [] }, { trustedKeys: [otherKey.publicKeyPem] }]) {
      const v = await verifyBundle(good, opts);
      expect(v).toMatchObject({ ok: false, keyTrust: 'untrusted', keyId: keyIdOf(key.publicKeyPem) });
      expect(v.failures).toHaveLength(1); // everything else was checked, with the bundled key, and holds
      expect(v.failures[0].check).toBe('key');
      expect(describeFailure(v.failures[0])).toMatch(
        new RegExp(`^public-key\\.pem: the bundle is signed by key ${keyIdOf(key.publicKeyPem)}, which is not a trusted key .*--pubkey <file>.*\`a2rl keys trust <file>\`.*--trust-embedded-key`),
      );
    }
  });

  it('is byte-identical when the same run is exported twice', () => {
    expect(readFileSync(path.join(dir, 'again.tar.gz')).equals(readFileSync(good))).toBe(true);
  });

  it('holds the layout, the public key only, and leaves checkpoint files out unless asked', async () => {
    const names = [...goodFiles.keys()];
    expect(names).toEqual(expect.arrayContaining(['bundle.json', 'events.ndjson', 'heads.json', 'public-key.pem', 'artifacts/manifest.json', 'reports/report.md', 'reports/report.html', 'reports/report.json', blobPath(codeSha)]));
    expect(names).not.toContain(blobPath(checkpointSha));
    expect(goodFiles.get('public-key.pem')!.toString()).toBe(key.publicKeyPem);
    expect(JSON.parse(goodFiles.get('bundle.json')!.toString())).toEqual({ format: 'a2rl.audit-bundle/3', runId: RUN, withCheckpoints: false, level: 1, renderer: REPORT_RENDERER });
    for (const body of goodFiles.values()) expect(body.toString('latin1')).not.toMatch(/PRIVATE KEY/);
    const manifest = JSON.parse(goodFiles.get('artifacts/manifest.json')!.toString()) as Array<{ sha256: string; kind: string; omitted: boolean }>;
    expect(manifest.find((m) => m.sha256 === checkpointSha)).toMatchObject({ kind: 'checkpoint', omitted: true });

    const ckpt = path.join(dir, 'ckpt.tar.gz');
    expect((await readTarGz(ckpt)).files.has(blobPath(checkpointSha))).toBe(true);
    expect(await verifyBundle(ckpt, { publicKeyPem: key.publicKeyPem })).toMatchObject({ ok: true, omittedBlobs: 0 });
  });

  it('puts the events in seq order, one canonical event per line', () => {
    const seqs = lines().map((l) => (JSON.parse(l) as { seq: number }).seq);
    expect(seqs).toEqual(seqs.map((_, i) => i));
  });
});

describe('the tamper matrix: verify-bundle fails and names what was touched', () => {
  it('any single byte changed in events.ndjson: the first failure names that line', async () => {
    const original = goodFiles.get('events.ndjson')!;
    const lineStarts = [0];
    for (let i = 0; i < original.length; i++) if (original[i] === 0x0a && i + 1 < original.length) lineStarts.push(i + 1);
    const positions = new Set<number>();
    lineStarts.forEach((start, i) => {
      const end = (lineStarts[i + 1] ?? original.length) - 1; // the newline ending this line
      for (const p of [start, start + 1, start + 9, Math.floor((start + end) / 2), end - 1, end]) positions.add(p);
    });
    for (const pos of positions) {
      const lineOf = lineStarts.filter((s) => s <= pos).length;
      for (const replacement of replacementsFor(original[pos])) {
        const bytes = Buffer.from(original);
        bytes[pos] = replacement;
        const v = await tampered((files) => files.set('events.ndjson', bytes));
        expect({ pos, replacement, line: first(v).line }).toEqual({ pos, replacement, line: lineOf });
      }
    }
  }, 120_000);

  it('a deleted line', async () => {
    const ls = lines();
    const f = first(await tampered(withLines([...ls.slice(0, 5), ...ls.slice(6)])));
    expect(describeFailure(f)).toMatch(/^events\.ndjson line 6: /);
  });

  it('the last line (the final signed head) deleted', async () => {
    const v = await tampered(withLines(lines().slice(0, -1)));
    expect(describeFailure(first(v))).toMatch(/events\.ndjson has \d+ lines, the signed tree has \d+ events|not covered by any signed tree head/);
    expect(v.failures.some((f) => /heads\.json: lists a head at seq/.test(f.message))).toBe(true);
  });

  it('reordered lines', async () => {
    const ls = lines();
    [ls[7], ls[9]] = [ls[9], ls[7]];
    expect(describeFailure(first(await tampered(withLines(ls))))).toMatch(/^events\.ndjson line 8: /);
  });

  it('an inserted line (a valid event copied from elsewhere in the run)', async () => {
    const ls = lines();
    ls.splice(10, 0, ls[6]);
    expect(describeFailure(first(await tampered(withLines(ls))))).toMatch(/^events\.ndjson line 11: /);
  });

  it('an inserted line that is a valid, signed-looking event of the right seq', async () => {
    // A forged event with the seq of its position: valid and canonical, but not the signed leaf.
    const ls = lines();
    const forged = buildEvent('BaselineEvaluated', RUN, 3, new Date('2026-01-01T00:00:03.000Z'), { score: 99, cached: true });
    ls.splice(3, 0, JSON.stringify(forged));
    expect(describeFailure(first(await tampered(withLines(ls))))).toMatch(/^events\.ndjson line 4: /);
  });

  it('an altered blob', async () => {
    const name = blobPath(codeSha);
    const f = first(await tampered((files) => files.set(name, Buffer.from(files.get(name)!.toString().replace('v2', 'v3')))));
    expect(describeFailure(f)).toBe(`${name}: ${f.message}`);
    expect(f.message).toMatch(/altered/);
  });

  it('a deleted blob', async () => {
    const name = blobPath(codeSha);
    const f = first(await tampered((files) => files.delete(name)));
    expect(f.artifact).toBe(name);
    expect(f.message).toMatch(/missing/);
  });

  it('a swapped key: the run re-signed with another key and public-key.pem replaced', async () => {
    const store = await writeRun(path.join(dir, 'resigned.db'), otherKey);
    const forged = path.join(dir, 'resigned.tar.gz');
    await exportBundle({ runId: RUN, eventStore: store, artifacts, publicKeyPem: otherKey.publicKeyPem, taskLevel: () => 1 }, forged);
    await store.close();
    // Self-consistent: the embedded key alone accepts it; trusting or pinning the signer's key catches it.
    expect((await verifyBundle(forged, { trustEmbeddedKey: true })).ok).toBe(true);
    const untrusted = await verifyBundle(forged, { trustedKeys: [key.publicKeyPem] });
    expect(untrusted.failures.map((f) => f.check)).toEqual(['key']);
    expect(untrusted.failures[0].message).toContain(`signed by key ${keyIdOf(otherKey.publicKeyPem)}, which is not a trusted key`);
    expect((await verifyBundle(forged)).ok).toBe(false);
    const v = await verifyBundle(forged, { publicKeyPem: key.publicKeyPem });
    expect(describeFailure(first(v))).toMatch(/public-key\.pem \(key id \w+\) is not the key given with --pubkey/);
    expect(v.failures.some((f) => f.check === 'tree-head' && /does not verify/.test(f.message))).toBe(true);
  });

  it('a swapped key without pinning: heads re-signed, the original public-key.pem kept', async () => {
    const forgedFiles = (await readTarGz(path.join(dir, 'resigned.tar.gz'))).files;
    const v = await tampered((files) => {
      files.set('events.ndjson', forgedFiles.get('events.ndjson')!);
      files.set('heads.json', forgedFiles.get('heads.json')!);
    });
    expect(first(v).check).toBe('tree-head');
    expect(describeFailure(first(v))).toMatch(/^events\.ndjson line \d+: signature by key \w+ does not verify/);
  });

  it('an edited heads.json: a root, a leaf, a proof, or only its formatting', async () => {
    const heads = JSON.parse(goodFiles.get('heads.json')!.toString()) as { leaves: string[]; heads: Array<{ rootHash: string; previous: { inclusion: string[] } | null }> };
    const flip = (h: string) => (h[0] === 'a' ? 'b' : 'a') + h.slice(1);
    const edits: Array<(h: typeof heads) => void> = [
      (h) => (h.heads[1].rootHash = flip(h.heads[1].rootHash)),
      (h) => (h.leaves[2] = flip(h.leaves[2])),
      (h) => (h.heads[2].previous!.inclusion[0] = flip(h.heads[2].previous!.inclusion[0])),
    ];
    for (const edit of edits) {
      const copy = JSON.parse(JSON.stringify(heads)) as typeof heads;
      edit(copy);
      const f = first(await tampered((files) => files.set('heads.json', Buffer.from(JSON.stringify(copy)))));
      expect(f.message).toMatch(/^heads\.json: /);
    }
    const f = first(await tampered((files) => files.set('heads.json', Buffer.from(`${files.get('heads.json')!.toString()}\n`))));
    expect(f.message).toBe('heads.json: not in canonical JSON form (RFC 8785): the file was edited');
  });

  it('an edited report (the bundle names this renderer version, so its reports are re-rendered)', async () => {
    for (const name of ['reports/report.md', 'reports/report.html', 'reports/report.json']) {
      const v = await tampered((files) => files.set(name, Buffer.from(files.get(name)!.toString().replace('40', '95'))));
      expect(first(v).message).toBe(`${name} differs from the report re-rendered from the bundle's events and blobs`);
      expect(v).toMatchObject({ reportsChecked: true, notes: [] });
    }
  });

  it('a bundle.json that is not one of the three formats: format 3 or 2 without a renderer, a renderer that is not a version, format 1 with one', async () => {
    const descriptors: Array<[Record<string, unknown>, RegExp]> = [
      [{ format: 'a2rl.audit-bundle/3', runId: RUN, withCheckpoints: false, level: 1 }, /^bundle\.json: must hold exactly format, runId, withCheckpoints, level and renderer$/],
      [{ format: 'a2rl.audit-bundle/2', runId: RUN, withCheckpoints: false, level: 1 }, /^bundle\.json: must hold exactly format, runId, withCheckpoints, level and renderer$/],
      [{ format: 'a2rl.audit-bundle/2', runId: RUN, withCheckpoints: false, level: 1, renderer: 'a2rl.report/2\u001b[32m OK' }, /^bundle\.json: renderer must be a report renderer version/],
      [{ format: 'a2rl.audit-bundle/1', runId: RUN, withCheckpoints: false, level: 1, renderer: REPORT_RENDERER }, /^bundle\.json: must hold exactly format, runId, withCheckpoints and level \(format "a2rl\.audit-bundle\/1"\)$/],
      [{ format: 'a2rl.audit-bundle/4', runId: RUN, withCheckpoints: false, level: 1, renderer: REPORT_RENDERER }, /^bundle\.json: format is "a2rl\.audit-bundle\/4"; this a2rl reads/],
    ];
    for (const [descriptor, message] of descriptors) {
      const v = await tampered((files) => files.set('bundle.json', canonicalBytes(descriptor)));
      expect(describeFailure(first(v))).toMatch(message);
    }
  });
});

describe('model-call bodies stored as pieces', () => {
  it('are carried with their manifests and pieces: the bundle verifies offline and rebuilds each body; a missing piece fails', async () => {
    const runId = 'run-bundle-pieces';
    const store = await SqliteEventStore.open(path.join(dir, 'pieces.db'));
    const w = new SignedRunWriter(store, runId, key, { headEvery: 4 });
    const bodies = new BodyStore({ storeBlob: (body) => blob(body.toString('utf8')) });
    const text = (tag: string) => `${tag} ${'lorem ipsum '.repeat(60)}`;
    const sent = [0, 1].map((i) => Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text('task') }, ...(i ? [{ role: 'assistant', content: text('answer') }, { role: 'user', content: text('result') }] : [])], system: text('system') })));
    await w.add('RunScheduled', { task: 'ref-arith', agent: 'reference', baseModel: 'tiny-base', budgetSeconds: 60, seed: 0, mode: 'free' });
    for (const [i, body] of sent.entries()) {
      const stored = await bodies.store(body, 'messages', 'request');
      bodies.adopt(stored);
      if (!('pieces' in stored)) throw new Error('expected pieces');
      const { request: _whole, ...call } = llmCall({ callId: `c${i}`, response: await blob(`response c${i}`) });
      await w.add('LlmCallRecorded', { ...call, requestPieces: stored.pieces });
    }
    await w.add('RunCompleted', { submissions: 0 });
    await w.seal();
    const out = path.join(dir, 'pieces.tar.gz');
    await exportBundle({ runId, eventStore: store, artifacts, publicKeyPem: key.publicKeyPem, taskLevel: () => 1 }, out);
    await store.close();
    expect((await verifyBundle(out, { publicKeyPem: key.publicKeyPem })).failures).toEqual([]);

    const files = (await readTarGz(out)).files;
    const listed = JSON.parse(files.get('artifacts/manifest.json')!.toString()) as { sha256: string; kind: string }[];
    const calls = files.get('events.ndjson')!.toString().split('\n').filter((l) => l.includes('LlmCallRecorded')).map((l) => (JSON.parse(l) as { data: EventData<'LlmCallRecorded'> }).data);
    const fromBundle = async (sha256: string) => files.get(blobPath(sha256)) ?? null;
    for (const [i, call] of calls.entries()) expect((await rebuildBody(recordedBody(call, 'request'), fromBundle)).equals(sent[i])).toBe(true);
    const piece = calls[0].requestPieces!.pieces[0];
    expect(listed.find((m) => m.sha256 === piece)?.kind).toBe('llm-body');

    const without = new Map(files);
    without.delete(blobPath(piece));
    const gone = path.join(dir, 'pieces-gone.tar.gz');
    await writeTarGz(gone, [...without].map(([p, body]) => ({ path: p, size: body.length, body })), new Date(0));
    const v = await verifyBundle(gone, { publicKeyPem: key.publicKeyPem });
    expect([v.ok, v.failures[0]?.artifact]).toEqual([false, blobPath(piece)]);
  });
});

describe('bundles whose reports another renderer version rendered', () => {
  /** The good bundle as an older a2rl (or another renderer) would have written it: its descriptor, and reports in other bytes. */
  const older = (descriptor: Record<string, unknown>) => (files: Map<string, Buffer>) => {
    files.set('bundle.json', canonicalBytes(descriptor));
    for (const name of ['reports/report.md', 'reports/report.html', 'reports/report.json']) files.set(name, Buffer.from(`${files.get(name)!.toString()}(rendered by an older renderer)\n`));
  };

  it('an older-style bundle (format 1: no renderer named) with report bytes the current renderer would not give verifies, with a note', async () => {
    const v = await tampered(older({ format: 'a2rl.audit-bundle/1', runId: RUN, withCheckpoints: false, level: 1 }));
    expect(v.failures.map(describeFailure)).toEqual([]);
    expect(v).toMatchObject({ ok: true, renderer: null, reportsChecked: false, events: lines().length, omittedBlobs: 1 });
    expect(v.notes).toEqual([
      `bundle.json names no report renderer (format "a2rl.audit-bundle/1": exported before bundles recorded it); this a2rl renders "${REPORT_RENDERER}", so reports/ were not re-rendered or compared and are not verified (events, heads, key, blobs and integrity were verified as usual)`,
    ]);
  });

  it('a bundle naming another renderer version verifies with a note naming it; the rest is still checked', async () => {
    const descriptor = { format: 'a2rl.audit-bundle/2', runId: RUN, withCheckpoints: false, level: 1, renderer: 'a2rl.report/1' };
    const v = await tampered(older(descriptor));
    expect(v).toMatchObject({ ok: true, renderer: 'a2rl.report/1', reportsChecked: false });
    expect(v.notes).toEqual([expect.stringMatching(new RegExp(`^the reports were rendered by report renderer "a2rl\\.report/1"; this a2rl renders "${REPORT_RENDERER.replace(/[./]/g, '\\$&')}", so reports/ were not re-rendered`))]);
    // Not re-rendering the reports skips nothing else: an altered blob or event line still fails.
    const blobName = blobPath(codeSha);
    const altered = await tampered((files) => {
      older(descriptor)(files);
      files.set(blobName, Buffer.from(files.get(blobName)!.toString().replace('v2', 'v3')));
    });
    expect(first(altered).artifact).toBe(blobName);
    const ls = lines();
    [ls[7], ls[9]] = [ls[9], ls[7]];
    const moved = await tampered((files) => {
      older(descriptor)(files);
      withLines(ls)(files);
    });
    expect(describeFailure(first(moved))).toMatch(/^events\.ndjson line 8: /);
  });

  it('an extra file, and a file missing from the layout', async () => {
    expect(describeFailure(first(await tampered((files) => files.set('notes.txt', Buffer.from('trust me')))))).toMatch(/^notes\.txt: unexpected file/);
    expect(describeFailure(first(await tampered((files) => files.delete('heads.json'))))).toBe('heads.json is missing from the bundle');
  });

  it('a damaged archive is a failure, not a crash', async () => {
    const damaged = path.join(dir, 'damaged.tar.gz');
    const bytes = readFileSync(good);
    writeFileSync(damaged, bytes.subarray(0, Math.floor(bytes.length / 2)));
    const v = await verifyBundle(damaged);
    expect(first(v).check).toBe('bundle');
  });
});

describe('decompression bombs: the inflated size is bounded before it is inflated', () => {
  const GiB = 1024 ** 3;
  const MiB = 1024 ** 2;
  const bomb = (name: string, entries: Array<{ path: string; size: number }>, trailing = 0) => {
    const file = path.join(dir, name);
    writeFileSync(file, gzipBomb(entries, trailing));
    return file;
  };
  // Peak memory only grows; its growth over this block bounds what a refusal held at once.
  let peakBefore: number;
  beforeAll(() => {
    peakBefore = process.resourceUsage().maxRSS * 1024;
  });

  it('2 MB that would inflate to 2 GiB as one entry: refused from its tar header, nearly nothing inflated', async () => {
    const file = bomb('bomb-one.tar.gz', [{ path: 'events.ndjson', size: 2 * GiB }]);
    const size = statSync(file).size;
    expect(size).toBeLessThan(3 * MiB);
    const read = await readTarGz(file);
    expect(read.limit).toBe(inflateLimit(size));
    expect(read.inflated).toBeLessThan(MiB);
    expect(read.files.size).toBe(0);
    expect(read.problems).toEqual([expect.stringMatching(new RegExp(`^the archive inflates to more than ${read.limit} bytes \\(entry "events\\.ndjson" declares ${2 * GiB} bytes.*refused as a possible decompression bomb`))]);

    const v = await verifyBundle(file, { publicKeyPem: key.publicKeyPem });
    expect(v.ok).toBe(false);
    expect(v.failures).toHaveLength(1);
    expect(describeFailure(v.failures[0])).toBe(read.problems[0]);
  });

  it('many honest entries adding up to 2 GiB: refused once the limit is passed, having inflated no more than it', async () => {
    const entries = Array.from({ length: 32 }, (_, i) => ({ path: blobPath(i.toString(16).padStart(64, '0')), size: 64 * MiB }));
    const read = await readTarGz(bomb('bomb-many.tar.gz', entries));
    expect(read.inflated).toBeLessThanOrEqual(read.limit);
    expect(read.problems[0]).toMatch(/^the archive inflates to more than \d+ bytes \(entry "artifacts\/sha256\/.*" declares 67108864 bytes, \d+ with the entries before it/);
  });

  it('2 GiB of data after the end of a tiny archive: not read, since the archive ends before it', async () => {
    const read = await readTarGz(bomb('bomb-trailing.tar.gz', [{ path: 'bundle.json', size: 10 }], 2 * GiB));
    expect(read).toMatchObject({ problems: [], tooLarge: false });
    expect([...read.files.keys()]).toEqual(['bundle.json']);
    expect(read.files.get('bundle.json')).toHaveLength(10);
    expect(read.inflated).toBeLessThan(read.limit);
  });

  it('an archive whose headers are all small but whose inflated stream is not: refused by counting what gunzip produces', async () => {
    // A limit below one entry's padding-free size would be caught from its header; a limit below the
    // headers and end blocks alone can only be caught by the count.
    const read = await readTarGz(bomb('bomb-small.tar.gz', [{ path: 'bundle.json', size: 0 }]), { maxInflatedBytes: 1000 });
    expect(read.tooLarge).toBe(true);
    expect(read.inflated).toBeGreaterThan(1000);
    expect(read.problems).toEqual([expect.stringMatching(/^the archive inflates to more than 1000 bytes \(refused after \d+ bytes; \d+ bytes compressed\): refused as a possible decompression bomb; raise it/)]);
  });

  it('held no more than a bounded amount of memory while refusing them', () => {
    const grown = process.resourceUsage().maxRSS * 1024 - peakBefore;
    expect(grown).toBeLessThan(400 * MiB); // before the bound, the one-entry bomb alone peaked above 4 GB
  });

  it('a real bundle reads under the default limit; a configured limit below its size refuses it', async () => {
    const read = await readTarGz(good);
    expect(read.problems).toEqual([]);
    expect(read.inflated).toBeLessThan(read.limit);
    const v = await verifyBundle(good, { publicKeyPem: key.publicKeyPem, maxInflatedBytes: 4096 });
    expect(v.ok).toBe(false);
    expect(v.failures[0].message).toMatch(/^the archive inflates to more than 4096 bytes .*raise it with --max-inflated <bytes>/);
  });
});

describe("the run's own integrity verdict", () => {
  const check = (phase: 'grading' | 'end', differences: IntegrityCheck['differences'] = []): IntegrityCheck => ({
    phase, ...(phase === 'grading' ? { submissionId: 's1' } : {}), ok: differences.length === 0, full: phase === 'end', checked: 2, differences, observedAt: '2026-01-01T00:00:09.000Z',
  });

  async function exported(name: string, checks: { grading?: IntegrityCheck; end?: IntegrityCheck }): Promise<string> {
    const store = await writeRun(path.join(dir, `${name}.db`), key, name, checks);
    const out = path.join(dir, `${name}.tar.gz`);
    await exportBundle({ runId: name, eventStore: store, artifacts, publicKeyPem: key.publicKeyPem, taskLevel: () => 1 }, out);
    await store.close();
    return out;
  }

  it('a run whose checks found data/ and models/ unchanged verifies', async () => {
    const v = await verifyBundle(await exported('intact-run', { grading: check('grading'), end: check('end') }), { publicKeyPem: key.publicKeyPem });
    expect(v.failures.map(describeFailure)).toEqual([]);
  });

  it('a run whose read-only world was modified is exported, and fails verification in one line naming the paths', async () => {
    const modified = check('end', [
      { path: 'data/train.csv', expected: 'a'.repeat(64), actual: 'b'.repeat(64) },
      { path: 'models/tiny-base/weights.json', expected: 'c'.repeat(64), actual: null, found: 'symlink' },
    ]);
    const file = await exported('tampered-run', { grading: check('grading'), end: modified });
    const v = await verifyBundle(file, { publicKeyPem: key.publicKeyPem });
    expect(v.ok).toBe(false);
    expect(v.failures).toHaveLength(1); // the record itself is authentic
    expect(v.failures[0]).toMatchObject({ check: 'integrity' });
    expect(describeFailure(v.failures[0])).toMatch(
      /^read-only data\/models modified: data\/train\.csv \(changed\), models\/tiny-base\/weights\.json \(symlink instead of a file\); found by the integrity check at seq \d+ \(end of run\)$/,
    );
    const md = (await readTarGz(file)).files.get('reports/report.md')!.toString();
    expect(md).toContain('read-only data/models modified: `data/train.csv`, `models/tiny-base/weights.json`');
  });
});

describe('export refuses what would not verify', () => {
  it('a run with no signed head', async () => {
    const store = await SqliteEventStore.open(path.join(dir, 'unsigned.db'));
    await store.append(streamName('unsigned'), [buildEvent('RunScheduled', 'unsigned', 0, new Date(0), { task: 'ref-arith', agent: 'reference', baseModel: 'b', budgetSeconds: 1, seed: 0, mode: 'free' })], 'no_stream');
    await expect(exportBundle({ runId: 'unsigned', eventStore: store, artifacts, publicKeyPem: key.publicKeyPem }, path.join(dir, 'x.tar.gz'))).rejects.toThrow(/has no signed tree head/);
    await expect(exportBundle({ runId: 'nope', eventStore: store, artifacts, publicKeyPem: key.publicKeyPem }, path.join(dir, 'x.tar.gz'))).rejects.toThrow(BundleExportError);
    await store.close();
  });

  it('a run with events after its last signed head', async () => {
    const store = await writeRun(path.join(dir, 'open.db'), key, 'open-run');
    await store.append(streamName('open-run'), [buildEvent('RunResumed', 'open-run', lines().length, new Date(0), {})], BigInt(lines().length - 1));
    await expect(exportBundle({ runId: 'open-run', eventStore: store, artifacts, publicKeyPem: key.publicKeyPem }, path.join(dir, 'x.tar.gz'))).rejects.toThrow(
      `run "open-run" cannot be exported yet: events from seq ${lines().length - 1} to ${lines().length} are not covered by a signed tree head yet`,
    );
    await store.close();
  });

  it('a run signed by another key than the one given', async () => {
    const store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
    await expect(exportBundle({ runId: RUN, eventStore: store, artifacts, publicKeyPem: otherKey.publicKeyPem }, path.join(dir, 'x.tar.gz'))).rejects.toThrow(/does not verify with this ledger's public key/);
    await store.close();
  });
});

/** A few different bytes to put at a position: a neighbour, a digit or letter swap, a space, a newline. */
function replacementsFor(byte: number): number[] {
  const options = [byte ^ 0x01, 0x20, 0x0a, 0x30 + ((byte + 1) % 10)];
  return [...new Set(options)].filter((b) => b !== byte);
}
