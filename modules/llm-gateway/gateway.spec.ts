import { afterEach, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EventData } from '../ledger/events/catalog.js';
import { validatePayload } from '../ledger/events/envelope.js';
import { eventId } from '../ledger/events/ids.js';
import { startFakeAnthropic } from '../../test/servers/fake-llm/fake-anthropic.js';
import { startFakeGemini } from '../../test/servers/fake-llm/fake-gemini.js';
import { startFakeOpenAI } from '../../test/servers/fake-llm/fake-openai.js';
import { usageFromRequest } from '../../test/servers/fake-llm/serve.js';
import type { FakeLlmOptions, FakeLlmServer } from '../../test/servers/fake-llm/types.js';
import { startLlmGateway, type LlmGatewayOptions } from './gateway.js';
import { rebuildBody, recordedBody } from './request-pieces.js';
import { eventBlobs, pickEventBlob, readEventBlob } from '../query/event-blob.js';
import { ArtifactNotFoundError, type ArtifactStore } from '../artifacts/artifact-store.port.js';
import { Readable } from 'node:stream';
import { priceTable } from './prices.js';
import type { ProviderCodec, ResponseFacts } from './protocol.js';
import { upstreamsFromEnv } from './upstreams.js';
import { callCostUsd } from '../../projections/derived-facts.js';
import { until } from '../../test/testing/helpers.js';

type Recorded = EventData<'LlmCallRecorded'>;

const TOKEN = 'gw-token-0123456789abcdef';
const KEY = 'harness-key-fedcba9876543210';
const T0 = new Date('2026-11-01T00:00:00.000Z');

// ── a tiny provider: POST /v1/messages (billable), GET /v1/models (not); SSE events `data: {...}` ──

interface TestEvent {
  model?: string;
  text?: string;
  tool?: { name: string; input: string };
  usage?: { in: number; out: number };
  stop?: string;
  error?: { message: string };
}

const testCodec: ProviderCodec = {
  provider: 'anthropic',
  defaultUpstream: 'http://127.0.0.1:9',
  route(method, path) {
    if (method === 'POST' && path === '/v1/messages') return { api: 'messages', billable: true };
    if (method === 'GET' && path === '/v1/models') return { api: 'models', billable: false };
    return null;
  },
  upstreamPath: (path) => path,
  forwardedHeaders: ['anthropic-version'],
  queryParameters: ['beta', 'key'],
  credential: (headers) => (typeof headers['x-api-key'] === 'string' ? headers['x-api-key'] : undefined),
  authorize(headers, _query, key) {
    headers['x-api-key'] = key;
  },
  requestFacts(_route, body) {
    const b = (body ?? {}) as { model?: string; stream?: boolean; messages?: unknown[]; prompt?: string };
    return { model: b.model ?? null, stream: b.stream === true, messages: b.messages?.length ?? 0, ...(b.prompt ? { userText: b.prompt } : {}), toolResults: [] };
  },
  responseFacts(_route, _status, body, streamed) {
    const events = (streamed ? body.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)) : [body]).map((t) => JSON.parse(t) as TestEvent);
    const facts: ResponseFacts = { model: null, usage: { inputTokens: null, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null }, stopReason: null, text: null, toolCalls: [] };
    for (const e of events) {
      if (e.model) facts.model = e.model;
      if (e.text) facts.text = (facts.text ?? '') + e.text;
      if (e.tool) facts.toolCalls.push(e.tool);
      if (e.usage) facts.usage = { inputTokens: e.usage.in, outputTokens: e.usage.out, cacheReadTokens: null, cacheWriteTokens: null };
      if (e.stop) facts.stopReason = e.stop;
      if (e.error) facts.error = e.error.message;
    }
    return facts;
  },
  errorBody: (kind, _status, message) => ({ type: 'error', error: { type: kind, message } }),
};

// ── helpers ────────────────────────────────────────────────────────────────────────────────────

// Everything a test opens is closed after it, passed or failed, so a failure cannot hang the run.
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** An in-process upstream: each test says how it answers; it notes what it was sent. */
async function startUpstream(answer: (req: IncomingMessage, res: ServerResponse, seen: Seen) => void) {
  const seen: Seen[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      seen.push(s);
      answer(req, res, s);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = () => new Promise<void>((resolve) => {
    for (const socket of sockets) socket.destroy();
    server.close(() => resolve());
  });
  cleanups.push(close);
  return { url, seen, close };
}

/** A gateway on a Unix socket (as in a run), its records and blobs kept in memory. */
async function startGateway(upstreamUrl: string | null, extra: Partial<LlmGatewayOptions> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'a2rl-llm-gw-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const records: Recorded[] = [];
  const blobs = new Map<string, Buffer>();
  const puts = new Map<string, number>();
  const limits: Array<[string, number, number]> = [];
  const errors: unknown[] = [];
  const socketPath = join(dir, 'llm.sock');
  const gateway = await startLlmGateway({
    listen: { path: socketPath },
    token: TOKEN,
    upstreams: upstreamUrl ? { anthropic: { url: upstreamUrl, key: KEY } } : {},
    codecs: [testCodec],
    record: async (data) => void records.push(data),
    storeBlob: async (body) => {
      const sha256 = createHash('sha256').update(body).digest('hex');
      blobs.set(sha256, Buffer.from(body));
      puts.set(sha256, (puts.get(sha256) ?? 0) + 1);
      return { sha256, size: body.length, key: `blobs/${sha256}` };
    },
    onLimit: (limit, value, max) => void limits.push([limit, value, max]),
    onError: (err) => void errors.push(err),
    clock: () => T0,
    ...extra,
  });
  cleanups.push(() => gateway.close());
  /** Closes the gateway (which waits for every record) and checks each record against the catalog. */
  const finish = async (): Promise<Recorded[]> => {
    await gateway.close();
    for (const r of records) validatePayload('LlmCallRecorded', r);
    return records;
  };
  const blobText = (ref: { sha256: string } | undefined) => (ref ? blobs.get(ref.sha256)?.toString('utf8') : undefined);
  return { gateway, socketPath, records, limits, errors, finish, blobText, blobs, puts };
}

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** The connection broke before the answer ended. */
  broken: boolean;
}

