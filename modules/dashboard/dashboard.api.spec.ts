import 'reflect-metadata';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { testPlan } from '../../projections/campaign-progress/testing/campaign-plan.js';
import { sampleRun, TRAIN_V1, TRAIN_V2 } from '../../projections/run-analysis/testing/run-fixture.js';
import { failedCall, llmCall } from '../../projections/transcript/testing/llm-call.js';
import { leafHash, MerkleAccumulator } from '../ledger/merkle.js';
import { initSigningKey, signTreeHead } from '../ledger/tree-head.js';
import type { EventStore } from '../ledger/event-store.port.js';
import type { A2rlEvent, EventData, EventType } from '../ledger/events/catalog.js';
import { buildEvent, encodeEvent } from '../ledger/events/envelope.js';
import { campaignStreamName, streamName } from '../ledger/events/ids.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { MAX_SHOWN_BYTES } from './file-content.js';
import { openSse } from './testing/sse-client.js';
import { at, sha } from '../../test/testing/helpers.js';

// The dashboard's endpoints in the real app (createHttpApp) over a SQLite ledger and filesystem
// blobs: a finished, signed run with model calls and binary and large files; a run recorded while
// a client watches it live; a campaign.

const BINARY = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0xff, 0xfe]);
const LARGE = 'x'.repeat(MAX_SHOWN_BYTES + 100);

/** Re-numbers `specs` as one run's events from seq 0. */
const numbered = (runId: string, specs: Array<{ type: EventType; occurredAt: string; data: unknown }>) =>
  specs.map((e, seq) => buildEvent(e.type, runId, seq, e.occurredAt, e.data as EventData<EventType>));

/** The sample run with three model calls, a binary and a large file, and a signed head at the end. */
function finishedRun(runId: string, key: ReturnType<typeof initSigningKey>): A2rlEvent[] {
  const base = sampleRun(runId).events;
  const exit = base.findIndex((e) => e.type === 'AgentExited');
  const extra = [
    { type: 'LlmCallRecorded' as const, data: llmCall({ callId: 'c1', userText: 'Train' }) },
    { type: 'LlmCallRecorded' as const, data: failedCall({ callId: 'c2' }) },
    { type: 'LlmCallRecorded' as const, data: llmCall({ callId: 'c3' }) },
    { type: 'FileChanged' as const, data: { path: 'data/blob.bin', op: 'create', sha256: sha(BINARY), size: BINARY.length, observedAt: at(19) } },
    { type: 'FileChanged' as const, data: { path: 'logs/big.log', op: 'create', sha256: sha(LARGE), size: LARGE.length, observedAt: at(19) } },
  ].map((e) => ({ ...e, occurredAt: at(19) }));
  const events = numbered(runId, [...base.slice(0, exit), ...extra, ...base.slice(exit)]);
  const tree = new MerkleAccumulator();
  for (const e of events) tree.push(leafHash(encodeEvent(e)));
  const head = { runId, treeSize: events.length, rootHash: tree.root().toString('hex') };
  const signed = { treeSize: head.treeSize, rootHash: head.rootHash, signature: signTreeHead(head, key), keyId: key.keyId };
  return [...events, buildEvent('TreeHeadSigned', runId, events.length, at(21), signed)];
}

let home: string;
let app: INestApplication | undefined;
let store: EventStore;
let base: string;
let live: A2rlEvent[];
const saved = { ...process.env };

