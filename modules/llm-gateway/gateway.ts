import { createHash, timingSafeEqual } from 'node:crypto';
import http, { type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { EventData } from '../ledger/events/catalog.js';
import PQueue from 'p-queue';
import { listenUnix, type SocketOwner } from '../runs/sandbox/unix-socket.js';
import { costOf, priceTable } from './prices.js';
import { emptyResponseFacts, type ApiRoute, type GatewayErrorKind, type Provider, type ProviderCodec, type RequestFacts, type ResponseFacts, type Usage } from './protocol.js';

/**
 * The run's LLM gateway: the agent's only way to its model. It serves `/<provider>/<path>` with
 * that provider's codec (protocol.ts), checks the agent's per-run token, swaps it for the harness's
 * key, streams the upstream's answer through as it arrives, and records every call that reached a
 * codec's route as one `LlmCallRecorded` (facts, usage, cost, bodies as blobs), in arrival order.
 * docs/llm-gateway.md describes the routes, limits and records.
 */
export interface LlmGatewayOptions {
  /** A Unix socket (a run's: 0660, group `owner.gid` when given) or a loopback port. */
  listen: { path: string; owner?: SocketOwner } | { port: number; host?: string };
  /** The agent's credential (compared in constant time). */
  token: string;
  /** Providers without one: 503 in the provider's error shape, recorded as upstream_unreachable. */
  upstreams: Partial<Record<Provider, { url: string; key: string }>>;
  /** Default: every provider's codec (upstreams.ts `defaultCodecs`). */
  codecs?: ProviderCodec[];
  limits?: { maxTokens?: number | null; maxCostUsd?: number | null };
  record: (data: EventData<'LlmCallRecorded'>) => Promise<unknown>;
  /** The run's redacting artifact store. */
  storeBlob: (body: Buffer) => Promise<{ sha256: string; size: number; key: string }>;
  /** Called once per limit, when the run's calls first reach it. */
  onLimit?: (limit: 'llmTokens' | 'llmCostUsd', value: number, max: number) => void;
  clock?: () => Date;
  /** No byte from the upstream for this long: 504 in the provider's shape, outcome upstream_timeout. Default 600000. */
  upstreamTimeoutMs?: number;
  onError?: (err: unknown) => void;
}

export interface LlmGateway {
  /** The base URL when listening on a port (a Unix socket has none). */
  url?: string;
  /** Calls recorded, their tokens (input + output + cache read + cache write) and cost (null when a call's model has no price). */
  totals(): { calls: number; tokens: number; costUsd: number | null };
  /** Stops accepting, aborts the calls in flight (recorded gateway_closed) and resolves once every record is written. */
  close(): Promise<void>;
}

/** Request bodies and the kept copy of each response are capped at this size. */
export const MAX_BODY_BYTES = 32 * 1024 * 1024;
const DEFAULT_UPSTREAM_TIMEOUT_MS = 600_000;
const MIN_TOKEN_LENGTH = 16;
/** What `status` says when the agent got no answer (it hung up first): nginx's "client closed request". */
const CLIENT_CLOSED_STATUS = 499;
const CUT = { text: 2000, output: 4000, name: 300, error: 1000, stopReason: 100, model: 300, items: 100 };

export async function startLlmGateway(options: LlmGatewayOptions): Promise<LlmGateway> {
  // The token is also scrubbed from every forwarded header and parameter, so it must be unguessable and long.
  if (options.token.length < MIN_TOKEN_LENGTH) throw new Error(`the LLM gateway token must have at least ${MIN_TOKEN_LENGTH} characters`);
  const codecs = options.codecs ?? (await import('./upstreams.js')).defaultCodecs();
  const gateway = new Gateway(options, codecs);
  await gateway.listen();
  return gateway;
}

type Outcome = EventData<'LlmCallRecorded'>['outcome'];
type BlobRef = Awaited<ReturnType<LlmGatewayOptions['storeBlob']>>;

/** An upstream as requests to it are made: its base URL taken apart once. */
interface UpstreamTarget {
  secure: boolean;
  hostname: string;
  port?: string;
  basePath: string;
  key: string;
}

/** One routed request from its arrival to its record. */
interface Call {
  id: string;
  codec: ProviderCodec;
  route: ApiRoute;
  path: string;
  query: URLSearchParams;
  req: IncomingMessage;
  res: ServerResponse;
  t0: number;
  startedAt: Date;
  body: Buffer;
  facts: RequestFacts;
  status: number | null;
  ttftMs: number | null;
  latencyMs: number;
  /** The copy of what the agent got (capped). */
  sent: Buffer[];
  sentBytes: number;
  truncated: boolean;
  /** The body came from the gateway (a refusal or an error it made), not from the upstream. */
  ownBody: boolean;
  streamed: boolean;
  upstream?: http.ClientRequest;
  retried?: boolean;
  timer?: NodeJS.Timeout;
  timerPaused?: boolean;
  outcome?: Outcome;
  error?: string;
  /** Hands the call's record (or nothing, when it could not be made) to its place in the record queue. */
  deliver: (data: EventData<'LlmCallRecorded'> | undefined) => void;
}

class Gateway implements LlmGateway {
  url?: string;
  private readonly server: http.Server;
  private readonly codecs = new Map<string, ProviderCodec>();
  private readonly upstreams = new Map<string, UpstreamTarget>();
  private readonly inflight = new Set<Call>();
  private readonly agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  private readonly tokenHash: Buffer;
  private readonly clock: () => Date;
  private readonly timeoutMs: number;
  private readonly prices = priceTable();
  private arrivals = 0;
  /** Records are appended in callId order: each call takes its place at arrival and is written when it ends. */
  private readonly records = new PQueue({ concurrency: 1 });
  private closing?: Promise<void>;
  private sum = { calls: 0, tokens: 0, costUsd: 0, unpriced: 0 };
  private readonly limitsNoted = new Set<string>();
  private removeSocket?: () => Promise<void>;

  constructor(
    private readonly options: LlmGatewayOptions,
    codecs: ProviderCodec[],
  ) {
    for (const codec of codecs) this.codecs.set(codec.provider, codec);
    for (const [provider, upstream] of Object.entries(options.upstreams)) if (upstream) this.upstreams.set(provider, targetOf(upstream));
    this.tokenHash = digest(options.token);
    this.clock = options.clock ?? (() => new Date());
    this.timeoutMs = options.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS;
    this.server = http.createServer({ noDelay: true }, (req, res) => {
      this.handle(req, res).catch((err: unknown) => this.failed(err, res));
    });
  }

  async listen(): Promise<void> {
    const where = this.options.listen;
    if ('path' in where) {
      this.removeSocket = await listenUnix(this.server, where.path, where.owner);
    } else {
      await new Promise<void>((resolve, reject) => {
        this.server.once('error', reject);
        this.server.listen(where.port, where.host ?? '127.0.0.1', () => resolve());
      });
      const { address, port } = this.server.address() as AddressInfo;
      this.url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
    }
    this.server.on('error', (err) => this.options.onError?.(err));
  }

  totals(): { calls: number; tokens: number; costUsd: number | null } {
    const { calls, tokens, costUsd, unpriced } = this.sum;
    return { calls, tokens, costUsd: unpriced > 0 ? null : round(costUsd) };
  }

  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    const stopped = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    for (const call of [...this.inflight]) this.abortForClose(call);
    await this.recordsWritten();
    this.server.closeAllConnections();
    await stopped;
    this.agents.http.destroy();
    this.agents.https.destroy();
    await this.removeSocket?.();
  }

  /** Waits for the record queue, including calls that arrived while it was waited for. */
  private recordsWritten(): Promise<void> {
    return this.records.onIdle();
  }

  // ── one request ────────────────────────────────────────────────────────────────────────────────

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://gateway');
    const provider = /^\/([^/]+)(\/.*)?$/.exec(url.pathname);
    const codec = provider ? this.codecs.get(provider[1]) : undefined;
    const path = provider?.[2] ?? '/';
    const route = codec?.route(req.method ?? 'GET', path) ?? null;
    if (!codec || !route) return notFound(res, codec, url.pathname);

    const call = this.open(codec, route, path, url.searchParams, req, res);
    if (this.closing) return this.answer(call, 503, 'upstream', 'gateway_closed', 'the LLM gateway is closing', { connection: 'close' });
    if (!(await this.readBody(call))) return;
    if (!this.authorized(codec.credential(req.headers, url.searchParams))) return this.answer(call, 401, 'auth', 'refused', 'missing or invalid gateway token');
    const upstream = this.upstreams.get(codec.provider);
    if (!upstream) return this.answer(call, 503, 'upstream', 'upstream_unreachable', `no upstream is configured for ${codec.provider} (A2RL_LLM_${codec.provider.toUpperCase()}_KEY)`);
    const over = route.billable ? this.limitExceeded() : null;
    if (over) return this.answer(call, 429, 'limit', 'limit_exceeded', over);
    this.forward(call, upstream);
  }

  /** Registers a routed request: its callId, its place in the record order, its client's hang-up. */
  private open(codec: ProviderCodec, route: ApiRoute, path: string, query: URLSearchParams, req: IncomingMessage, res: ServerResponse): Call {
    let deliver!: Call['deliver'];
    const ready = new Promise<EventData<'LlmCallRecorded'> | undefined>((resolve) => (deliver = resolve));
    void this.records.add(async () => {
      const data = await ready;
      if (data) await this.options.record(data).catch((err: unknown) => this.options.onError?.(err));
    });
    const call: Call = {
      id: `llm-${++this.arrivals}`,
      codec,
      route,
      path,
      query,
      req,
      res,
      t0: performance.now(),
      startedAt: this.clock(),
      body: Buffer.alloc(0),
      facts: { model: route.model ?? null, stream: route.streamByPath ?? false, messages: 0, toolResults: [] },
      status: null,
      ttftMs: null,
      latencyMs: 0,
      sent: [],
      sentBytes: 0,
      truncated: false,
      ownBody: false,
      streamed: false,
      deliver,
    };
    this.inflight.add(call);
    res.on('close', () => {
      if (call.outcome || res.writableFinished) return;
      this.finish(call, 'client_aborted', 'the agent closed the connection before the answer ended');
      call.upstream?.destroy();
    });
    return call;
  }

  /** Reads the request body (≤ 32 MiB, else 413); false when the call already ended. */
  private readBody(call: Call): Promise<boolean> {
    const { req } = call;
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > MAX_BODY_BYTES) {
      this.answer(call, 413, 'bad_request', 'refused', `request body over ${MAX_BODY_BYTES} bytes`, { connection: 'close' });
      req.resume();
      return Promise.resolve(false);
    }
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        if (call.outcome) return;
        size += chunk.length;
        if (size <= MAX_BODY_BYTES) return void chunks.push(chunk);
        call.body = Buffer.concat(chunks);
        this.answer(call, 413, 'bad_request', 'refused', `request body over ${MAX_BODY_BYTES} bytes`, { connection: 'close' });
        resolve(false);
      });
      req.on('end', () => {
        if (!call.outcome) call.body = Buffer.concat(chunks);
        resolve(!call.outcome);
      });
      req.on('close', () => {
        if (!req.complete) call.body = Buffer.concat(chunks);
        resolve(false);
      });
      req.on('error', () => resolve(false));
    });
  }

  private authorized(credential: string | undefined): boolean {
    return credential !== undefined && timingSafeEqual(digest(credential), this.tokenHash);
  }

  /** The first limit the run's calls have reached, as the refusal's message; null when none. */
  private limitExceeded(): string | null {
    this.noteLimits();
    const { maxTokens, maxCostUsd } = this.options.limits ?? {};
    if (maxTokens != null && this.sum.tokens >= maxTokens) return `LLM token limit reached: ${this.sum.tokens} of ${maxTokens} tokens used (--max-llm-tokens)`;
    if (maxCostUsd != null && this.sum.costUsd >= maxCostUsd) return `LLM cost limit reached: $${round(this.sum.costUsd)} of $${maxCostUsd} spent (--max-llm-cost)`;
    return null;
  }

  /** Tells `onLimit`, once per limit, that the run's calls have reached it. */
  private noteLimits(): void {
    const { maxTokens, maxCostUsd } = this.options.limits ?? {};
    const reached: Array<['llmTokens' | 'llmCostUsd', number, number | null | undefined]> = [
      ['llmTokens', this.sum.tokens, maxTokens],
      ['llmCostUsd', round(this.sum.costUsd), maxCostUsd],
    ];
    for (const [limit, value, max] of reached) {
      if (max == null || value < max || this.limitsNoted.has(limit)) continue;
      this.limitsNoted.add(limit);
      try {
        this.options.onLimit?.(limit, value, max);
      } catch (err) {
        this.options.onError?.(err);
      }
    }
  }

  // ── forwarding ─────────────────────────────────────────────────────────────────────────────────

  private forward(call: Call, upstream: UpstreamTarget): void {
    const query = new URLSearchParams(call.query);
    const headers = this.upstreamHeaders(call, query, upstream.key);
    const search = query.toString();
    const request = (upstream.secure ? https : http).request({
      protocol: upstream.secure ? 'https:' : 'http:',
      hostname: upstream.hostname,
      port: upstream.port,
      method: call.req.method,
      path: `${upstream.basePath}${call.codec.upstreamPath(call.path)}${search ? `?${search}` : ''}`,
      headers,
      agent: upstream.secure ? this.agents.https : this.agents.http,
    });
    call.upstream = request;
    request.on('socket', (socket) => socket.setNoDelay(true));
    request.on('response', (answer) => this.relay(call, answer));
    request.on('error', (err) => this.upstreamFailed(call, err, upstream));
    this.armTimer(call);
    request.end(call.body.length > 0 ? call.body : undefined);
  }

  /** The agent's headers as the upstream gets them: hop-by-hop ones and the agent's token gone, the harness's key in. */
  private upstreamHeaders(call: Call, query: URLSearchParams, key: string): Record<string, string> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(call.req.headers)) {
      if (value === undefined || DROPPED_REQUEST_HEADERS.has(name)) continue;
      headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    headers['accept-encoding'] = 'identity'; // the gateway reads the stream it passes on
    if (call.body.length > 0 || BODY_METHODS.has(call.req.method ?? '')) headers['content-length'] = String(call.body.length);
    call.codec.authorize(headers, query, key);
    this.scrubToken(headers, query);
    return headers;
  }

  /** Whatever the codec left of the agent's token (another header, another parameter) never goes upstream. */
  private scrubToken(headers: Record<string, string>, query: URLSearchParams): void {
    const token = this.options.token;
    for (const name of Object.keys(headers)) if (headers[name].includes(token)) delete headers[name];
    for (const [name, value] of [...query]) if (value.includes(token)) query.delete(name, value);
  }

  /** Passes the upstream's answer on chunk by chunk, keeping a capped copy. */
  private relay(call: Call, upstream: IncomingMessage): void {
    if (call.outcome) return void upstream.destroy();
    const { res } = call;
    call.status = upstream.statusCode ?? 502;
    call.streamed = /^text\/event-stream/i.test(String(upstream.headers['content-type'] ?? ''));
    this.armTimer(call);
    res.writeHead(call.status, responseHeaders(upstream.headers));
    res.flushHeaders();
    upstream.on('data', (chunk: Buffer) => {
      if (call.outcome) return;
      call.ttftMs ??= performance.now() - call.t0;
      keep(call, chunk);
      if (res.write(chunk)) return this.armTimer(call);
      // The agent reads slower than the upstream sends: wait for it, without counting that as upstream silence.
      upstream.pause();
      clearTimeout(call.timer);
      call.timerPaused = true;
      res.once('drain', () => {
        upstream.resume();
        this.armTimer(call);
      });
    });
    upstream.on('end', () => {
      if (call.outcome) return;
      res.end();
      const ok = call.status! >= 200 && call.status! < 300;
      this.finish(call, ok ? 'ok' : 'upstream_error');
    });
    upstream.on('close', () => {
      if (call.outcome || upstream.complete) return;
      this.finish(call, 'upstream_error', 'the upstream connection broke before the answer ended');
      res.destroy();
    });
    upstream.on('error', () => undefined); // 'close' above reports it
  }

  private upstreamFailed(call: Call, err: NodeJS.ErrnoException, upstream: UpstreamTarget): void {
    if (call.outcome) return;
    // A kept-alive connection the upstream closed just as it was reused: once more on a fresh one.
    if (call.upstream?.reusedSocket && err.code === 'ECONNRESET' && !call.res.headersSent && !call.retried) {
      call.retried = true;
      return this.forward(call, upstream);
    }
    if (!call.res.headersSent) return this.answer(call, 502, 'upstream', 'upstream_unreachable', `the upstream could not be reached: ${err.message}`);
    this.finish(call, 'upstream_error', `the upstream connection failed: ${err.message}`);
    call.res.destroy();
  }

  /** (Re)starts the wait for the upstream's next byte. */
  private armTimer(call: Call): void {
    if (call.timer && !call.timerPaused) return void call.timer.refresh();
    call.timerPaused = false;
    call.timer = setTimeout(() => this.timedOut(call), this.timeoutMs);
  }

  private timedOut(call: Call): void {
    if (call.outcome) return;
    const message = `no byte from the upstream for ${this.timeoutMs} ms`;
    if (!call.res.headersSent) this.answer(call, 504, 'timeout', 'upstream_timeout', message);
    else {
      this.finish(call, 'upstream_timeout', message);
      call.res.destroy();
    }
    call.upstream?.destroy();
  }

  private abortForClose(call: Call): void {
    if (call.outcome) return;
    if (!call.res.headersSent) this.answer(call, 503, 'upstream', 'gateway_closed', 'the LLM gateway closed', { connection: 'close' });
    else {
      this.finish(call, 'gateway_closed', 'the LLM gateway closed before the answer ended');
      call.res.destroy();
    }
    call.upstream?.destroy();
  }

  /** Ends a call with an answer the gateway makes, in the provider's error shape. */
  private answer(call: Call, status: number, kind: GatewayErrorKind, outcome: Outcome, message: string, extra: OutgoingHttpHeaders = {}): void {
    if (call.outcome) return;
    const body = Buffer.from(JSON.stringify(call.codec.errorBody(kind, status, message)));
    call.status = status;
    call.ownBody = true;
    keep(call, body);
    if (!call.res.headersSent) call.res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length, ...extra });
    call.res.end(body);
    this.finish(call, outcome, message);
  }

  // ── accounting and the record ──────────────────────────────────────────────────────────────────

  /** Settles a call once: its outcome, the run's totals, then its record (in callId order). */
  private finish(call: Call, outcome: Outcome, error?: string): void {
    if (call.outcome) return;
    call.outcome = outcome;
    call.error = error;
    call.latencyMs = performance.now() - call.t0;
    clearTimeout(call.timer);
    this.inflight.delete(call);
    call.facts = requestFactsOf(call); // read off the critical path: nothing before forwarding needs it
    const answer = this.responseFactsOf(call);
    const costUsd = call.route.billable ? costOf(answer.model ?? call.facts.model, answer.usage, this.prices) : 0;
    this.account(call, answer.usage, costUsd);
    void this.record(call, answer, costUsd);
  }

  private account(call: Call, usage: Usage, costUsd: number | null): void {
    this.sum.calls += 1;
    if (!call.route.billable) return;
    const tokens = (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0) + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0);
    this.sum.tokens += tokens;
    if (costUsd !== null) this.sum.costUsd += costUsd;
    else if (tokens > 0) this.sum.unpriced += 1;
    this.noteLimits();
  }

  private responseFactsOf(call: Call): ResponseFacts {
    const none = emptyResponseFacts();
    if (call.ownBody || call.status === null) return none;
    try {
      return call.codec.responseFacts(call.route, call.status, Buffer.concat(call.sent).toString('utf8'), call.streamed);
    } catch (err) {
      return { ...none, error: `the answer could not be read: ${err instanceof Error ? err.message : String(err)}` };
    }
  }

  private async record(call: Call, answer: ResponseFacts, costUsd: number | null): Promise<void> {
    let data: EventData<'LlmCallRecorded'> | undefined;
    try {
      const [request, response] = await Promise.all([
        this.options.storeBlob(call.body),
        call.sentBytes > 0 ? this.options.storeBlob(Buffer.concat(call.sent)) : Promise.resolve(undefined),
      ]);
      data = this.recordOf(call, answer, costUsd, request, response);
    } catch (err) {
      this.options.onError?.(err);
    }
    call.deliver(data);
  }

  private recordOf(call: Call, answer: ResponseFacts, costUsd: number | null, request: BlobRef, response: BlobRef | undefined): EventData<'LlmCallRecorded'> {
    const { facts } = call;
    const error = errorOf(call, answer);
    return {
      callId: call.id,
      provider: call.codec.provider,
      api: call.route.api,
      modelRequested: cutOrNull(facts.model ?? call.route.model ?? null, CUT.model),
      modelAnswered: cutOrNull(answer.model, CUT.model),
      stream: facts.stream || call.route.streamByPath === true,
      status: call.status ?? CLIENT_CLOSED_STATUS,
      outcome: call.outcome!,
      ...(error ? { error: cut(error, CUT.error) } : {}),
      stopReason: cutOrNull(answer.stopReason, CUT.stopReason),
      usage: answer.usage,
      costUsd,
      priceTable: this.prices.version,
      latencyMs: round3(call.latencyMs),
      ttftMs: call.ttftMs === null ? null : round3(call.ttftMs),
      messages: Math.max(0, Math.floor(facts.messages) || 0),
      ...(facts.userText !== undefined ? { userText: cut(facts.userText, CUT.text) } : {}),
      toolResults: facts.toolResults.slice(0, CUT.items).map((r) => ({
        ...(r.id !== undefined ? { id: cut(r.id, CUT.name) } : {}),
        ...(r.name !== undefined ? { name: cut(r.name, CUT.name) } : {}),
        output: cut(r.output, CUT.text),
        ...(r.isError !== undefined ? { isError: r.isError } : {}),
      })),
      outputText: cutOrNull(answer.text, CUT.output),
      toolCalls: answer.toolCalls.slice(0, CUT.items).map((c) => ({
        ...(c.id !== undefined ? { id: cut(c.id, CUT.name) } : {}),
        name: cut(c.name || '?', CUT.name),
        input: cut(c.input, CUT.text),
      })),
      request: blobRef(request),
      ...(response ? { response: blobRef(response) } : {}),
      startedAt: call.startedAt.toISOString(),
      observedAt: this.clock().toISOString(),
    };
  }

  /** Last resort for a handler that threw: the agent gets a 500, the harness hears of it. */
  private failed(err: unknown, res: ServerResponse): void {
    this.options.onError?.(err);
    for (const call of this.inflight) if (call.res === res) this.finish(call, 'upstream_error', `gateway error: ${err instanceof Error ? err.message : String(err)}`);
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { type: 'gateway_error', message: 'the LLM gateway failed on this request' } }));
  }
}

