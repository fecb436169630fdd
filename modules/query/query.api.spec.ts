import 'reflect-metadata';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { CampaignLedger } from '../campaigns/campaign-ledger.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { streamName } from '../ledger/events/ids.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { failedCall, llmCall } from '../../projections/transcript/testing/llm-call.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import type { BlobReader } from '../../projections/blob-reader.js';
import { sampleRun, memoryBlobs, TRAIN_V1, TRAIN_V2 } from '../../projections/run-analysis/testing/run-fixture.js';
import type { ResultsRun } from '../reports/results-csv.js';
import { RunSource } from './run-source.js';
import { startQueryApi } from './testing/query-api.js';

/** Two runs of the fixture (the second with another driver), served from memory. */
class FixtureSource extends RunSource {
  readonly blobs: BlobReader = memoryBlobs([TRAIN_V1, TRAIN_V2]);
  private readonly fixtures = [sampleRun('fx-a'), sampleRun('fx-b')];

  constructor() {
    super();
    this.fixtures[1].analysis.driver = 'gpt-x';
    this.fixtures[1].analysis.failure = { class: 'no_improvement', rule: 'r', evidence: [] };
    // fx-b's agent made two model calls before it exited: a turn, then a call that never got an answer.
    const events = this.fixtures[1].events;
    const exit = events.findIndex((e) => e.type === 'AgentExited');
    const calls = [llmCall({ callId: 'c1', userText: 'Train' }), failedCall({ callId: 'c2', toolResults: [{ id: 'tu-c1', output: 'done' }] })];
    const spliced = [...events.slice(0, exit), ...calls.map((data) => ({ type: 'LlmCallRecorded', occurredAt: events[exit].occurredAt, data })), ...events.slice(exit)];
    this.fixtures[1].events = spliced.map((e, seq) => buildEvent(e.type as A2rlEvent['type'], 'fx-b', seq, e.occurredAt, e.data as never));
  }

  async runs(): Promise<ResultsRun[]> {
    return this.fixtures.map((f) => f.analysis);
  }
  async run(runId: string): Promise<ResultsRun | null> {
    return (await this.runs()).find((r) => r.runId === runId) ?? null;
  }
  async events(runId: string): Promise<A2rlEvent[]> {
    return this.fixtures.find((f) => f.analysis.runId === runId)?.events ?? [];
  }
}

/** A campaign ledger that knows one campaign, which accepted fx-b. */
const ACCEPTED = { acceptedRunIds: async (id: string) => (id === 'cmp-1' ? new Set(['fx-b']) : null) };

let app: INestApplication;
let base: string;

beforeAll(async () => {
  ({ app, base } = await startQueryApi([{ provide: RunSource, useClass: FixtureSource }, { provide: CampaignLedger, useValue: ACCEPTED }]));
});
afterAll(async () => {
  await app?.close();
});

const get = async (p: string) => {
  const res = await fetch(`${base}${p}`);
  return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
};
const json = async (p: string) => JSON.parse((await get(p)).text);

describe('GET /runs', () => {
  it('lists run summaries with filters and limit/offset pagination', async () => {
    const all = await json('/runs');
    expect(all.total).toBe(2);
    // Newest first: both were scheduled at the same time, so the later run id comes first.
    expect(all.items.map((r: { runId: string }) => r.runId)).toEqual(['fx-b', 'fx-a']);
    expect(all.items[1]).toMatchObject({ task: 'ref-arith', baseline: 10, best: 55, submissions: 2, failureClass: 'success', route: 'grpo' });
    expect((await json('/runs?driver=gpt-x')).items.map((r: { runId: string }) => r.runId)).toEqual(['fx-b']);
    expect((await json('/runs?failure_class=success&state=completed')).items.map((r: { runId: string }) => r.runId)).toEqual(['fx-a']);
    expect(await json('/runs?limit=1&offset=1')).toMatchObject({ total: 2, limit: 1, offset: 1, items: [{ runId: 'fx-a' }] });
  });

  it.each([
    ['limit above the maximum', '/runs?limit=201', /limit must not be greater than 200/],
    ['a non-numeric offset', '/runs?offset=abc', /offset must be an integer/],
    ['an unknown failure class', '/runs?failure_class=bad_luck', /failure_class must be one of/],
    ['an unknown parameter', '/runs?colour=red', /property colour should not exist/],
  ])('answers 400 for %s', async (_what, url, message) => {
    const res = await get(url);
    expect(res.status).toBe(400);
    expect(res.text).toMatch(message);
  });
});