beforeAll(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'a2rl-dashboard-'));
  const key = initSigningKey(home);
  const ledger = await SqliteEventStore.open(path.join(home, 'ledger.db'));
  const artifacts = await FsArtifactStore.open(path.join(home, 'artifacts'));
  for (const body of [TRAIN_V1, TRAIN_V2, BINARY, LARGE].map((b) => Buffer.from(b))) await artifacts.put(body, { sha256: sha(body), size: body.length });
  await artifacts.close();
  await ledger.append(streamName('fx-done'), finishedRun('fx-done', key), 'no_stream');
  live = finishedRun('fx-live', key);
  await ledger.append(streamName('fx-live'), live.slice(0, 6), 'no_stream');
  await ledger.append(campaignStreamName('cmp-a'), [buildEvent('CampaignScheduled', 'cmp-a', 0, at(0), testPlan(2))], 'no_stream');
  await ledger.close();
  for (const k of ['A2RL_LEDGER_URL', 'A2RL_ARTIFACTS_URL', 'A2RL_READMODEL_URL', 'A2RL_WORKSPACES_DIR', 'A2RL_HTTP_HOST', 'A2RL_AUTH']) delete process.env[k];
  process.env.A2RL_HOME = home;
  const { createHttpApp } = await import('../../src/server.js');
  app = await createHttpApp();
  await app.listen(0, '127.0.0.1');
  store = app.get(EVENT_STORE);
  base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
});
afterAll(async () => {
  await app?.close();
  process.env = saved;
  await rm(home, { recursive: true, force: true });
});

const get = async (p: string) => {
  const res = await fetch(`${base}${p}`);
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type') ?? '', text, body: /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : null };
};

describe('GET /runs/:id/live', () => {
  it('sends the recorded events after after_seq, then each one appended while connected, a status after each batch, and end once sealed', async () => {
    const sse = await openSse(`${base}/runs/fx-live/live?after_seq=2`);
    expect([sse.status, sse.type]).toEqual([200, expect.stringMatching(/^text\/event-stream/)]);
    const first = await sse.next((e) => e.event === 'status');
    expect(first.filter((e) => e.event === 'event').map((e) => [e.id, JSON.parse(e.data).type])).toEqual([['3', 'AgentStarted'], ['4', 'FileChanged'], ['5', 'ProcessStarted']]);
    expect(JSON.parse(first.at(-1)!.data)).toMatchObject({ state: 'running', baseline: 10, submissions: 0, best: null, processes: [{ pid: 100, command: 'python code/train.py --sft', startedSeq: 5 }], lastSeq: 5 });

    await store.append(streamName('fx-live'), live.slice(6, 9), 5n);
    const second = await sse.next((e) => e.event === 'status');
    expect(second.filter((e) => e.event === 'event').map((e) => JSON.parse(e.data))).toEqual(live.slice(6, 9).map((e) => JSON.parse(JSON.stringify(e))));
    expect(JSON.parse(second.at(-1)!.data)).toMatchObject({ submissions: 1, best: 40, processes: [], lastSeq: 8 });

    await store.append(streamName('fx-live'), live.slice(9), 8n);
    const rest = await sse.rest();
    expect(rest.at(-1)!.event).toBe('end');
    expect(rest.filter((e) => e.event === 'event').map((e) => Number(e.id))).toEqual(live.slice(9).map((e) => e.seq));
    expect(JSON.parse(rest.filter((e) => e.event === 'status').at(-1)!.data)).toMatchObject({ state: 'completed', budgetLeftMs: null, best: 55, submissions: 2 });
  });

  it('ends at once for a sealed run, resumes from Last-Event-ID, and answers 404 / 400 before streaming', async () => {
    const last = live.length - 1;
    const sealed = await (await openSse(`${base}/runs/fx-done/live`, { 'last-event-id': String(last - 2) })).rest();
    expect(sealed.map((e) => [e.event, e.id])).toEqual([['event', String(last - 1)], ['event', String(last)], ['status', String(last)], ['end', String(last)]]);
    expect((await get('/runs/nope/live')).status).toBe(404);
    expect((await get('/runs/fx-done/live?after_seq=-5')).status).toBe(400);
    expect((await get('/runs/..%2Fx/live')).status).toBe(400);
  });
});