interface SendOptions {
  method?: string;
  path?: string;
  token?: string | null;
  headers?: Record<string, string>;
  body?: unknown;
  /** Called with each chunk of the answer as it arrives. */
  onChunk?: (chunk: string, req: http.ClientRequest) => void;
}

/** One request to the gateway over its socket; resolves with what came back. */
function send(socketPath: string, options: SendOptions = {}): Promise<Reply> {
  const body = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers };
  if (options.token !== null) headers['x-api-key'] = options.token ?? TOKEN;
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method: options.method ?? 'POST', path: options.path ?? '/anthropic/v1/messages', headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        options.onChunk?.(chunk, req);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, broken: false }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, broken: true }));
      res.on('close', () => {
        if (!res.complete) resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, broken: true });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const sse = (event: TestEvent) => `data: ${JSON.stringify(event)}\n\n`;
const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/** A promise and its resolver, for steps one side waits on. */
function signal<T = void>() {
  let fire!: (value: T) => void;
  const fired = new Promise<T>((resolve) => (fire = resolve));
  return { fire, fired };
}

/** How long a step one side waits on may take before the test goes on without it: generous, for a busy machine. */
const STEP_CAP_MS = 60_000;

/** Resolves with `value` when the promise does not settle in `ms`: a missed step fails an assertion instead of hanging the test. */
function within<T>(promise: Promise<T>, ms: number, value: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<T>((resolve) => (timer = setTimeout(() => resolve(value), ms)))]).finally(() => clearTimeout(timer));
}

const REQUEST = { model: 'claude-sonnet-4-5', stream: true, messages: [{ role: 'user', content: 'hi' }], prompt: 'hi' };


// ── specs ──────────────────────────────────────────────────────────────────────────────────────