describe('GET /runs/:id and its events', () => {
  it('returns the analysis with the workspace, and 404 for an unknown run', async () => {
    expect(await json('/runs/fx-a')).toMatchObject({ runId: 'fx-a', workspace: '/ws/fx-a', failure: { class: 'success' } });
    const missing = await get('/runs/nope');
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.text).message).toBe('no run "nope" in the ledger');
    expect((await get('/runs/nope/events')).status).toBe(404);
    expect((await get('/runs/nope/report?format=md')).status).toBe(404);
  });

  it('pages events by after_seq as a JSON array or NDJSON', async () => {
    const page = await json('/runs/fx-a/events?after_seq=3&limit=2');
    expect(page.map((e: { seq: number; type: string }) => [e.seq, e.type])).toEqual([[4, 'FileChanged'], [5, 'ProcessStarted']]);
    const nd = await get('/runs/fx-a/events?after_seq=14&format=ndjson');
    expect(nd.type).toMatch(/^application\/x-ndjson/);
    expect(nd.text.trim().split('\n').map((l) => JSON.parse(l).seq)).toEqual([15, 16]);
    expect((await get('/runs/fx-a/events?after_seq=-2')).status).toBe(400);
  });

  it('filters a page by event type, and refuses an unknown type', async () => {
    const page = await json('/runs/fx-a/events?type=ProcessStarted,FileChanged&limit=3');
    expect(page.map((e: { type: string }) => e.type).sort()).toEqual(expect.arrayContaining(['FileChanged', 'ProcessStarted']));
    expect(page.every((e: { type: string }) => e.type === 'FileChanged' || e.type === 'ProcessStarted')).toBe(true);
    const refused = await get('/runs/fx-a/events?type=ProcessStarted,NoSuchEvent');
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.text).message).toMatch(/unknown event type "NoSuchEvent"/);
    expect((await get('/runs/fx-a/events?type=a;b')).status).toBe(400);
  });
});

describe('GET /runs/:id/transcript', () => {
  it('serves the transcript of the run\'s model calls as JSON, or as the CLI\'s text', async () => {
    const res = await get('/runs/fx-b/transcript');
    expect([res.status, /^application\/json/.test(res.type)]).toEqual([200, true]);
    const t = JSON.parse(res.text);
    expect(t.entries.map((e: { seq: number; role: string; turn: number | null; callId: string }) => [e.seq, e.callId, e.role, e.turn])).toEqual([
      [15, 'c1', 'turn', 1],
      [16, 'c2', 'failed', null],
    ]);
    expect(t.totals).toMatchObject({ calls: 2, turns: 1, failedCalls: 1, inputTokens: 1000, outputTokens: 50 });
    const text = await get('/runs/fx-b/transcript?format=text');
    expect(/^text\/plain/.test(text.type)).toBe(true);
    expect(text.text.split('\n')[0]).toBe('── turn 1 · seq 15 · claude-sonnet-4-5-20250929 (anthropic messages, streamed) · 200 ok (tool_use) · 1.2 s, first byte 0.3 s · 1,000 in / 50 out tokens · $0.00375');
  });

  it('is empty for a run without model calls, 404 for an unknown run, 400 for an unknown format', async () => {
    expect((await json('/runs/fx-a/transcript')).totals.calls).toBe(0);
    expect((await get('/runs/nope/transcript')).status).toBe(404);
    expect((await get('/runs/fx-b/transcript?format=xml')).status).toBe(400);
  });
});

describe('GET /runs/:id/report', () => {
  it('serves each format with its content type, same bytes on every request', async () => {
    const types = { md: /^text\/markdown/, json: /^application\/json/, html: /^text\/html/ };
    for (const [format, type] of Object.entries(types)) {
      const first = await get(`/runs/fx-a/report?format=${format}`);
      expect(first.status).toBe(200);
      expect(first.type).toMatch(type);
      expect((await get(`/runs/fx-a/report?format=${format}`)).text).toBe(first.text);
    }
    expect(JSON.parse((await get('/runs/fx-a/report?format=json')).text).failure.class).toBe('success');
    expect((await get('/runs/fx-a/report?format=pdf')).status).toBe(400);
  });
});