describe('GET /live', () => {
  it('pushes the changed run\'s GET /runs item and a changed campaign\'s id', async () => {
    const sse = await openSse(`${base}/live`);
    try {
      await store.append(streamName('fx-new'), numbered('fx-new', live.slice(0, 3)), 'no_stream');
      const runs = await sse.next((e) => e.event === 'run' && JSON.parse(e.data).runId === 'fx-new');
      expect(JSON.parse(runs.at(-1)!.data)).toMatchObject({ runId: 'fx-new', task: 'ref-arith', state: 'running', baseline: 10, submissions: 0, failureClass: null });
      await store.append(campaignStreamName('cmp-a'), [buildEvent('RunRequested', 'cmp-a', 1, at(1), { cell: 0, attempt: 1 })], 0n);
      const campaigns = await sse.next((e) => e.event === 'campaign');
      expect(JSON.parse(campaigns.at(-1)!.data)).toEqual({ campaignId: 'cmp-a' });
    } finally {
      sse.close();
    }
  });
});

describe('GET /runs/:id/transcript pages', () => {
  it('pages the model calls by after_seq with turn numbers that count earlier pages, and keeps the whole transcript without paging', async () => {
    const whole = (await get('/runs/fx-done/transcript')).body;
    expect(whole.entries.map((e: { turn: number | null }) => e.turn)).toEqual([1, null, 2]);
    const p1 = (await get('/runs/fx-done/transcript?limit=2')).body;
    expect(p1).toMatchObject({ runId: 'fx-done', afterSeq: -1, more: true });
    expect(p1.entries.map((e: { callId: string; turn: number | null }) => [e.callId, e.turn])).toEqual([['c1', 1], ['c2', null]]);
    const p2 = (await get(`/runs/fx-done/transcript?after_seq=${p1.lastSeq}&limit=2`)).body;
    expect(p2.entries.map((e: { callId: string; turn: number | null }) => [e.callId, e.turn])).toEqual([['c3', 2]]);
    expect(p2.more).toBe(false);
    // A page whose start no earlier page left a mark counts the turns before it.
    const cold = (await get(`/runs/fx-done/transcript?after_seq=${p1.entries[1].seq}`)).body;
    expect(cold.entries.map((e: { turn: number }) => e.turn)).toEqual([2]);
    const text = await get(`/runs/fx-done/transcript?after_seq=${p1.lastSeq}&format=text`);
    expect(text.text).toMatch(/^── turn 2 · seq /);
    expect((await get('/runs/nope/transcript?limit=5')).status).toBe(404);
    expect((await get('/runs/fx-done/transcript?limit=0')).status).toBe(400);
  });
});

describe('GET /runs/:id/replay', () => {
  it('lists the workspace tree at two points', async () => {
    const early = (await get('/runs/fx-done/replay/tree?at=4')).body;
    expect(early).toMatchObject({ at: { seq: 4, type: 'FileChanged' }, files: [{ path: 'code/train.py', size: TRAIN_V1.length, sha256: sha(TRAIN_V1), seq: 4 }] });
    const late = (await get('/runs/fx-done/replay/tree')).body;
    expect(late.files.map((f: { path: string; seq: number }) => [f.path, f.seq])).toEqual([['code/train.py', 9], ['data/blob.bin', 18], ['logs/big.log', 19]]);
    expect((await get(`/runs/fx-done/replay/tree?at=${encodeURIComponent(at(2.5))}`)).body.at.seq).toBe(4);
  });

  it("shows a file's content at two points, with its diff to the previous revision", async () => {
    const v1 = (await get('/runs/fx-done/replay/file?at=5&path=code/train.py')).body;
    expect(v1).toMatchObject({ path: 'code/train.py', at: { seq: 5 }, seq: 4, binary: false, content: TRAIN_V1, truncated: false, previous: null, diff: null });
    const v2 = (await get('/runs/fx-done/replay/file?at=12&path=code/train.py')).body;
    expect(v2).toMatchObject({ seq: 9, content: TRAIN_V2, previous: { seq: 4, sha256: sha(TRAIN_V1) } });
    expect(v2.diff).toMatchObject({ linesAdded: 2, linesRemoved: 1, note: null });
    expect(v2.diff.hunks[0].lines).toEqual(expect.arrayContaining(['-lr = 0.1', '+lr = 0.01']));
  });

  it('marks binary content, cuts large content at 1 MiB, and refuses bad input', async () => {
    expect((await get('/runs/fx-done/replay/file?path=data/blob.bin')).body).toMatchObject({ binary: true, content: null, truncated: false, size: BINARY.length });
    const big = (await get('/runs/fx-done/replay/file?path=logs/big.log')).body;
    expect([big.binary, big.truncated, big.content.length]).toEqual([false, true, MAX_SHOWN_BYTES]);
    expect((await get('/runs/fx-done/replay/file?at=3&path=code/train.py')).status).toBe(404);
    expect((await get('/runs/fx-done/replay/file?path=../etc/passwd')).status).toBe(400);
    expect((await get('/runs/fx-done/replay/file?path=/etc/passwd')).status).toBe(400);
    expect((await get('/runs/fx-done/replay/file')).status).toBe(400);
    expect((await get('/runs/fx-done/replay/tree?at=yesterday')).status).toBe(400);
    expect((await get('/runs/fx-done/replay/tree?at=9999')).status).toBe(400);
    expect((await get('/runs/nope/replay/tree')).status).toBe(404);
  });
});