describe('LLM gateway', () => {
  it('streams the answer through as it arrives and records the call', async () => {
    const clientGotFirst = signal();
    let lastSent = false;
    const upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse({ model: 'claude-sonnet-4-5-20250929', text: 'Hel' }));
      // The rest only once the agent has the first event (or after the cap): a buffering gateway is caught by `firstBeforeLast`.
      void within(clientGotFirst.fired, STEP_CAP_MS, undefined).then(() => {
        res.write(sse({ text: 'lo' }));
        lastSent = true;
        res.end(sse({ usage: { in: 100, out: 50 }, stop: 'end_turn' }));
      });
    });
    const gw = await startGateway(upstream.url);
    let firstBeforeLast: boolean | undefined;
    const reply = await send(gw.socketPath, {
      body: REQUEST,
      onChunk: () => {
        firstBeforeLast ??= !lastSent;
        clientGotFirst.fire();
      },
    });
    expect(firstBeforeLast).toBe(true);
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('text/event-stream');
    expect(reply.body).toContain('"stop":"end_turn"');

    const [call] = await gw.finish();
    expect(gw.records.length).toBe(1);
    expect(call).toMatchObject({
      callId: 'llm-1',
      provider: 'anthropic',
      api: 'messages',
      modelRequested: 'claude-sonnet-4-5',
      modelAnswered: 'claude-sonnet-4-5-20250929',
      stream: true,
      status: 200,
      outcome: 'ok',
      stopReason: 'end_turn',
      usage: { inputTokens: 100, outputTokens: 50, cacheReadTokens: null, cacheWriteTokens: null },
      priceTable: priceTable().version,
      messages: 1,
      userText: 'hi',
      outputText: 'Hello',
      startedAt: T0.toISOString(),
      observedAt: T0.toISOString(),
    });
    expect(call.error).toBeUndefined();
    expect(call.costUsd).toBeUndefined(); // a value readers compute, not a fact
    expect(callCostUsd(call)).toBeCloseTo((100 * 3 + 50 * 15) / 1e6, 12);
    expect(call.ttftMs !== null && call.ttftMs >= 0 && call.ttftMs <= call.latencyMs).toBe(true);
    // The request blob is the body as the agent sent it; the response blob what the agent got.
    expect(call.request?.sha256).toBe(sha(JSON.stringify(REQUEST)));
    expect(gw.blobText(call.response) === reply.body).toBe(true);
    expect(gw.gateway.totals()).toEqual({ calls: 1, tokens: 150, costUsd: callCostUsd(call) });
  });

  it('sends the harness key upstream with only the protocol headers, never the agent token', async () => {
    const upstream = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text: 'ok' })));
    const gw = await startGateway(upstream.url);
    const reply = await send(gw.socketPath, {
      path: `/anthropic/v1/messages?beta=true&key=${TOKEN}`,
      headers: { authorization: `Bearer ${TOKEN}`, 'x-extra': 'dropped', 'anthropic-version': '2023-06-01', 'user-agent': 'cli/1', 'accept-encoding': 'gzip', connection: 'keep-alive' },
      body: { model: 'claude-haiku-4-5' },
    });
    expect(reply.status).toBe(200);
    const [seen] = upstream.seen;
    expect(seen.headers['x-api-key']).toBe(KEY);
    expect(Object.keys(seen.headers).sort()).toEqual(['accept-encoding', 'anthropic-version', 'connection', 'content-length', 'content-type', 'host', 'user-agent', 'x-api-key']);
    expect(seen.headers['accept-encoding']).toBe('identity');
    expect(seen.url).toBe('/v1/messages?beta=true');
    const everything = JSON.stringify(seen);
    expect(everything.includes(TOKEN)).toBe(false);
    await gw.finish();
  });

  it('refuses a missing or wrong token with 401 in the provider shape, recorded as refused', async () => {
    const upstream = await startUpstream((_req, res) => res.end('{}'));
    const gw = await startGateway(upstream.url);
    const missing = await send(gw.socketPath, { token: null, body: REQUEST });
    const wrong = await send(gw.socketPath, { token: `${TOKEN}x`, body: REQUEST });
    expect([missing.status, wrong.status]).toEqual([401, 401]);
    expect(JSON.parse(wrong.body)).toMatchObject({ type: 'error', error: { type: 'auth' } });
    expect(upstream.seen.length).toBe(0);
    const records = await gw.finish();
    expect(records.map((r) => [r.callId, r.outcome, r.status])).toEqual([
      ['llm-1', 'refused', 401],
      ['llm-2', 'refused', 401],
    ]);
    expect(gw.blobText(records[1].response) === wrong.body).toBe(true);
  });

  it('answers 429 once the token limit is reached and tells onLimit once', async () => {
    const upstream = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ model: 'claude-sonnet-4-5', usage: { in: 120, out: 30 } })));
    const gw = await startGateway(upstream.url, { limits: { maxTokens: 100, maxCostUsd: null } });
    const first = await send(gw.socketPath, { body: REQUEST });
    const second = await send(gw.socketPath, { body: REQUEST });
    const third = await send(gw.socketPath, { body: REQUEST });
    expect([first.status, second.status, third.status]).toEqual([200, 429, 429]);
    expect(JSON.parse(second.body)).toMatchObject({ error: { type: 'limit' } });
    expect(upstream.seen.length).toBe(1);
    expect(gw.limits).toEqual([['llmTokens', 150, 100]]);
    const records = await gw.finish();
    expect(records.map((r) => r.outcome)).toEqual(['ok', 'limit_exceeded', 'limit_exceeded']);
    expect(records[1].error).toContain('--max-llm-tokens');
  });

  it('passes an upstream error through as is, recorded with its message', async () => {
    const error = JSON.stringify({ error: { message: 'overloaded' } });
    const upstream = await startUpstream((_req, res) => res.writeHead(529, { 'content-type': 'application/json' }).end(error));
    const gw = await startGateway(upstream.url);
    const reply = await send(gw.socketPath, { body: REQUEST });
    expect([reply.status, reply.body]).toEqual([529, error]);
    const [call] = await gw.finish();
    expect(call).toMatchObject({ outcome: 'upstream_error', status: 529, error: 'overloaded' });
    expect(callCostUsd(call)).toBeNull();
  });

  it('answers 502 when the upstream cannot be reached and 503 when none is configured', async () => {
    const down = await startUpstream(() => undefined);
    await down.close(); // its port is now closed
    const gw = await startGateway(down.url);
    const reply = await send(gw.socketPath, { body: REQUEST });
    expect(reply.status).toBe(502);
    expect(JSON.parse(reply.body)).toMatchObject({ type: 'error', error: { type: 'upstream' } });
    const none = await startGateway(null);
    const unconfigured = await send(none.socketPath, { body: REQUEST });
    expect(unconfigured.status).toBe(503);
    const [[unreachable], [missing]] = [await gw.finish(), await none.finish()];
    expect(unreachable).toMatchObject({ outcome: 'upstream_unreachable', status: 502 });
    expect(missing).toMatchObject({ outcome: 'upstream_unreachable', status: 503 });
  });

  it('sends a call again on a fresh connection when the upstream reset the kept-alive one it reused', async () => {
    const served = new WeakSet<Socket>();
    const upstream = await startUpstream((req, res) => {
      if (served.has(req.socket)) return void req.socket.destroy(); // as an upstream that dropped the idle connection
      served.add(req.socket);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"text":"ok"}');
    });
    const gw = await startGateway(upstream.url);
    const first = await send(gw.socketPath, { body: REQUEST });
    const second = await send(gw.socketPath, { body: REQUEST });
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(upstream.seen.length).toBe(3);
    const records = await gw.finish();
    expect(records.map((r) => r.outcome)).toEqual(['ok', 'ok']);
  });

  it('answers 504 when the upstream says nothing for upstreamTimeoutMs, and cuts a stream that stalls', async () => {
    const upstream = await startUpstream((_req, res, seen) => {
      if (seen.body.includes('stall')) res.writeHead(200, { 'content-type': 'text/event-stream' }).write(sse({ text: 'partial' }));
      // otherwise: never a byte
    });
    const gw = await startGateway(upstream.url, { upstreamTimeoutMs: 300 });
    const silent = await send(gw.socketPath, { body: REQUEST });
    expect(silent.status).toBe(504);
    expect(JSON.parse(silent.body)).toMatchObject({ error: { type: 'timeout' } });
    const stalled = await send(gw.socketPath, { body: { ...REQUEST, prompt: 'stall' } });
    expect([stalled.status, stalled.broken, stalled.body.includes('partial')]).toEqual([200, true, true]);
    const records = await gw.finish();
    expect(records.map((r) => [r.outcome, r.status])).toEqual([
      ['upstream_timeout', 504],
      ['upstream_timeout', 200],
    ]);
  });

  it('reads the answer to its end when the agent hangs up, and records the usage the provider reported', async () => {
    const agentGone = signal();
    let ended = false;
    const upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse({ model: 'claude-sonnet-4-5', text: 'first' }));
      void within(agentGone.fired, STEP_CAP_MS, undefined).then(() => res.end(sse({ text: ' second', usage: { in: 700, out: 300 } }), () => (ended = true)));
    });
    const gw = await startGateway(upstream.url);
    const reply = await send(gw.socketPath, { body: REQUEST, onChunk: (_chunk, req) => req.destroy() });
    expect(reply.broken).toBe(true);
    await until('the agent to hang up', () => gw.gateway.pending().agentGone === 1);
    agentGone.fire();
    await until('the call to be recorded', () => gw.records.length === 1); // (closing the gateway first would end the call)
    const [call] = await gw.finish();
    expect(ended).toBe(true);
    expect(call).toMatchObject({ outcome: 'client_aborted', status: 200, outputText: 'first second', usage: { inputTokens: 700, outputTokens: 300 }, usageSource: 'provider', deliveredBytes: sse({ model: 'claude-sonnet-4-5', text: 'first' }).length });
    expect(gw.gateway.totals().tokens).toBe(1000);
  });

  it('records the worst case of the reservation, marked estimated, when the answer never gives its usage', async () => {
    const upstream = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(sse({ model: 'claude-sonnet-4-5', text: 'no usage' })));
    const gw = await startGateway(upstream.url, { limits: { maxTokens: 1_000_000, defaultReserveTokens: 5000 } });
    const body = JSON.stringify(REQUEST);
    expect((await send(gw.socketPath, { body })).status).toBe(200);
    const [call] = await gw.finish();
    expect(call).toMatchObject({ outcome: 'ok', usageSource: 'estimated', reservedTokens: Buffer.byteLength(body) + 5000, usage: { inputTokens: Buffer.byteLength(body), outputTokens: 5000 } });
    expect(gw.gateway.totals().tokens).toBe(Buffer.byteLength(body) + 5000);
  });

  it('close() aborts a call in flight and resolves once it is recorded', async () => {
    const clientGotFirst = signal();
    const upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse({ text: 'thinking' })); // and nothing more
    });
    const gw = await startGateway(upstream.url);
    const pending = send(gw.socketPath, { body: REQUEST, onChunk: () => clientGotFirst.fire() });
    await within(clientGotFirst.fired, STEP_CAP_MS, undefined);
    await gw.gateway.close();
    expect(gw.records.map((r) => [r.callId, r.outcome, r.status])).toEqual([['llm-1', 'gateway_closed', 200]]);
    expect((await pending).broken).toBe(true);
    validatePayload('LlmCallRecorded', gw.records[0]);
  });

  it('answers unknown routes 404 without recording them; records follow arrival order', async () => {
    const arrived: Array<() => void> = [];
    const got = [signal(), signal(), signal()];
    const upstream = await startUpstream((_req, res, seen) => {
      const n = arrived.length;
      arrived.push(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ model: JSON.parse(seen.body).model })));
      got[n].fire();
      if (arrived.length === 3) for (const answer of [...arrived].reverse()) answer(); // the last to arrive answers first
    });
    const gw = await startGateway(upstream.url);
    const unknownPath = await send(gw.socketPath, { path: '/anthropic/v1/nothing' });
    const unknownProvider = await send(gw.socketPath, { path: '/mistral/v1/chat' });
    expect([unknownPath.status, unknownProvider.status]).toEqual([404, 404]);
    expect(JSON.parse(unknownPath.body)).toMatchObject({ type: 'error', error: { type: 'not_found' } });
    const replies: Array<Promise<Reply>> = [];
    for (const [n, model] of ['m-a', 'm-b', 'm-c'].entries()) {
      replies.push(send(gw.socketPath, { body: { model } }));
      await within(got[n].fired, STEP_CAP_MS, undefined);
    }
    expect((await Promise.all(replies)).map((r) => r.status)).toEqual([200, 200, 200]);
    const records = await gw.finish();
    expect(records.map((r) => [r.callId, r.modelRequested])).toEqual([
      ['llm-1', 'm-a'],
      ['llm-2', 'm-b'],
      ['llm-3', 'm-c'],
    ]);
  });

  it('cuts long texts and long lists in the record, never in the answer', async () => {
    const long = 'x'.repeat(5000);
    const events = [sse({ model: 'unknown-model', text: long }), ...Array.from({ length: 150 }, (_, i) => sse({ tool: { name: `t${i}`, input: long } })), sse({ usage: { in: 1, out: 1 } })];
    const upstream = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(events.join('')));
    const gw = await startGateway(upstream.url);
    const reply = await send(gw.socketPath, { body: { ...REQUEST, prompt: long } });
    expect(reply.body.length).toBe(events.join('').length);
    const [call] = await gw.finish();
    expect([call.outputText?.length, call.outputText?.endsWith('…')]).toEqual([4001, true]);
    expect([call.userText?.length, call.toolCalls.length, call.toolCalls[0].input.length]).toEqual([2001, 100, 2001]);
    expect(callCostUsd(call)).toBeNull(); // a model without a price costs null, not 0
    expect(gw.gateway.totals().costUsd).toBeNull();
  });

  it('refuses a body over 32 MiB with 413', async () => {
    const upstream = await startUpstream((_req, res) => res.end('{}'));
    const gw = await startGateway(upstream.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        { socketPath: gw.socketPath, method: 'POST', path: '/anthropic/v1/messages', agent: false, headers: { 'x-api-key': TOKEN, 'content-length': String(32 * 1024 * 1024 + 1) } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
          req.destroy();
        },
      );
      req.on('error', reject);
      req.flushHeaders();
    });
    expect(status).toBe(413);
    expect(upstream.seen.length).toBe(0);
    const [call] = await gw.finish();
    expect(call).toMatchObject({ outcome: 'refused', status: 413 });
  });

  it('listens on a loopback port too, and records calls that are not billable at no cost', async () => {
    const upstream = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[]}'));
    const gw = await startGateway(upstream.url, { listen: { port: 0 } });
    expect(gw.gateway.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const reply = await new Promise<number>((resolve, reject) => {
      http.get(`${gw.gateway.url}/anthropic/v1/models`, { headers: { 'x-api-key': TOKEN }, agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      }).on('error', reject);
    });
    expect(reply).toBe(200);
    expect(upstream.seen[0].method).toBe('GET');
    const [call] = await gw.finish();
    expect(call).toMatchObject({ api: 'models', outcome: 'ok', stream: false });
    expect(callCostUsd(call)).toBe(0);
  });

  it('waits for an agent that reads slowly without taking it for upstream silence', async () => {
    const big = sse({ text: 'y'.repeat(8 * 1024 * 1024) });
    const last = sse({ usage: { in: 1, out: 1 } });
    let upstreamFlushed = false;
    const upstream = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(big + last, () => (upstreamFlushed = true)));
    const gw = await startGateway(upstream.url, { upstreamTimeoutMs: 1000 });
    const stopped = signal<boolean>();
    let paused = false;
    const reply = await send(gw.socketPath, {
      body: REQUEST,
      onChunk: (_chunk, req) => {
        if (paused) return;
        paused = true; // the agent stops reading for three times the upstream timeout
        req.socket?.pause();
        setTimeout(() => {
          stopped.fire(upstreamFlushed);
          req.socket?.resume();
        }, 3000);
      },
    });
    expect([reply.status, reply.broken, reply.body.length]).toEqual([200, false, Buffer.byteLength(big) + last.length]);
    // The wait reached the upstream: the gateway stopped reading it, so it could not write its answer out.
    expect(await stopped.fired).toBe(false);
    const [call] = await gw.finish();
    expect(call.outcome).toBe('ok');
  });

  it('takes no stall of its own process for upstream silence: what waits in the socket is read before silence is counted', async () => {
    let answer: ServerResponse | undefined;
    const upstream = await startUpstream((_req, res) => {
      answer = res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse({ text: 'first' }));
    });
    const gw = await startGateway(upstream.url, { upstreamTimeoutMs: 300 });
    let stalled = false;
    const reply = await send(gw.socketPath, {
      body: REQUEST,
      onChunk: () => {
        if (stalled) return;
        stalled = true;
        // The upstream's rest reaches the gateway's socket now (end() writes through at once), then the
        // process is busy for ten times the timeout (an agent in the same process, as a loaded machine
        // or a long task would stall the harness): the gateway cannot read meanwhile.
        answer!.end(sse({ text: ' second', usage: { in: 1, out: 1 } }));
        const until = performance.now() + 3000;
        while (performance.now() < until);
      },
    });
    expect([reply.status, reply.broken, reply.body]).toEqual([200, false, sse({ text: 'first' }) + sse({ text: ' second', usage: { in: 1, out: 1 } })]);
    const [call] = await gw.finish();
    expect(call).toMatchObject({ outcome: 'ok', outputText: 'first second' });
  });

  it('speaks the real Anthropic codec by default, against the fake Anthropic upstream', async () => {
    const fake = await startFakeAnthropic({ script: ['echo hi'], expectKey: KEY, model: 'claude-sonnet-4-5-20250929' });
    cleanups.push(() => fake.close());
    const gw = await startGateway(fake.url, { codecs: undefined });
    const tools = [{ name: 'Bash', description: 'run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } }];
    const reply = await send(gw.socketPath, {
      path: '/anthropic/v1/messages?beta=true',
      headers: { 'anthropic-version': '2023-06-01' },
      body: { model: 'claude-sonnet-4-5', max_tokens: 1024, stream: true, tools, messages: [{ role: 'user', content: 'run it' }] },
    });
    expect(reply.status).toBe(200);
    const counted = await send(gw.socketPath, { path: '/anthropic/v1/messages/count_tokens', body: { model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: 'hi' }] } });
    expect(counted.status).toBe(200);
    expect(fake.calls.map((c) => c.authOk)).toEqual([true, true]);
    const [message, count] = await gw.finish();
    expect(message).toMatchObject({
      api: 'messages',
      modelRequested: 'claude-sonnet-4-5',
      modelAnswered: 'claude-sonnet-4-5-20250929',
      stream: true,
      outcome: 'ok',
      stopReason: 'tool_use',
      usage: { inputTokens: 1000, outputTokens: 50 },
      userText: 'run it',
    });
    expect(message.toolCalls.map((c) => [c.name, JSON.parse(c.input).command])).toEqual([['Bash', 'echo hi']]);
    expect(callCostUsd(message)).toBeCloseTo((1000 * 3 + 50 * 15) / 1e6, 12);
    expect(count).toMatchObject({ api: 'count_tokens', outcome: 'ok' });
    expect(callCostUsd(count)).toBe(0);
    expect(gw.gateway.totals().tokens).toBe(1050); // counting tokens is free and not a use of them
  });
});

