import { createHash, timingSafeEqual } from 'node:crypto';
import http, { type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { EventData } from '../ledger/events/catalog.js';
import { causeOf, ToolCallIndex } from '../ledger/events/causation.js';
import PQueue from 'p-queue';
import { listenUnix, type SocketOwner } from '../sandbox/unix-socket.js';
import { SpendGate, roundUsd, type Reservation, type SpendLimit } from './budget.js';
import { costOf, priceTable, worstCostOf } from './prices.js';
import type { UpstreamEndpoints } from './upstreams.js';
import { emptyResponseFacts, type ApiRoute, type GatewayErrorKind, type Provider, type ProviderCodec, type RequestFacts, type ResponseFacts, type Usage } from './protocol.js';
import { modelNameProblem, requestTarget } from './request-checks.js';
import { BodyStore, type StoredBody } from './body-store.js';

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
  upstreams: UpstreamEndpoints;
  /** Default: every provider's codec (upstreams.ts `defaultCodecs`). */
  codecs?: ProviderCodec[];
  /**
   * The run's spend limits. A billable call holds a reservation from its admission to its end: its
   * body's size in bytes (a byte-level tokenizer makes at most one token of a byte) plus the output
   * maximum it asks for, or `defaultReserveTokens` when it asks for none (default: the environment's
   * A2RL_LLM_DEFAULT_RESERVE_TOKENS, else DEFAULT_RESERVE_TOKENS). See budget.ts.
   */
  limits?: { maxTokens?: number | null; maxCostUsd?: number | null; defaultReserveTokens?: number };
  /** What the run's earlier segments spent (a resumed run, docs/resume.md): counted against the limits from the start. */
  spentBefore?: { tokens: number; costUsd: number };
  record: (data: EventData<'LlmCallRecorded'>) => Promise<unknown>;
  /** The run's redacting artifact store. */
  storeBlob: (body: Buffer) => Promise<{ sha256: string; size: number; key: string }>;
  /** Whether `storeBlob` would store these bytes redacted: such a body is stored whole, never as pieces (body-store.ts). */
  wouldRedact?: (body: Buffer) => boolean;
  /** Called once per limit, when the run's calls first reach it: the spend, the limit, the call (callId) whose spend reached it. */
  onLimit?: (limit: SpendLimit, value: number, max: number, callId: string) => void;
  clock?: () => Date;
  /**
   * No byte from the upstream for this long: 504 in the provider's shape, outcome upstream_timeout.
   * Default 600000. Counted only while the gateway waits for the upstream (see `countSilence`).
   */
  upstreamTimeoutMs?: number;
  onError?: (err: unknown) => void;
}

export interface LlmGateway {
  /** The base URL when listening on a port (a Unix socket has none). */
  url?: string;
  /** Calls recorded, their tokens (input + output + cache read + cache write) and cost (null when a call's model has no price). */
  totals(): { calls: number; tokens: number; costUsd: number | null };
  /** Billable calls now in flight and the tokens they hold; calls waiting for room under the limits; calls in flight whose agent hung up. */
  pending(): { inFlight: number; heldTokens: number; waiting: number; agentGone: number };
  /** Stops accepting, aborts the calls in flight (recorded gateway_closed) and resolves once every record is written. */
  close(): Promise<void>;
}

/** Request bodies and the kept copy of each response are capped at this size. */
export const MAX_BODY_BYTES = 32 * 1024 * 1024;
const DEFAULT_UPSTREAM_TIMEOUT_MS = 600_000;
/** The upstream's silence is counted in steps of a tenth of the timeout, at most a second. */
const silenceStep = (timeoutMs: number) => Math.max(1, Math.min(1000, Math.floor(timeoutMs / 10)));
const MIN_TOKEN_LENGTH = 16;
/** What `status` says when the agent got no answer (it hung up first): nginx's "client closed request". */
const CLIENT_CLOSED_STATUS = 499;
const CUT = { text: 2000, output: 4000, name: 300, error: 1000, stopReason: 100, model: 300, items: 100 };
/** Output tokens a call that sets no maximum reserves (A2RL_LLM_DEFAULT_RESERVE_TOKENS overrides it). */
export const DEFAULT_RESERVE_TOKENS = 32_768;