describe('GET /runs/:id/blobs/:seq and /output', () => {
  it("opens an event's blob by part: a file revision as text, binary marked, large cut, a missing blob an integrity error", async () => {
    const events = (await get('/runs/fx-done/events?format=json')).body as A2rlEvent[];
    const seqOf = (pred: (e: A2rlEvent) => boolean) => events.find(pred)!.seq;
    const train = seqOf((e) => e.type === 'FileChanged' && e.data.sha256 === sha(TRAIN_V1));
    const text = await get(`/runs/fx-done/blobs/${train}`);
    expect([text.status, text.body.part, text.body.parts.map((p: { part: string }) => p.part), text.body.format, text.body.content]).toEqual([200, 'content', ['content'], 'text', TRAIN_V1]);
    const binary = await get(`/runs/fx-done/blobs/${seqOf((e) => e.type === 'FileChanged' && e.data.path === 'data/blob.bin')}`);
    expect([binary.body.binary, binary.body.content, binary.body.format]).toEqual([true, null, 'binary']);
    const large = await get(`/runs/fx-done/blobs/${seqOf((e) => e.type === 'FileChanged' && e.data.path === 'logs/big.log')}?part=content`);
    expect([large.body.truncated, large.body.content.length]).toEqual([true, MAX_SHOWN_BYTES]);
    // A model call names its request (and response) parts; this fixture's blobs were never stored.
    const call = seqOf((e) => e.type === 'LlmCallRecorded');
    const missing = await get(`/runs/fx-done/blobs/${call}?part=request`);
    expect([missing.status, missing.body.message]).toEqual([500, expect.stringMatching(/is missing from the artifact store/)]);
  });

  it('refuses a bad seq or part, and says which blobs an event has', async () => {
    expect((await get('/runs/fx-done/blobs/abc')).status).toBe(400);
    expect((await get('/runs/fx-done/blobs/1?part=../x')).status).toBe(400);
    expect((await get('/runs/fx-done/blobs/99999')).status).toBe(404);
    expect((await get('/runs/nope/blobs/0')).status).toBe(404);
    const none = await get('/runs/fx-done/blobs/0');
    expect([none.status, none.body.message]).toEqual([404, 'event 0 (RunScheduled) references no blob']);
    const events = (await get('/runs/fx-done/events?format=json')).body as A2rlEvent[];
    const call = events.find((e) => e.type === 'LlmCallRecorded')!.seq;
    const wrong = await get(`/runs/fx-done/blobs/${call}?part=chunk`);
    expect([wrong.status, wrong.body.message]).toEqual([404, expect.stringMatching(new RegExp(`^event ${call} \\(LlmCallRecorded\\) has no blob "chunk"; it has request`))]);
  });

  it('pages the agent output (none recorded here) and answers 404 for an unknown run', async () => {
    const out = await get('/runs/fx-done/output');
    expect([out.status, out.body.chunks, out.body.more]).toEqual([200, [], false]);
    expect((await get('/runs/nope/output')).status).toBe(404);
    expect((await get('/runs/fx-done/output?stream=both')).status).toBe(400);
  });
});