describe('LLM gateway: causation', () => {
  it('names the earlier call whose tool call a request answers (its tool_use_id), from the stored events the recorder gives back', async () => {
    const fake = await startFakeAnthropic({ script: ['echo hi', 'echo again'], expectKey: KEY, model: 'claude-sonnet-4-5-20250929' });
    cleanups.push(() => fake.close());
    const stored: Recorded[] = [];
    // A run's recorder resolves with the stored event; its id and seq are what a cause names.
    const record = async (data: Recorded) => {
      const seq = 10 + stored.push(data);
      return { id: eventId('r-causes', seq), seq };
    };
    const gw = await startGateway(fake.url, { codecs: undefined, record });
    const tools = [{ name: 'Bash', description: 'run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } }];
    const ask = (messages: unknown[]) => send(gw.socketPath, { headers: { 'anthropic-version': '2023-06-01' }, body: { model: 'claude-sonnet-4-5', max_tokens: 1024, stream: true, tools, messages } });
    expect((await ask([{ role: 'user', content: 'run it' }])).status).toBe(200);
    await until('the first call is recorded', () => stored.length === 1);
    const id = stored[0].toolCalls[0].id!;
    const answer = [{ role: 'assistant', content: [{ type: 'tool_use', id, name: 'Bash', input: { command: 'echo hi' } }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'hi' }] }];
    expect((await ask([{ role: 'user', content: 'run it' }, ...answer])).status).toBe(200);
    await gw.gateway.close();
    for (const r of stored) validatePayload('LlmCallRecorded', r);
    expect(stored[0].causedBy).toBeUndefined();
    expect(stored[1].causedBy).toEqual({ event: eventId('r-causes', 11), seq: 11, toolCallId: id });
  });
});

// ── the real codecs against the scripted providers (test/servers/fake-llm) ─────────────────────────

/** The three scripted providers behind one gateway (real codecs), each with `options`. */
async function startProviders(options: Partial<FakeLlmOptions> = {}, extra: Partial<LlmGatewayOptions> = {}) {
  const start = async (fake: (o: FakeLlmOptions) => Promise<FakeLlmServer>) => {
    const server = await fake({ script: [], expectKey: KEY, ...options });
    cleanups.push(() => server.close());
    return server;
  };
  const [anthropic, openai, gemini] = [await start(startFakeAnthropic), await start(startFakeOpenAI), await start(startFakeGemini)];
  const upstreams = { anthropic: { url: anthropic.url, key: KEY }, openai: { url: `${openai.url}/v1`, key: KEY }, gemini: { url: gemini.url, key: KEY } };
  const gw = await startGateway(anthropic.url, { codecs: undefined, upstreams, ...extra });
  return { gw, fakes: { anthropic, openai, gemini }, all: () => [...anthropic.calls, ...openai.calls, ...gemini.calls] };
}

const MESSAGES = (extra: Record<string, unknown> = {}) => ({ model: 'claude-sonnet-4-5', max_tokens: 400, stream: true, messages: [{ role: 'user', content: 'hi' }], ...extra });
const tokensOf = (r: Recorded) => (r.usage.inputTokens ?? 0) + (r.usage.outputTokens ?? 0) + (r.usage.cacheReadTokens ?? 0) + (r.usage.cacheWriteTokens ?? 0);

describe('LLM gateway against the scripted providers', () => {
  it('holds a token limit against 10 concurrent calls: in flight they never hold more than the limit', async () => {
    const MAX = 3000;
    const released = signal();
    let open = false;
    const { gw, fakes } = await startProviders({ usage: usageFromRequest(), hold: () => (open ? undefined : released.fired) }, { limits: { maxTokens: MAX } });
    const replies = Array.from({ length: 10 }, () => send(gw.socketPath, { body: MESSAGES() }));
    // Every call is either at the provider (held before its usage) or waiting for room at the gateway.
    await until('ten calls at the provider or waiting for room', () => {
      const p = gw.gateway.pending();
      return p.inFlight > 0 && p.inFlight === fakes.anthropic.calls.length && p.inFlight + p.waiting === 10;
    });
    const inFlight = gw.gateway.pending();
    open = true;
    released.fire();
    const statuses = (await Promise.all(replies)).map((r) => r.status);
    const records = await gw.finish();

    const answered = records.filter((r) => r.outcome === 'ok');
    const usages = fakes.anthropic.calls.map((c) => c.usage!);
    const largest = Math.max(...answered.map(tokensOf));
    expect({
      concurrent: inFlight.inFlight > 1 && inFlight.inFlight < 10,
      heldWithinLimit: inFlight.heldTokens <= MAX,
      refused: statuses.filter((s) => s === 429).length > 0,
      // Bound: calls that fit their reservations end under MAX; one more may go alone while the spend is under MAX.
      withinBound: gw.gateway.totals().tokens <= MAX - 1 + largest,
      everyAnsweredCallReachedTheProvider: answered.length === fakes.anthropic.calls.length,
      recordedAsReported: answered.map((r) => [r.usage.inputTokens, r.usage.outputTokens, r.usageSource]),
    }).toEqual({
      concurrent: true,
      heldWithinLimit: true,
      refused: true,
      withinBound: true,
      everyAnsweredCallReachedTheProvider: true,
      recordedAsReported: usages.map((u) => [u.input, u.output, 'provider']),
    });
    expect(records.filter((r) => r.outcome === 'limit_exceeded').map((r) => [r.status, r.error?.includes('--max-llm-tokens')])).toEqual(statuses.filter((s) => s === 429).map(() => [429, true]));
    expect(gw.limits).toEqual([['llmTokens', gw.gateway.totals().tokens, MAX]]);
  });

  it('lets a call through a cap smaller than its reservation when it is alone (a small cap still works)', async () => {
    const { gw, fakes } = await startProviders({ usage: () => ({ input: 20, output: 10 }) }, { limits: { maxTokens: 3000 } });
    const first = await send(gw.socketPath, { body: MESSAGES({ max_tokens: undefined }) }); // reserves 32768 + its bytes
    const second = await send(gw.socketPath, { body: MESSAGES({ max_tokens: undefined }) });
    expect([first.status, second.status, fakes.anthropic.calls.length]).toEqual([200, 200, 2]);
    expect((await gw.finish()).map((r) => [r.outcome, r.usageSource, tokensOf(r)])).toEqual([
      ['ok', 'provider', 30],
      ['ok', 'provider', 30],
    ]);
  });

  it('records what the provider reported when the agent hangs up after the content, before the final usage', async () => {
    const agentGone = signal();
    const { gw, fakes } = await startProviders({ usage: () => ({ input: 4321, output: 987 }), hold: () => within(agentGone.fired, STEP_CAP_MS, undefined) });
    // Anthropic: message_delta (the usage) comes after the content; OpenAI Chat: the usage chunk (include_usage) after the finish chunk.
    const cuts = [
      send(gw.socketPath, { body: MESSAGES(), onChunk: (chunk, req) => chunk.includes('content_block_stop') && req.destroy() }),
      send(gw.socketPath, {
        path: '/openai/v1/chat/completions',
        token: null,
        headers: { authorization: `Bearer ${TOKEN}` },
        body: { model: 'gpt-5', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] },
        onChunk: (chunk, req) => chunk.includes('"finish_reason":"stop"') && req.destroy(),
      }),
    ];
    const replies = await Promise.all(cuts);
    await until('both agents to hang up', () => gw.gateway.pending().agentGone === 2);
    agentGone.fire();
    await until('both calls to be recorded', () => gw.records.length === 2);
    const records = await gw.finish();
    // The final usage (output 987) never reached the agent; matched as a token count, since ids and timestamps are random digits.
    expect(replies.map((r) => [r.broken, /_tokens":\s*987\b/.test(r.body)])).toEqual([
      [true, false],
      [true, false],
    ]);
    expect(records.map((r) => [r.provider, r.outcome, r.usage.inputTokens, r.usage.outputTokens, r.usageSource, r.deliveredBytes! < r.response!.size])).toEqual([
      ['anthropic', 'client_aborted', 4321, 987, 'provider', true],
      ['openai', 'client_aborted', 4321, 987, 'provider', true],
    ]);
    expect([...fakes.anthropic.calls, ...fakes.openai.calls].map((c) => c.finished)).toEqual([true, true]);
  });

  it('never forwards organisation, project, workspace, billing, cookie or forwarding headers', async () => {
    const { gw, all } = await startProviders();
    const agentHeaders = {
      'OpenAI-Organization': 'org-attacker',
      'OpenAI-Project': 'proj-attacker',
      'anthropic-workspace': 'wrk-attacker',
      'x-goog-user-project': 'attacker-project',
      'x-forwarded-for': '203.0.113.9',
      forwarded: 'for=203.0.113.9',
      cookie: 'session=attacker',
      'x-stainless-os': 'attacker',
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'prompt-caching-2024-07-31',
      'openai-beta': 'responses=v1',
    };
    const bearer = { authorization: `Bearer ${TOKEN}` };
    const statuses = [
      (await send(gw.socketPath, { headers: agentHeaders, body: MESSAGES({ stream: false }) })).status,
      (await send(gw.socketPath, { path: '/openai/v1/responses', token: null, headers: { ...agentHeaders, ...bearer }, body: { model: 'gpt-5', input: 'hi' } })).status,
      (await send(gw.socketPath, { path: '/gemini/v1beta/models/gemini-2.5-pro:generateContent', token: null, headers: { ...agentHeaders, 'x-goog-api-key': TOKEN }, body: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] } })).status,
    ];
    expect(statuses).toEqual([200, 200, 200]);
    const seen = all().map((c) => Object.keys(c.headers).filter((h) => !['host', 'connection', 'content-length', 'content-type', 'accept', 'accept-encoding'].includes(h)).sort());
    expect(seen).toEqual([['anthropic-beta', 'anthropic-version', 'x-api-key'], ['authorization', 'openai-beta'], ['x-goog-api-key']]);
    expect(all().every((c) => c.authOk)).toBe(true);
    await gw.finish();
  });

  it('answers bad model names and path tricks 400 without forwarding them; path tricks leave no record, bad names no model', async () => {
    const { gw, all } = await startProviders();
    const gemini = { token: null, headers: { 'x-goog-api-key': TOKEN }, body: { contents: [] } };
    const tricks = [
      { path: '/anthropic/v1/../v1/messages', body: MESSAGES() },
      { path: '/anthropic/v1/./messages', body: MESSAGES() },
      { path: '/anthropic/v1//messages', body: MESSAGES() },
      { path: '/anthropic/v1/messages%2F..%2Fcount_tokens', body: MESSAGES() },
      { path: '/anthropic/v1\\messages', body: MESSAGES() },
      { path: '/anthropic/v1/messages?beta=true&beta=false', body: MESSAGES() },
      { path: '/anthropic/v1/messages?beta=true&anthropic_org=evil', body: MESSAGES() },
      { path: '/openai/v1/chat/completions?api-version=2024-01-01', token: null, headers: { authorization: `Bearer ${TOKEN}` }, body: { model: 'gpt-5' } },
      { path: '/gemini/v1beta/models/..%2F..%2Fv1%2Ffiles:generateContent', ...gemini },
      { path: '/gemini/v1beta/models/gemini-2.5-pro%3AgenerateContent', ...gemini },
      { path: '/gemini/v1beta/models/gemini-2.5-pro:generateContent?alt=sse&upload_protocol=raw', ...gemini },
      { path: '/gemini/v1beta/models/gem~ini:generateContent', ...gemini },
      { path: '/gemini/v1beta/models/gemini-2.5-pro:generateContent#frag', ...gemini },
    ];
    const trickStatuses = [];
    for (const trick of tricks) trickStatuses.push((await send(gw.socketPath, trick)).status);
    expect(trickStatuses).toEqual(tricks.map(() => 400));
    const badNames = ['../../v1/files', 'gpt-4o\u001b[31mred', 'a'.repeat(201), '', 'model?x=1', 'claude sonnet', '/abs', 'a//b', 'openai/../x'];
    const nameReplies = [];
    for (const model of badNames) nameReplies.push(await send(gw.socketPath, { body: MESSAGES({ model }) }));
    expect(nameReplies.map((r) => [r.status, JSON.parse(r.body).error.type])).toEqual(badNames.map(() => [400, 'invalid_request_error']));
    expect(all().length).toBe(0);
    // Names that are ids still go: a provider prefix in a body (OpenRouter, LiteLLM), a fine-tune id, a dated snapshot.
    const bearer = { token: null, headers: { authorization: `Bearer ${TOKEN}` } };
    for (const model of ['openai/gpt-4o', 'ft:gpt-4o-mini:org:custom:abc123']) expect((await send(gw.socketPath, { path: '/openai/v1/chat/completions', ...bearer, body: { model, messages: [] } })).status).toBe(200);
    expect((await send(gw.socketPath, { body: MESSAGES({ model: 'claude-sonnet-4-5@20250929', stream: false }) })).status).toBe(200);
    const records = await gw.finish();
    expect(records.map((r) => [r.outcome, r.status, r.modelRequested])).toEqual([
      ...badNames.map(() => ['refused', 400, null]),
      ['ok', 200, 'openai/gpt-4o'],
      ['ok', 200, 'ft:gpt-4o-mini:org:custom:abc123'],
      ['ok', 200, 'claude-sonnet-4-5@20250929'],
    ]);
    expect(gw.gateway.totals().tokens).toBe(records.filter((r) => r.outcome === 'ok').reduce((n, r) => n + tokensOf(r), 0));
  });

  it('honest control: every provider\'s usage is recorded as it reported it, marked provider', async () => {
    const { gw, all } = await startProviders({ model: 'answered-model' });
    const bearer = { token: null, headers: { authorization: `Bearer ${TOKEN}` } };
    const gemini = { token: null, headers: { 'x-goog-api-key': TOKEN }, body: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] } };
    const calls = [
      { body: MESSAGES() },
      { body: MESSAGES({ stream: false }) },
      { path: '/openai/v1/chat/completions', ...bearer, body: { model: 'gpt-5', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] } },
      { path: '/openai/v1/chat/completions', ...bearer, body: { model: 'gpt-5', messages: [{ role: 'user', content: 'hi' }] } },
      { path: '/openai/v1/responses', ...bearer, body: { model: 'gpt-5', stream: true, input: 'hi' } },
      { path: '/openai/v1/responses', ...bearer, body: { model: 'gpt-5', input: 'hi' } },
      { path: '/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse', ...gemini },
      { path: '/gemini/v1beta/models/gemini-2.5-pro:generateContent', ...gemini },
    ];
    for (const call of calls) expect((await send(gw.socketPath, call)).status).toBe(200);
    const records = await gw.finish();
    expect(records.map((r) => [r.usage.inputTokens, r.usage.outputTokens, r.usageSource, r.modelAnswered])).toEqual(all().map((c) => [c.usage!.input, c.usage!.output, 'provider', 'answered-model']));
  });

  it('an agent that hangs up while its call waits for room is recorded 499 and never reaches the provider', async () => {
    const released = signal();
    const { gw, fakes } = await startProviders({ hold: () => released.fired }, { limits: { maxTokens: 100_000, defaultReserveTokens: 60_000 } });
    const first = send(gw.socketPath, { body: MESSAGES({ max_tokens: undefined }) });
    await until('the first call at the provider', () => fakes.anthropic.calls.length === 1);
    const waiting = http.request({ socketPath: gw.socketPath, method: 'POST', path: '/anthropic/v1/messages', headers: { 'x-api-key': TOKEN, 'content-type': 'application/json' }, agent: false });
    waiting.on('error', () => undefined);
    waiting.end(JSON.stringify(MESSAGES({ max_tokens: undefined })));
    await until('one call waiting for room', () => gw.gateway.pending().waiting === 1);
    waiting.destroy();
    await until('no call waiting', () => gw.gateway.pending().waiting === 0);
    released.fire();
    expect((await first).status).toBe(200);
    const records = await gw.finish();
    expect(records.map((r) => [r.outcome, r.status])).toEqual([
      ['ok', 200],
      ['client_aborted', 499],
    ]);
    expect(fakes.anthropic.calls.length).toBe(1);
  });
});