// ── helpers ──────────────────────────────────────────────────────────────────────────────────────


/** Not forwarded: hop-by-hop headers, the agent's view of the host and length, and encodings the gateway could not read. */
const DROPPED_REQUEST_HEADERS = new Set(['connection', 'keep-alive', 'proxy-authorization', 'proxy-authenticate', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'content-length', 'accept-encoding', 'expect']);
const DROPPED_RESPONSE_HEADERS = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

function targetOf(upstream: { url: string; key: string }): UpstreamTarget {
  const base = new URL(upstream.url);
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new Error(`LLM upstream ${upstream.url}: not an http(s) URL`);
  return {
    secure: base.protocol === 'https:',
    hostname: base.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: base.port || undefined,
    basePath: base.pathname.replace(/\/+$/, ''),
    key: upstream.key,
  };
}

function responseHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !DROPPED_RESPONSE_HEADERS.has(name)) out[name] = value;
  return out;
}

/** Keeps a copy of what the agent gets, up to the cap. */
function keep(call: Call, chunk: Buffer): void {
  const room = MAX_BODY_BYTES - call.sentBytes;
  if (chunk.length > room) call.truncated = true;
  if (room <= 0) return;
  const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
  call.sent.push(part);
  call.sentBytes += part.length;
}

function requestFactsOf(call: Call): RequestFacts {
  const fallback = call.facts;
  try {
    const body: unknown = call.body.length > 0 ? JSON.parse(call.body.toString('utf8')) : undefined;
    return call.codec.requestFacts(call.route, body);
  } catch {
    return fallback;
  }
}

function errorOf(call: Call, answer: ResponseFacts): string | undefined {
  const truncated = call.truncated ? `the recorded response is cut at ${MAX_BODY_BYTES} bytes` : undefined;
  let error = call.error;
  if (call.outcome === 'upstream_error' && !error) error = answer.error ?? `the upstream answered ${call.status}`;
  return [error, truncated].filter(Boolean).join('; ') || undefined;
}

function notFound(res: ServerResponse, codec: ProviderCodec | undefined, path: string): void {
  const message = codec ? `the LLM gateway does not serve ${path}` : `no provider at ${path}: the LLM gateway serves /anthropic, /openai and /gemini`;
  const body = JSON.stringify(codec ? codec.errorBody('not_found', 404, message) : { error: { type: 'not_found', message } });
  res.writeHead(404, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function blobRef(ref: BlobRef): BlobRef {
  return { sha256: ref.sha256, size: ref.size, key: ref.key };
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

function cutOrNull(text: string | null | undefined, max: number): string | null {
  return text === null || text === undefined ? null : cut(text, max);
}

const round = (usd: number) => Math.round(usd * 1e10) / 1e10;
const round3 = (ms: number) => Math.round(ms * 1000) / 1000;
