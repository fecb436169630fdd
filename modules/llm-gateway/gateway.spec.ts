import { afterEach, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EventData } from '../ledger/events/catalog.js';
import { validatePayload } from '../ledger/events/envelope.js';
import { startFakeAnthropic } from '../../test/servers/fake-llm/fake-anthropic.js';
import { startLlmGateway, type LlmGatewayOptions } from './gateway.js';
import { priceTable } from './prices.js';
import type { ProviderCodec, ResponseFacts } from './protocol.js';
import { upstreamsFromEnv } from './upstreams.js';

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
  return { gateway, socketPath, records, limits, errors, finish, blobText };
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

/** Resolves with `value` when the promise does not settle in `ms`: a missed step fails an assertion instead of hanging the test. */
function within<T>(promise: Promise<T>, ms: number, value: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<T>((resolve) => (timer = setTimeout(() => resolve(value), ms)))]).finally(() => clearTimeout(timer));
}

const REQUEST = { model: 'claude-sonnet-4-5', stream: true, messages: [{ role: 'user', content: 'hi' }], prompt: 'hi' };

/** Waits until `ready()` (checked every 20 ms, for at most 20 s): a missed step then fails the assertion after it. */
async function until(ready: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!ready() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
}

// ── specs ──────────────────────────────────────────────────────────────────────────────────────

describe('LLM gateway', () => {
  it('streams the answer through as it arrives and records the call', async () => {
    const clientGotFirst = signal();
    let lastSent = false;
    const upstream = await startUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse({ model: 'claude-sonnet-4-5-20250929', text: 'Hel' }));
      // The rest only once the agent has the first event (or after 5 s): a buffering gateway is caught by `firstBeforeLast`.
      void within(clientGotFirst.fired, 5000, undefined).then(() => {
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
    expect(call.costUsd).toBeCloseTo((100 * 3 + 50 * 15) / 1e6, 12);
    expect(call.ttftMs !== null && call.ttftMs >= 0 && call.ttftMs <= call.latencyMs).toBe(true);
    // The request blob is the body as the agent sent it; the response blob what the agent got.
    expect(call.request.sha256).toBe(sha(JSON.stringify(REQUEST)));
    expect(gw.blobText(call.response) === reply.body).toBe(true);
    expect(gw.gateway.totals()).toEqual({ calls: 1, tokens: 150, costUsd: call.costUsd });
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
    expect(call).toMatchObject({ outcome: 'upstream_error', status: 529, error: 'overloaded', costUsd: null });
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
      void within(agentGone.fired, 10_000, undefined).then(() => res.end(sse({ text: ' second', usage: { in: 700, out: 300 } }), () => (ended = true)));
    });
    const gw = await startGateway(upstream.url);
    const reply = await send(gw.socketPath, { body: REQUEST, onChunk: (_chunk, req) => req.destroy() });
    expect(reply.broken).toBe(true);
    await until(() => gw.gateway.pending().agentGone === 1);
    agentGone.fire();
    await until(() => gw.records.length === 1); // (closing the gateway first would end the call)
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
    await within(clientGotFirst.fired, 10_000, undefined);
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
      await within(got[n].fired, 10_000, undefined);
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
    expect(call.costUsd).toBeNull(); // a model without a price costs null, not 0
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
    expect(call).toMatchObject({ api: 'models', outcome: 'ok', costUsd: 0, stream: false });
  });

  it('waits for an agent that reads slowly without taking it for upstream silence', async () => {
    const big = sse({ text: 'y'.repeat(8 * 1024 * 1024) });
    const upstream = await startUpstream((_req, res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(big + sse({ usage: { in: 1, out: 1 } })));
    const gw = await startGateway(upstream.url, { upstreamTimeoutMs: 300 });
    let paused = false;
    const reply = await send(gw.socketPath, {
      body: REQUEST,
      onChunk: (_chunk, req) => {
        if (paused) return;
        paused = true; // the agent stops reading for longer than the upstream timeout
        req.socket?.pause();
        setTimeout(() => req.socket?.resume(), 1000);
      },
    });
    expect([reply.status, reply.broken, reply.body.length]).toEqual([200, false, Buffer.byteLength(big) + sse({ usage: { in: 1, out: 1 } }).length]);
    const [call] = await gw.finish();
    expect(call.outcome).toBe('ok');
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
    expect(message.costUsd).toBeCloseTo((1000 * 3 + 50 * 15) / 1e6, 12);
    expect(count).toMatchObject({ api: 'count_tokens', outcome: 'ok', costUsd: 0 });
    expect(gw.gateway.totals().tokens).toBe(1050); // counting tokens is free and not a use of them
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