describe('LLM gateway: bodies stored as pieces', () => {
  const text = (tag: string, n: number) => `${tag} ${'lorem ipsum '.repeat(Math.ceil(n / 12))}`.slice(0, n);
  const SYSTEM = [{ type: 'text', text: text('SYSTEM-PROMPT', 1500) }];
  const TOOLS = [{ name: 'Bash', description: text('TOOL-DEFINITIONS', 2000), input_schema: { type: 'object' } }];

  it('stores each message of a 3-call conversation once; every reader rebuilds exactly what the upstream received', async () => {
    // The upstream answers each call with a tool call; the agent sends it back with its result.
    const answerOf = (i: number) => ({ model: 'claude-sonnet-4-5', content: [{ type: 'tool_use', id: `toolu_${i}`, name: 'Bash', input: { command: text(`ANSWER-${i}`, 700) } }], usage: { in: 10, out: 5 }, stop: 'tool_use' });
    const upstream = await startUpstream((_req, res, seen) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answerOf(upstream.seen.indexOf(seen))));
    });
    const gw = await startGateway(upstream.url);
    // Key order, an escape and raw non-ASCII: what a re-serializer would change must come back as sent.
    const messages: string[] = [`{"content":"${text('USER-TASK \\u00e9 élève', 400)}","role":"user"}`];
    const replies: string[] = [];
    for (let i = 0; i < 3; i++) {
      const body = `{"model":"claude-sonnet-4-5", "messages":[${messages.join(',')}],"system":${JSON.stringify(SYSTEM)},"tools":${JSON.stringify(TOOLS)},"max_tokens":1024}`;
      const reply = await send(gw.socketPath, { body });
      expect(reply.status).toBe(200);
      replies.push(reply.body);
      const content = JSON.stringify((JSON.parse(reply.body) as { content: unknown }).content);
      messages.push(`{"role":"assistant","content":${content}}`, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_${i}","content":"${text(`RESULT-${i}`, 900)}"}]}`);
    }
    const records = await gw.finish();
    expect(records.map((r) => [r.request === undefined, r.requestPieces !== undefined, r.responsePieces !== undefined])).toEqual([[true, true, true], [true, true, true], [true, true, true]]);

    // Rebuilt by the one function every reader uses, and through the blob reader of the CLI and dashboard.
    const readBlob = async (sha256: string) => gw.blobs.get(sha256) ?? null;
    const artifacts = { get: async (sha256: string) => (gw.blobs.has(sha256) ? Readable.from([gw.blobs.get(sha256)!]) : Promise.reject(new ArtifactNotFoundError(sha256))) } as unknown as ArtifactStore;
    for (const [i, r] of records.entries()) {
      expect((await rebuildBody(recordedBody(r, 'request'), readBlob)).toString('utf8')).toBe(upstream.seen[i].body);
      expect((await rebuildBody(recordedBody(r, 'response'), readBlob)).toString('utf8')).toBe(replies[i]);
      const part = pickEventBlob(eventBlobs({ data: r }), 'request')!;
      expect((await readEventBlob(artifacts, part, `request of call ${i}`, 1 << 20)).toString('utf8')).toBe(upstream.seen[i].body);
    }
    // Stored once: each message, the system prompt and the tools are in exactly one blob, written once.
    const stored = [...gw.blobs.values()].map((b) => b.toString('utf8'));
    for (const marker of ['USER-TASK', 'SYSTEM-PROMPT', 'TOOL-DEFINITIONS', 'ANSWER-0', 'ANSWER-1', 'RESULT-0', 'RESULT-1']) {
      expect([marker, stored.filter((b) => b.includes(marker)).length]).toEqual([marker, 1]);
    }
    expect([...gw.puts.values()].every((n) => n === 1)).toBe(true);
    const storedBytes = stored.reduce((n, b) => n + Buffer.byteLength(b), 0);
    const wholeBytes = upstream.seen.reduce((n, s) => n + Buffer.byteLength(s.body), 0) + replies.reduce((n, b) => n + Buffer.byteLength(b), 0);
    expect(storedBytes).toBeLessThan(wholeBytes * 0.6);
  });
});