describe('GET /scoreboard', () => {
  it('returns rows per task × agent × driver, filtered, or results.csv', async () => {
    const rows = await json('/scoreboard');
    expect(rows.map((r: { driver: string; runs: number }) => [r.driver, r.runs])).toEqual([['gpt-x', 1], ['none', 1]]);
    expect((await json('/scoreboard?driver=none')).map((r: { runIds: string[] }) => r.runIds)).toEqual([['fx-a']]);
    const csv = await get('/scoreboard?format=csv&driver=gpt-x');
    expect(csv.type).toMatch(/^text\/csv/);
    expect(csv.text.split('\r\n')).toEqual([
      'run_id,timestamp,task,agent,driver_model,base_model,baseline,best_score,improvement,submissions,duration_s,success,workspace',
      'fx-b,2026-01-01T00:00:00.000Z,ref-arith,reference,gpt-x,arith-base,10,55,45,2,19,false,/ws/fx-b',
      '',
    ]);
    expect((await get('/scoreboard?format=xml')).status).toBe(400);
  });

  it("keeps a campaign's accepted runs with campaign=, 404 for an unknown campaign", async () => {
    expect((await json('/scoreboard?campaign=cmp-1')).map((r: { runIds: string[] }) => r.runIds)).toEqual([['fx-b']]);
    expect((await get('/scoreboard?campaign=cmp-none')).status).toBe(404);
    expect((await get('/scoreboard?campaign=../x')).status).toBe(400);
  });
});

describe('/docs', () => {
  it('serves the OpenAPI document listing every query route, and the Swagger UI', async () => {
    const doc = await json('/docs/json');
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths).sort()).toEqual(['/runs', '/runs/{id}', '/runs/{id}/events', '/runs/{id}/report', '/runs/{id}/transcript', '/scoreboard']);
    expect(doc.paths['/runs/{id}/transcript'].get.parameters.map((p: { name: string }) => p.name).sort()).toEqual(['after_seq', 'format', 'id', 'limit']);
    expect(doc.paths['/runs'].get.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(['task', 'agent', 'driver', 'state', 'failure_class', 'limit', 'offset']),
    );
    expect(doc.paths['/runs'].get.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/RunPage' });
    expect(doc.paths['/scoreboard'].get.responses['200'].content['application/json'].schema.items).toEqual({ $ref: '#/components/schemas/ScoreboardRow' });
    const refs = [...JSON.stringify(doc).matchAll(/"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]);
    expect(refs.filter((name) => !doc.components.schemas[name])).toEqual([]);
    expect(doc.components.schemas.RunSummary.required).toEqual(expect.arrayContaining(['runId', 'state', 'failureClass', 'lastSeq']));
    const ui = await get('/docs');
    expect(ui.status).toBe(200);
    expect(ui.text).toMatch(/swagger-ui/i);
  });
});

describe('the real app (createHttpApp) over a SQLite ledger', () => {
  let home: string;
  let real: INestApplication | undefined;
  const saved = { ...process.env };

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'a2rl-query-'));
    const store = await SqliteEventStore.open(path.join(home, 'ledger.db'));
    const { events } = sampleRun('fx-real');
    await store.append(streamName('fx-real'), events, 'no_stream');
    await store.close();
    for (const k of ['A2RL_LEDGER_URL', 'A2RL_ARTIFACTS_URL', 'A2RL_READMODEL_URL', 'A2RL_WORKSPACES_DIR']) delete process.env[k];
    process.env.A2RL_HOME = home;
    const { createHttpApp } = await import('../../src/server.js');
    real = await createHttpApp();
    await real.listen(0, '127.0.0.1');
  });
  afterAll(async () => {
    await real?.close();
    process.env = saved;
    await rm(home, { recursive: true, force: true });
  });

  it('analyses the run from the ledger, serves its report and the OpenAPI document', async () => {
    const url = `http://127.0.0.1:${(real!.getHttpServer().address() as { port: number }).port}`;
    const runs = (await (await fetch(`${url}/runs`)).json()) as { items: { runId: string }[] };
    expect(runs.items.map((r) => r.runId)).toEqual(['fx-real']);
    const report = await fetch(`${url}/runs/fx-real/report?format=md`);
    expect(report.status).toBe(200);
    expect(await report.text()).toContain('# Run report: fx-real');
    expect((await fetch(`${url}/runs?limit=0`)).status).toBe(400);
    expect((await fetch(`${url}/docs/json`)).status).toBe(200);
  });
});