export async function startLlmGateway(options: LlmGatewayOptions): Promise<LlmGateway> {
  // The token is also scrubbed from every forwarded header and parameter, so it must be unguessable and long.
  if (options.token.length < MIN_TOKEN_LENGTH) throw new Error(`the LLM gateway token must have at least ${MIN_TOKEN_LENGTH} characters`);
  const upstreams = await import('./upstreams.js');
  const codecs = options.codecs ?? upstreams.defaultCodecs();
  const defaultReserveTokens = options.limits?.defaultReserveTokens ?? upstreams.reserveFromEnv(process.env) ?? DEFAULT_RESERVE_TOKENS;
  const gateway = new Gateway({ ...options, limits: { ...options.limits, defaultReserveTokens } }, codecs);
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

/** What a billable call holds while in flight: its reservation and the input and output it is made of. */
interface Hold extends Reservation {
  inputTokens: number;
  outputTokens: number;
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
  /** The upstream's status (null before its answer). */
  status: number | null;
  /** The status the agent got (null: it got none, having hung up first). */
  agentStatus: number | null;
  ttftMs: number | null;
  latencyMs: number;
  /** The copy of the answer: what the agent got, and after it hung up the rest the upstream sent (capped). */
  sent: Buffer[];
  sentBytes: number;
  /** The agent closed its connection before the answer ended; the upstream's answer is still read to its end. */
  agentGone: boolean;
  /** Bytes of the answer written to the agent's connection. */
  deliveredBytes: number;
  /** The upstream's answer ended normally (its whole body was read). */
  upstreamComplete: boolean;
  /** The upstream's answer, while it is paused for an agent that reads slowly. */
  paused?: IncomingMessage;
  /** The reservation the call holds once admitted (billable calls under limits). */
  hold?: Hold;
  /** Takes the call out of the limits' queue while it waits. */
  cancelWait?: () => void;
  /** `facts` were read from the body (before forwarding); otherwise they are read when the call ends. */
  factsRead?: boolean;
  truncated: boolean;
  /** The body came from the gateway (a refusal or an error it made), not from the upstream. */
  ownBody: boolean;
  streamed: boolean;
  upstream?: http.ClientRequest;
  retried?: boolean;
  /** Counts the upstream's silence from the request on (see `countSilence`). */
  silence?: { timer: NodeJS.Timeout; silentMs: number; lastCount: number };
  /** A byte came from the upstream, or a wait that is not silence ended, since the silence was last counted. */
  heard?: boolean;
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
  /** The tool calls of the calls recorded so far: what a later call's tool results answer. */
  private readonly toolCalls = new ToolCallIndex();
  private arrivals = 0;
  /** Records are appended in callId order: each call takes its place at arrival and is written when it ends. */
  private readonly records = new PQueue({ concurrency: 1 });
  private closing?: Promise<void>;
  private calls = 0;
  private readonly gate: SpendGate;
  private readonly defaultReserveTokens: number;
  private readonly limitsNoted = new Set<string>();
  /** Bodies stored as pieces, each once per run (request-pieces.ts). */
  private readonly bodies: BodyStore;
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
    this.gate = new SpendGate(options.limits, options.spentBefore);
    this.bodies = new BodyStore({ storeBlob: options.storeBlob, wouldRedact: options.wouldRedact });
    this.defaultReserveTokens = options.limits?.defaultReserveTokens ?? DEFAULT_RESERVE_TOKENS;
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
    const { tokens, costUsd, unpriced } = this.gate.spent;
    return { calls: this.calls, tokens, costUsd: unpriced > 0 ? null : round(costUsd) };
  }

  pending(): { inFlight: number; heldTokens: number; waiting: number; agentGone: number } {
    const calls = [...this.inflight];
    return { inFlight: this.gate.held.calls, heldTokens: this.gate.held.tokens, waiting: calls.filter((c) => c.cancelWait).length, agentGone: calls.filter((c) => c.agentGone).length };
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
    // The target as sent, not as a URL parser would normalise it: what is checked is what goes upstream.
    const target = requestTarget(req.url ?? '/', (provider) => this.codecs.get(provider)?.queryParameters);
    const codec = typeof target === 'string' ? this.codecs.get(/^\/([^/?#]*)/.exec(req.url ?? '')?.[1] ?? '') : this.codecs.get(target.provider);
    if (typeof target === 'string') return badRequest(res, codec, target);
    const route = codec?.route(req.method ?? 'GET', target.path) ?? null;
    if (!codec || !route) return notFound(res, codec, `/${target.provider}${target.path}`);
    const pathModel = route.model === undefined ? null : modelNameProblem(route.model, 'path');
    if (pathModel) return badRequest(res, codec, pathModel);

    const call = this.open(codec, route, target.path, target.query, req, res);
    if (this.closing) return this.answer(call, 503, 'upstream', 'gateway_closed', 'the LLM gateway is closing', { connection: 'close' });
    if (!(await this.readBody(call))) return;
    if (!this.authorized(codec.credential(req.headers, target.query))) return this.answer(call, 401, 'auth', 'refused', 'missing or invalid gateway token');
    const upstream = this.upstreams.get(codec.provider);
    if (!upstream) return this.answer(call, 503, 'upstream', 'upstream_unreachable', `no upstream is configured for ${codec.provider} (A2RL_LLM_${codec.provider.toUpperCase()}_KEY)`);
    call.facts = requestFactsOf(call);
    call.factsRead = true;
    const bodyModel = call.facts.model !== null && call.facts.model !== route.model ? modelNameProblem(call.facts.model, 'body') : null;
    if (bodyModel) {
      call.facts.model = null; // the name stays in the request blob only
      return this.answer(call, 400, 'bad_request', 'refused', bodyModel);
    }
    if (route.billable && !(await this.admitted(call))) return;
    this.forward(call, upstream);
  }

  /**
   * Waits for room under the run's limits (budget.ts) and holds the call's reservation; false when
   * the call ended meanwhile (the agent hung up, the gateway closed) or was refused (429).
   */
  private async admitted(call: Call): Promise<boolean> {
    const hold = this.reservationOf(call);
    const { admission, cancel } = this.gate.admit(hold);
    call.cancelWait = cancel;
    const decided = await admission;
    call.cancelWait = undefined;
    if (decided === null) return false;
    if (call.outcome) {
      if (decided.go) this.gate.settle(hold, { tokens: 0, costUsd: 0 });
      return false;
    }
    if (decided.go) {
      call.hold = hold;
      return true;
    }
    this.noteLimit(decided.limit, decided.value, decided.max, call.id);
    this.answer(call, 429, 'limit', 'limit_exceeded', limitMessage(decided.limit, decided.value, decided.max));
    return false;
  }

  /** The most the call may spend: its body's bytes as input, its output maximum (or the default), and their cost. */
  private reservationOf(call: Call): Hold {
    const inputTokens = call.body.length;
    const outputTokens = call.facts.maxOutputTokens ?? this.defaultReserveTokens;
    const usage = { inputTokens, outputTokens, cacheReadTokens: null, cacheWriteTokens: null };
    return { inputTokens, outputTokens, tokens: inputTokens + outputTokens, costUsd: worstCostOf(call.facts.model ?? call.route.model, usage, this.prices) };
  }

  /** Registers a routed request: its callId, its place in the record order, its client's hang-up. */
  private open(codec: ProviderCodec, route: ApiRoute, path: string, query: URLSearchParams, req: IncomingMessage, res: ServerResponse): Call {
    let deliver!: Call['deliver'];
    const ready = new Promise<EventData<'LlmCallRecorded'> | undefined>((resolve) => (deliver = resolve));
    void this.records.add(async () => {
      const data = await ready;
      if (data) await this.recordLinked(data);
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
      agentStatus: null,
      ttftMs: null,
      latencyMs: 0,
      sent: [],
      sentBytes: 0,
      agentGone: false,
      deliveredBytes: 0,
      upstreamComplete: false,
      truncated: false,
      ownBody: false,
      streamed: false,
      deliver,
    };
    this.inflight.add(call);
    res.on('close', () => {
      if (call.outcome || res.writableFinished) return;
      this.agentHungUp(call);
    });
    return call;
  }

  /**
   * The agent closed its connection first. A call not yet sent ends here; a call sent upstream is
   * read to the end of its answer (the provider bills it whole), and recorded with the usage it reports.
   */
  private agentHungUp(call: Call): void {
    call.agentGone = true;
    if (!call.upstream) {
      call.cancelWait?.();
      return this.finish(call, 'client_aborted', 'the agent closed the connection before the call was sent upstream');
    }
    const paused = call.paused;
    call.paused = undefined;
    if (paused) {
      paused.resume();
      call.heard = true;
    }
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

  /**
   * Records a call naming the earlier call whose tool call it answers (its first tool result with a
   * known id), and notes its own tool calls for the calls to come. Calls are recorded in arrival order,
   * one at a time, so every earlier call is noted by then.
   */
  private async recordLinked(data: EventData<'LlmCallRecorded'>): Promise<void> {
    const answered = this.toolCalls.answered(data);
    const stored = await this.options.record(answered ? { ...data, causedBy: answered } : data).catch((err: unknown) => this.options.onError?.(err));
    const self = causeOf(stored);
    if (self) this.toolCalls.noteCalls(self, data.toolCalls);
  }

  /** Tells `onLimit`, once per limit, that the run's calls have reached it. */
  private noteLimits(callId: string): void {
    const { maxTokens, maxCostUsd } = this.options.limits ?? {};
    const { tokens, costUsd } = this.gate.spent;
    if (maxTokens != null && tokens >= maxTokens) this.noteLimit('llmTokens', tokens, maxTokens, callId);
    if (maxCostUsd != null && costUsd >= maxCostUsd) this.noteLimit('llmCostUsd', roundUsd(costUsd), maxCostUsd, callId);
  }

  private noteLimit(limit: SpendLimit, value: number, max: number, callId: string): void {
    if (this.limitsNoted.has(limit)) return;
    this.limitsNoted.add(limit);
    try {
      this.options.onLimit?.(limit, value, max, callId);
    } catch (err) {
      this.options.onError?.(err);
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
    this.watchSilence(call);
    request.end(call.body.length > 0 ? call.body : undefined);
  }

  /**
   * The headers the upstream gets: of the agent's, only those the protocol needs (FORWARDED_HEADERS and
   * the codec's own: never an organisation, project, billing, cookie or forwarding header), then the
   * harness's key; the agent's token nowhere.
   */
  private upstreamHeaders(call: Call, query: URLSearchParams, key: string): Record<string, string> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(call.req.headers)) {
      if (value === undefined || !(FORWARDED_HEADERS.includes(name) || call.codec.forwardedHeaders.includes(name))) continue;
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

  /** Passes the upstream's answer on chunk by chunk, keeping a capped copy; reads it to its end even once the agent is gone. */
  private relay(call: Call, upstream: IncomingMessage): void {
    if (call.outcome) return void upstream.destroy();
    const { res } = call;
    call.status = upstream.statusCode ?? 502;
    call.streamed = /^text\/event-stream/i.test(String(upstream.headers['content-type'] ?? ''));
    call.heard = true;
    if (!call.agentGone) {
      res.writeHead(call.status, responseHeaders(upstream.headers));
      res.flushHeaders();
      call.agentStatus = call.status;
    }
    upstream.on('data', (chunk: Buffer) => {
      if (call.outcome) return;
      call.heard = true;
      call.ttftMs ??= performance.now() - call.t0;
      keep(call, chunk);
      if (call.agentGone) return;
      call.deliveredBytes += chunk.length;
      if (res.write(chunk)) return;
      // The agent reads slower than the upstream sends: stop reading the upstream until it catches up
      // (countSilence counts none of that wait).
      upstream.pause();
      call.paused = upstream;
      res.once('drain', () => {
        if (call.paused !== upstream) return; // the agent hung up meanwhile: agentHungUp resumed it
        call.paused = undefined;
        upstream.resume();
        call.heard = true;
      });
    });
    upstream.on('end', () => {
      if (call.outcome) return;
      call.upstreamComplete = true;
      if (call.agentGone) return this.finish(call, 'client_aborted', `the agent closed the connection before the answer ended; the upstream's answer (${call.status}) was read to its end`);
      res.end();
      const ok = call.status! >= 200 && call.status! < 300;
      this.finish(call, ok ? 'ok' : 'upstream_error');
    });
    upstream.on('close', () => {
      if (call.outcome || upstream.complete) return;
      if (call.agentGone) return this.finish(call, 'client_aborted', 'the agent closed the connection before the answer ended; then the upstream connection broke before it ended');
      this.finish(call, 'upstream_error', 'the upstream connection broke before the answer ended');
      res.destroy();
    });
    upstream.on('error', () => undefined); // 'close' above reports it
  }

  private upstreamFailed(call: Call, err: NodeJS.ErrnoException, upstream: UpstreamTarget): void {
    if (call.outcome) return;
    if (call.agentGone) return this.finish(call, 'client_aborted', `the agent closed the connection before the answer; then the upstream connection failed: ${err.message}`);
    // A kept-alive connection the upstream closed just as it was reused: once more on a fresh one.
    if (call.upstream?.reusedSocket && err.code === 'ECONNRESET' && !call.res.headersSent && !call.retried) {
      call.retried = true;
      return this.forward(call, upstream);
    }
    if (!call.res.headersSent) return this.answer(call, 502, 'upstream', 'upstream_unreachable', `the upstream could not be reached: ${err.message}`);
    this.finish(call, 'upstream_error', `the upstream connection failed: ${err.message}`);
    call.res.destroy();
  }

  /** Starts counting the upstream's silence for a call sent upstream (once: a retry keeps counting). */
  private watchSilence(call: Call): void {
    call.heard = true;
    if (call.silence) return;
    const step = silenceStep(this.timeoutMs);
    call.silence = { timer: setInterval(() => this.countSilence(call, step), step), silentMs: 0, lastCount: performance.now() };
  }

  /**
   * Each step, adds the time the gateway waited for the upstream's next byte; at the timeout the call
   * ends. Not silence: a wait for an agent that reads slowly (the upstream is paused; the count starts
   * afresh once it is read again), nor a stall of the gateway's own process (a busy machine, a long
   * task) while the upstream's bytes wait unread in the socket: a late step counts at most two steps,
   * and those bytes are read before the next one. A silent upstream ends at most one step after the
   * timeout; later in wall time only while the process is starved.
   */
  private countSilence(call: Call, step: number): void {
    const silence = call.silence!;
    const now = performance.now();
    const waited = Math.min(now - silence.lastCount, 2 * step);
    silence.lastCount = now;
    if (call.heard || call.paused) {
      call.heard = false;
      silence.silentMs = 0;
      return;
    }
    silence.silentMs += waited;
    if (silence.silentMs >= this.timeoutMs) this.timedOut(call);
  }

  private timedOut(call: Call): void {
    if (call.outcome) return;
    const message = `no byte from the upstream for ${this.timeoutMs} ms`;
    if (call.agentGone) this.finish(call, 'client_aborted', `the agent closed the connection before the answer ended; then ${message}`);
    else if (!call.res.headersSent) this.answer(call, 504, 'timeout', 'upstream_timeout', message);
    else {
      this.finish(call, 'upstream_timeout', message);
      call.res.destroy();
    }
    call.upstream?.destroy();
  }

  private abortForClose(call: Call): void {
    if (call.outcome) return;
    call.cancelWait?.();
    if (call.agentGone) this.finish(call, 'client_aborted', 'the agent closed the connection before the answer ended; then the LLM gateway closed before it ended');
    else if (!call.res.headersSent) this.answer(call, 503, 'upstream', 'gateway_closed', 'the LLM gateway closed', { connection: 'close' });
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
    call.agentStatus = call.agentGone ? call.agentStatus : status;
    call.deliveredBytes += body.length;
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
    clearInterval(call.silence?.timer);
    this.inflight.delete(call);
    if (!call.factsRead) call.facts = requestFactsOf(call); // read off the critical path when nothing before forwarding needed it
    const answer = this.responseFactsOf(call);
    const spent = this.spentBy(call, answer);
    answer.usage = spent.usage;
    const costUsd = call.route.billable ? costOf(answer.model ?? call.facts.model, answer.usage, this.prices) : 0;
    this.account(call, answer.usage, costUsd);
    void this.record(call, answer, spent.source);
  }

  /**
   * The usage a call is recorded and counted with. A billable call that reached the upstream is billed
   * whatever the agent got: with the usage the provider reported in a complete answer ('provider'), else
   * (no answer, an answer cut before its final usage, or none reported) with the worst case its
   * reservation allows ('estimated'). A complete error answer is the provider's (billed nothing).
   */
  private spentBy(call: Call, answer: ResponseFacts): { usage: Usage; source?: 'provider' | 'estimated' } {
    const reached = call.upstream !== undefined && call.route.billable && call.outcome !== 'upstream_unreachable';
    if (!reached) return { usage: answer.usage };
    const known = [answer.usage.inputTokens, answer.usage.outputTokens].some((n) => n !== null);
    const final = answer.usageFinal ?? known;
    const errorAnswer = call.upstreamComplete && !(call.status! >= 200 && call.status! < 300);
    if ((call.upstreamComplete && final) || errorAnswer) return { usage: answer.usage, source: 'provider' };
    return { usage: worstCase(answer.usage, call.hold ?? this.reservationOf(call)), source: 'estimated' };
  }

  private account(call: Call, usage: Usage, costUsd: number | null): void {
    this.calls += 1;
    const spent = { tokens: call.route.billable ? tokensOf(usage) : 0, costUsd: call.route.billable ? costUsd : 0 };
    if (call.hold) this.gate.settle(call.hold, spent);
    else this.gate.spend(spent);
    this.noteLimits(call.id);
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

  private async record(call: Call, answer: ResponseFacts, usageSource: 'provider' | 'estimated' | undefined): Promise<void> {
    let data: EventData<'LlmCallRecorded'> | undefined;
    try {
      const [request, response] = await Promise.all([
        this.bodies.store(call.body, call.route.api, 'request', call.t0),
        call.sentBytes > 0 ? this.bodies.store(Buffer.concat(call.sent), call.route.api, 'response') : Promise.resolve(undefined),
      ]);
      data = this.recordOf(call, answer, usageSource, request, response);
      this.bodies.adopt(request);
    } catch (err) {
      this.options.onError?.(err);
    }
    call.deliver(data);
  }

  private recordOf(
    call: Call,
    answer: ResponseFacts,
    usageSource: 'provider' | 'estimated' | undefined,
    request: StoredBody,
    response: StoredBody | undefined,
  ): EventData<'LlmCallRecorded'> {
    const { facts } = call;
    const error = errorOf(call, answer);
    return {
      callId: call.id,
      provider: call.codec.provider,
      api: call.route.api,
      modelRequested: cutOrNull(facts.model ?? call.route.model ?? null, CUT.model),
      modelAnswered: cutOrNull(answer.model, CUT.model),
      stream: facts.stream || call.route.streamByPath === true,
      status: call.agentStatus ?? CLIENT_CLOSED_STATUS,
      outcome: call.outcome!,
      ...(error ? { error: cut(error, CUT.error) } : {}),
      stopReason: cutOrNull(answer.stopReason, CUT.stopReason),
      usage: answer.usage,
      ...(usageSource ? { usageSource } : {}),
      ...(call.hold ? { reservedTokens: call.hold.tokens } : {}),
      ...(call.agentGone ? { deliveredBytes: call.deliveredBytes } : {}),
      // The cost is not written: readers price `usage` with this table (projections/run-analysis/derived.ts).
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
      ...('whole' in request ? { request: blobRef(request.whole) } : { requestPieces: request.pieces }),
      ...(response ? ('whole' in response ? { response: blobRef(response.whole) } : { responsePieces: response.pieces }) : {}),
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


/** The agent's headers every protocol forwards; each codec adds its own (ProviderCodec.forwardedHeaders). */
const FORWARDED_HEADERS: readonly string[] = ['content-type', 'accept', 'user-agent'];
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

function limitMessage(limit: SpendLimit, value: number, max: number): string {
  return limit === 'llmTokens'
    ? `LLM token limit reached: ${value} of ${max} tokens used (--max-llm-tokens)`
    : `LLM cost limit reached: $${value} of $${max} spent (--max-llm-cost)`;
}

const tokensOf = (usage: Usage) => (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0) + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0);

/**
 * The most a call without the provider's final usage can have been billed: its reservation's input
 * (less the cached part the answer reported) and output, or what the answer reported where that is more.
 */
function worstCase(usage: Usage, hold: Hold): Usage {
  const cached = (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0);
  return {
    inputTokens: Math.max(usage.inputTokens ?? 0, hold.inputTokens - cached),
    outputTokens: Math.max(usage.outputTokens ?? 0, hold.outputTokens),
    cacheReadTokens: usage.cacheReadTokens,
    cacheWriteTokens: usage.cacheWriteTokens,
  };
}

/** A request the gateway will not forward as sent (its target or model name): 400, not recorded, as it is no model call. */
function badRequest(res: ServerResponse, codec: ProviderCodec | undefined, message: string): void {
  const body = JSON.stringify(codec ? codec.errorBody('bad_request', 400, message) : { error: { type: 'invalid_request_error', message } });
  res.writeHead(400, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
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
