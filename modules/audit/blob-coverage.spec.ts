import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { artifactKey } from '../artifacts/artifact-store.port.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { streamName } from '../ledger/events/ids.js';
import { initSigningKey, type SigningKey } from '../ledger/tree-head.js';
import { BodyStore } from '../llm-gateway/body-store.js';
import { rebuildBody, recordedBody } from '../llm-gateway/request-pieces.js';
import { chunkListHash } from '../runs/agent-home.js';
import { llmCall } from '../../projections/transcript/testing/llm-call.js';
import { sha } from '../../test/testing/helpers.js';
import { artifactRefs } from './artifact-refs.js';
import { exportBundle } from './bundle/export.js';
import { BUNDLE_FORMAT_V2, blobPath, expectedManifest } from './bundle/layout.js';
import { readTarGz, writeTarGz } from './bundle/tar-io.js';
import { SignedRunWriter } from './bundle/testing/signed-run.js';
import { describeFailure, verifyBundle } from './bundle/verify.js';
import { asOlderFormat } from './bundle/testing/older-format.js';
import { scanChunks, scanRecord, storedChunks, type SegmentScanner } from './record-scan.js';
import { RunVerifier } from './verify.service.js';

// `a2rl verify` and the audit bundle cover every blob the record references: model-call bodies
// (whole, and pieces with their manifests), the files processes ran (where kept), transient files'
// contents and the agent's home archives, besides the workspace, output and submission blobs. A
// missing or altered one is named with its role; the fast check of the record finds the same blobs
// as the per-event fold; a bundle carries them, verifies offline and rebuilds the transcript.

const RUN = 'run-blob-coverage';
const AT = '2026-01-01T00:00:00.000Z';

let dir: string;
let key: SigningKey;
let store: SqliteEventStore;
let artifacts: FsArtifactStore;
let verifier: RunVerifier;
let events: A2rlEvent[];
/** Request bodies as the agent sent them, by call. */
const sent: Buffer[] = [];
/** The blobs each test touches, by what they are. */
const b: Record<string, { sha256: string; size: number; key: string }> = {};

async function put(name: string, content: string): Promise<{ sha256: string; size: number; key: string }> {
  const body = Buffer.from(content);
  const stored = await artifacts.put(body, { sha256: sha(body), size: body.length });
  b[name] = { sha256: sha(body), size: body.length, key: stored.key };
  return b[name];
}