describe('campaigns', () => {
  it('lists campaigns, shows one with its cells, and answers 404 for an unknown one', async () => {
    const list = (await get('/campaigns')).body;
    expect(list.items).toEqual([expect.objectContaining({ campaignId: 'cmp-a', state: 'scheduled', cells: 2, done: 0, running: 0, failed: 0, scheduledAt: at(0) })]);
    const one = (await get('/campaigns/cmp-a')).body;
    expect(one.cells[1]).toEqual(expect.objectContaining({ cell: expect.objectContaining({ index: 1, task: 'ref-arith', agent: 'reference', driver: null, repeat: 1 }), state: 'pending', runId: null, attempts: 1 }));
    expect((await get('/campaigns/cmp-nope')).status).toBe(404);
    expect((await get('/campaigns/cmp-nope/live')).status).toBe(404);
  });

  it('streams the progress live until the campaign is cancelled', async () => {
    const sse = await openSse(`${base}/campaigns/cmp-a/live`);
    const now = await sse.next((e) => e.event === 'progress');
    const revision = JSON.parse(now.at(-1)!.data).revision;
    await store.append(campaignStreamName('cmp-a'), [buildEvent('CampaignCancelled', 'cmp-a', revision + 1, at(5), { reason: 'test' })], BigInt(revision));
    const rest = await sse.rest();
    expect(rest.map((e) => e.event)).toEqual(['progress', 'end']);
    expect(JSON.parse(rest[0].data)).toMatchObject({ state: 'cancelled', cells: [{ state: 'cancelled' }, { state: 'cancelled' }] });
  });
});

describe('audit status', () => {
  it("checks the run's signed heads and names the key", async () => {
    const audit = (await get('/runs/fx-done/audit')).body;
    const key = (await get('/keys/public')).body;
    expect(key.fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(key.publicKeyPem).toMatch(/BEGIN PUBLIC KEY/);
    const head = live.length - 1;
    expect(audit).toEqual({ signedHeads: 1, lastHead: { seq: head, time: at(21), treeSize: head, keyId: key.keyId, valid: true }, keyId: key.keyId, keyFingerprint: key.fingerprint, lastVerified: null });
    expect((await get('/runs/nope/audit')).status).toBe(404);
  });

  it("takes the last verification from the access stream's verify records for the run", async () => {
    const actor = { kind: 'token' as const, id: 'tok1', name: 'alice', role: 'viewer' as const };
    const record = (seq: number, runId: string, outcome: 'ok' | 'refused', verified?: boolean) =>
      buildEvent('AccessRecorded', 'log', seq, at(30 + seq), { actor, action: 'verify', target: { runId }, outcome, ...(verified === undefined ? {} : { verified }) });
    await store.append('access-log', [record(0, 'fx-done', 'ok', true), record(1, 'fx-live', 'ok', false), record(2, 'fx-done', 'refused')], 'no_stream');
    expect((await get('/runs/fx-done/audit')).body.lastVerified).toEqual({ time: at(30), ok: true, actor: 'alice' });
    await store.append('access-log', [record(3, 'fx-done', 'ok', false)], 2n);
    expect((await get('/runs/fx-done/audit')).body.lastVerified).toEqual({ time: at(33), ok: false, actor: 'alice' });
  });
});

describe('the single page', () => {
  it('answers / with index.html when built, else 503 saying how to build it; API routes are not shadowed', async () => {
    const page = await get('/');
    if (page.status === 200) expect(page.type).toMatch(/^text\/html/);
    else expect([page.status, page.text]).toEqual([503, expect.stringContaining('npm run build')]);
    expect((await get('/assets/..%2F..%2Fpackage.json')).status).toBe(400);
    expect((await get('/assets/no-such-asset-0000.js')).status).toBe(404);
    expect((await get('/runs')).body.items.map((r: { runId: string }) => r.runId)).toContain('fx-done');
  });
});