describe('upstreamsFromEnv', () => {
  it('takes each provider with a key, at its URL or the provider default', () => {
    const upstreams = upstreamsFromEnv({
      A2RL_LLM_ANTHROPIC_KEY: 'sk-ant',
      A2RL_LLM_OPENAI_KEY: 'sk-oai',
      A2RL_LLM_OPENAI_URL: 'http://127.0.0.1:8000/v1/',
      A2RL_LLM_GEMINI_URL: 'http://127.0.0.1:9000', // no key: absent
    });
    expect(upstreams).toEqual({
      anthropic: { url: 'https://api.anthropic.com', key: 'sk-ant' },
      openai: { url: 'http://127.0.0.1:8000/v1', key: 'sk-oai' },
    });
  });

  it('rejects a URL that is not an http(s) base URL', () => {
    expect(() => upstreamsFromEnv({ A2RL_LLM_OPENAI_KEY: 'k', A2RL_LLM_OPENAI_URL: 'ftp://host/v1' })).toThrow(/A2RL_LLM_OPENAI_URL/);
    expect(() => upstreamsFromEnv({ A2RL_LLM_OPENAI_KEY: 'k', A2RL_LLM_OPENAI_URL: 'not a url' })).toThrow(/A2RL_LLM_OPENAI_URL/);
  });
});