async function writeRun(): Promise<void> {
  const w = new SignedRunWriter(store, RUN, key, { headEvery: 5 });
  await w.add('RunScheduled', { task: 'ref-arith', agent: 'reference', baseModel: 'tiny-base', budgetSeconds: 60, seed: 0, mode: 'free' });
  await w.add('WorkspacePrepared', { workspace: '/ws', sandbox: 'none', mounts: [], dataManifest: [] });
  await w.add('AgentStarted', { command: 'claude -p task' });
  // A model call with whole bodies, then two whose requests are stored as pieces (the second shares the first's).
  sent.push(Buffer.from('{"not pieces": true'));
  await w.add('LlmCallRecorded', llmCall({ callId: 'c0', request: await put('request', sent[0].toString()), response: await put('response', 'answer 0') }));
  const bodies = new BodyStore({ storeBlob: (body) => put(`body-${sha(body)}`, body.toString('utf8')) });
  const text = (tag: string) => `${tag} ${'lorem ipsum '.repeat(60)}`;
  for (const i of [1, 2]) {
    const body = Buffer.from(JSON.stringify({ model: 'm', system: text('system'), messages: [{ role: 'user', content: text('task') }, ...(i === 2 ? [{ role: 'assistant', content: text('answer') }, { role: 'user', content: text('result') }] : [])] }));
    sent.push(body);
    const stored = await bodies.store(body, 'messages', 'request');
    bodies.adopt(stored);
    if (!('pieces' in stored)) throw new Error('expected the request stored as pieces');
    const { request: _whole, ...call } = llmCall({ callId: `c${i}`, response: await put(`response-${i}`, `answer ${i}`) });
    await w.add('LlmCallRecorded', { ...call, requestPieces: stored.pieces });
  }
  // Processes: a system interpreter hashed but not kept, running a kept script; again without one;
  // then the same bytes as the interpreter, kept, as a file the agent ran from its workspace.
  const python = 'ELF python interpreter bytes';
  b.python = { sha256: sha(python), size: python.length, key: artifactKey(sha(python)) };
  const unkept = { path: '/usr/bin/python3', sha256: b.python.sha256, size: b.python.size, note: 'system file: hashed, not kept' };
  await w.add('ProcessStarted', {
    pid: 10, ppid: 1, argv: ['python3', 'code/train.py'], cwd: '/ws', executable: '/usr/bin/python3', capture: 'at-exec', observedAt: AT,
    exe: unkept, script: { path: '/ws/code/train.py', ...(await put('script', 'print("train")\n')), via: 'argument' },
  });
  await w.add('ProcessStarted', { pid: 11, ppid: 1, argv: ['python3', '-c', 'print(1)'], cwd: '/ws', executable: '/usr/bin/python3', capture: 'at-exec', exe: unkept, observedAt: AT });
  await artifacts.put(Buffer.from(python), { sha256: b.python.sha256, size: b.python.size });
  await w.add('ProcessStarted', { pid: 12, ppid: 1, argv: ['./tool'], cwd: '/ws', executable: '/ws/tool', capture: 'at-exec', exe: { path: '/ws/tool', ...b.python }, observedAt: AT });
  await w.add('TransientFileRecorded', { path: 'code/tmp.sh', ...(await put('transient', 'echo short-lived\n')), observedAt: AT });
  const chunks = [await put('piece1', 'session line 1\n'), await put('piece2', 'session line 2\n')].map(({ sha256, size }) => ({ sha256, size }));
  await w.add('AgentHomeArchived', {
    files: [{ path: '.claude/settings.json', sha256: (await put('home', '{"theme":"dark"}')).sha256, size: b.home.size }],
    skipped: 0, changedOnly: true,
    chunked: [{ path: '.claude/projects/s.jsonl', sha256: chunkListHash(chunks), size: chunks[0].size + chunks[1].size, chunks }],
    observedAt: AT,
  });
  await w.add('AgentExited', { exitCode: 0, reason: 'completed', observedAt: AT });
  await w.add('RunCompleted', { submissions: 0 });
  await w.seal();
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-blob-coverage-'));
  key = initSigningKey(path.join(dir, 'home'));
  store = await SqliteEventStore.open(path.join(dir, 'ledger.db'));
  artifacts = await FsArtifactStore.open(path.join(dir, 'artifacts'));
  await writeRun();
  events = [];
  for await (const { event } of store.readStream(streamName(RUN))) events.push(event);
  verifier = new RunVerifier({ store, artifacts, publicKeyPem: key.publicKeyPem, taskCacheDir: path.join(dir, 'tasks'), tmpDir: dir });
});
afterAll(async () => {
  await store.close();
  await artifacts.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `check` with the blob deleted from the artifact store (or its bytes replaced), then puts it back. */
async function withBlob<T>(sha256: string, change: 'deleted' | 'altered', check: () => Promise<T>): Promise<T> {
  const file = path.join(dir, 'artifacts', artifactKey(sha256));
  const saved = readFileSync(file);
  rmSync(file);
  if (change === 'altered') writeFileSync(file, Buffer.concat([saved, Buffer.from('!')]));
  try {
    return await check();
  } finally {
    rmSync(file, { force: true });
    writeFileSync(file, saved);
    chmodSync(file, 0o444);
  }
}

describe('a2rl verify', () => {
  it('checks the blobs of model calls, executed files, transient files and the agent home; an untouched run verifies', async () => {
    const refs = artifactRefs(events);
    const touched = ['request', 'response', 'script', 'python', 'transient', 'home', 'piece1', 'piece2'];
    expect(refs.map((r) => r.sha256)).toEqual(expect.arrayContaining(touched.map((name) => b[name].sha256)));
    // Every body piece and manifest of the calls stored as pieces, too.
    for (const call of events.filter((e): e is Extract<A2rlEvent, { type: 'LlmCallRecorded' }> => e.type === 'LlmCallRecorded' && !!e.data.requestPieces)) {
      const pieces = call.data.requestPieces!;
      expect(refs.map((r) => r.sha256)).toEqual(expect.arrayContaining([pieces.manifest.sha256, ...pieces.pieces]));
    }
    const result = await verifier.verify(RUN);
    expect(result.failures).toEqual([]);
    expect(result).toMatchObject({ ok: true, artifacts: refs.length });
  });

  const cases: Array<[string, 'deleted' | 'altered', () => string, RegExp]> = [
    ['a whole request body', 'deleted', () => b.request.sha256, /^request body of model call c0: blob \S+ is missing from the artifact store$/],
    ['a request body piece', 'altered', () => pieceOf('c2'), /^request body piece of model call c[12]: blob \S+ was altered/],
    ['a kept script a process ran', 'deleted', () => b.script.sha256, /^script \/ws\/code\/train\.py of process 10: blob \S+ is missing/],
    ['a kept executable whose bytes an earlier process ran unkept', 'altered', () => b.python.sha256, /^executable \/ws\/tool of process 12: blob \S+ was altered/],
    ["a transient file's content", 'altered', () => b.transient.sha256, /^content of transient file code\/tmp\.sh: blob \S+ was altered/],
    ['an agent home file', 'deleted', () => b.home.sha256, /^agent home file \.claude\/settings\.json: blob \S+ is missing/],
    ['a piece of a chunked agent home file', 'deleted', () => b.piece2.sha256, /^piece 2 of agent home file \.claude\/projects\/s\.jsonl: blob \S+ is missing/],
  ];
  it.each(cases)('names %s when it is %s, with its role and the seq that references it', async (_what, change, blob, message) => {
    const sha256 = blob();
    const result = await withBlob(sha256, change, () => verifier.verify(RUN));
    expect(result.ok).toBe(false);
    expect(result.failures).toEqual([expect.objectContaining({ check: 'artifact', artifact: artifactKey(sha256), seq: expect.any(Number) })]);
    expect(result.failures[0].message).toMatch(message);
  });

  it("finds in the fast check of the record exactly the blobs the per-event fold finds, in one segment or several", async () => {
    const inThread: SegmentScanner = (runId, queue, onProgress) => scanChunks(storedChunks(store, queue.stream), runId, queue, onProgress);
    const expected = artifactRefs(events);
    for (const parallel of [undefined, { scanner: inThread, threads: 3, minEvents: 0, chunkSize: 4 }]) {
      const scan = await scanRecord(store, RUN, key.publicKeyPem, { parallel });
      if (!scan || 'anomaly' in scan) throw new Error(`the fast check gave up: ${scan?.anomaly}`);
      expect(scan.refs).toEqual(expected);
    }
  });
});

const pieceOf = (callId: string) => {
  const call = events.find((e): e is Extract<A2rlEvent, { type: 'LlmCallRecorded' }> => e.type === 'LlmCallRecorded' && e.data.callId === callId)!;
  return call.data.requestPieces!.pieces.at(-1)!;
};

describe('the audit bundle', () => {
  let bundle: string;
  let files: Map<string, Buffer>;
  beforeAll(async () => {
    bundle = path.join(dir, 'run.tar.gz');
    await exportBundle({ runId: RUN, eventStore: store, artifacts, publicKeyPem: key.publicKeyPem, taskLevel: () => 1 }, bundle);
    files = (await readTarGz(bundle)).files;
  });
  const repacked = async (name: string, edit: (files: Map<string, Buffer>) => void) => {
    const copy = new Map(files);
    edit(copy);
    const out = path.join(dir, name);
    await writeTarGz(out, [...copy].map(([p, body]) => ({ path: p, size: body.length, body })), new Date(0));
    return verifyBundle(out, { publicKeyPem: key.publicKeyPem });
  };

  it('carries every blob verify checks, verifies offline, and rebuilds every request body from the bundle alone', async () => {
    const v = await verifyBundle(bundle, { publicKeyPem: key.publicKeyPem });
    expect(v.failures.map(describeFailure)).toEqual([]);
    const listed = JSON.parse(files.get('artifacts/manifest.json')!.toString()) as Array<{ sha256: string; kind: string }>;
    expect(listed.map((m) => m.sha256).sort()).toEqual(artifactRefs(events).map((r) => r.sha256).sort());
    const kind = (name: string) => listed.find((m) => m.sha256 === b[name].sha256)?.kind;
    expect(['request', 'response', 'script', 'python', 'transient', 'home', 'piece2'].map(kind)).toEqual(['llm-body', 'llm-body', 'exec', 'exec', 'transient', 'home', 'home']);
    expect(listed.some((m) => m.sha256 === chunkListHash([b.piece1, b.piece2]))).toBe(false); // a list of pieces, not a blob
    const fromBundle = async (sha256: string) => files.get(blobPath(sha256)) ?? null;
    const calls = events.filter((e): e is Extract<A2rlEvent, { type: 'LlmCallRecorded' }> => e.type === 'LlmCallRecorded');
    for (const [i, call] of calls.entries()) expect((await rebuildBody(recordedBody(call.data, 'request'), fromBundle)).equals(sent[i])).toBe(true);
  });

  it('fails offline without one of them, naming it', async () => {
    for (const name of ['script', 'transient', 'piece2', 'request']) {
      const v = await repacked(`without-${name}.tar.gz`, (copy) => copy.delete(blobPath(b[name].sha256)));
      expect(v.failures.map(describeFailure)).toEqual([`${blobPath(b[name].sha256)}: missing from the bundle (referenced at seq ${artifactRefs(events).find((r) => r.sha256 === b[name].sha256)!.seq})`]);
    }
  });

  it('of format 2 (exported before bundles carried these blobs) still verifies, with the manifest format 2 implied', async () => {
    const old = expectedManifest(events, false, BUNDLE_FORMAT_V2);
    const format2 = (copy: Map<string, Buffer>) => {
      const older = asOlderFormat(copy, BUNDLE_FORMAT_V2);
      copy.clear();
      for (const [name, body] of older) copy.set(name, body);
    };
    expect(old.length).toBeLessThan(artifactRefs(events).length);
    expect((await repacked('format-2.tar.gz', format2)).failures.map(describeFailure)).toEqual([]);
    // The same files under format 3 lack what format 3 carries.
    const v = await repacked('format-2-as-3.tar.gz', (copy) => {
      format2(copy);
      copy.set('bundle.json', files.get('bundle.json')!);
    });
    expect(v.ok).toBe(false);
    expect(describeFailure(v.failures[0])).toMatch(/^artifacts\/manifest\.json: does not list artifacts\/sha256\//);
  });
});
