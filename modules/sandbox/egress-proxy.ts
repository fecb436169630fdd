import { lookup as dnsLookup } from 'node:dns/promises';
import { request as httpRequest, createServer, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { BlockList, connect as netConnect, isIP, SocketAddress, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import pTimeout from 'p-timeout';
import type { EventData } from '../ledger/events/catalog.js';

// The agent's only way to the internet: an allowlisting HTTP(S) proxy run by the harness. It speaks
// CONNECT (HTTPS tunnels) and absolute-form plain HTTP, connects only to hosts the run's `--allow-net`
// names, never to loopback, private, link-local or other non-public addresses (unless the allowlist
// names that very IP), and records every decision as an EgressConnection fact. The agent is hostile:
// nothing it sends may crash the harness, and nothing it sends may reach a host service.

export type EgressRecord = EventData<'EgressConnection'>;

export interface EgressProxyOptions {
  /** A Unix socket (bind-mounted into the sandbox, reached through a forwarder) or a TCP port. */
  listen: { path: string; writableAll?: boolean } | { port: number; host?: string };
  /** Allowlist entries as `parseAllowlist` returns them (`host`, `host:port`, `*.domain`, IPs). */
  allow: string[];
  record: (data: EgressRecord) => Promise<unknown> | void;
  clock?: () => Date;
  /** Test seam: opens the upstream TCP connection to an address the proxy already checked. */
  connect?: (host: string, port: number) => Socket;
  /** Test seam for DNS: every address `host` resolves to. */
  lookup?: (host: string) => Promise<string[]>;
  /** Called when recording an event fails (the proxy keeps serving). */
  onError?: (error: unknown) => void;
  maxConnections?: number;
  maxHeaderBytes?: number;
  /** A tunnel or request with no bytes either way for this long is closed. */
  idleTimeoutMs?: number;
  /** How long a DNS lookup may take before the request fails with 502. */
  lookupTimeoutMs?: number;
}

export interface EgressProxy {
  /** The socket path, or the TCP port actually bound. */
  address: string | number;
  /** Stops accepting, closes every tunnel and request, and waits for their events to be recorded. */
  close(): Promise<void>;
}

const DEFAULT_PORTS = [80, 443];
const PREFIX = 'a2rl egress proxy:';
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

// ---------------------------------------------------------------------------------------------
// Allowlist

type Rule =
  | { kind: 'host'; host: string; ports: number[]; text: string }
  | { kind: 'suffix'; domain: string; ports: number[]; text: string }
  | { kind: 'ip'; ip: string; ports: number[]; text: string };

/**
 * Validates an `--allow-net` value (comma-separated) and returns its entries normalized (lower case,
 * trailing dot dropped, IPv6 in canonical form, duplicates removed). An entry is `host` (ports 80 and
 * 443), `host:port`, `*.domain` (any subdomain of domain, not domain itself; `*.domain:port` too), or an
 * IP literal (`10.0.0.5`, `[fd00::1]:8080`). Throws an Error naming the bad entry and why.
 */
export function parseAllowlist(spec: string): string[] {
  const entries = spec.split(',').map((s) => s.trim()).filter((s) => s !== '');
  return [...new Set(entries.map((entry) => parseRule(entry).text))];
}

function parseRule(entry: string): Rule {
  const bad = (why: string) => new Error(`--allow-net: "${entry}" ${why}`);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(entry)) throw bad('is a URL; give the host name only (e.g. pypi.org or pypi.org:443)');
  if (/[^\x21-\x7e]/.test(entry)) throw bad('has spaces or non-ASCII characters; write international names in their xn-- form');
  if (/[%@/?#\\]/.test(entry)) throw bad('may only contain a host name or IP, an optional :port and a leading *.');
  const split = splitHostPort(entry);
  if (!split) throw bad('is not host, host:port, *.domain or an IP address');
  const ports = split.port === undefined ? DEFAULT_PORTS : [parsePort(split.port, bad)];
  const portText = split.port === undefined ? '' : `:${ports[0]}`;
  const name = normalizeName(split.host);

  const ip = canonicalIp(name);
  if (ip) return { kind: 'ip', ip, ports, text: `${ip.includes(':') ? `[${ip}]` : ip}${portText}` };
  if (split.bracketed) throw bad('has brackets around something that is not an IPv6 address');
  if (name === '*' || name === '') throw bad('would allow every host; name the hosts the agent needs');
  if (name.startsWith('*.')) {
    const domain = name.slice(2);
    if (!isHostname(domain)) throw bad(`has an invalid domain after "*.": ${domainProblem(domain)}`);
    if (!domain.includes('.')) throw bad('is too broad: "*." must be followed by a domain with at least two labels (e.g. *.example.org)');
    return { kind: 'suffix', domain, ports, text: `*.${domain}${portText}` };
  }
  if (name.includes('*')) throw bad('may only use * as a whole first label ("*.example.org")');
  if (!isHostname(name)) throw bad(`is not a valid host name: ${domainProblem(name)}`);
  return { kind: 'host', host: name, ports, text: `${name}${portText}` };
}

function parsePort(text: string, bad: (why: string) => Error): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 1 && port <= 65535)) throw bad(`has an invalid port "${text}" (1-65535)`);
  return port;
}

/** `host`, `host:port`, `[v6]`, `[v6]:port`, or a bare IPv6 (more than one colon, no port). */
function splitHostPort(text: string): { host: string; port?: string; bracketed: boolean } | null {
  const bracket = /^\[([^\]]*)\](?::(.*))?$/.exec(text);
  if (bracket) return { host: bracket[1]!, port: bracket[2], bracketed: true };
  if (text.includes('[') || text.includes(']')) return null;
  const colons = text.split(':').length - 1;
  if (colons > 1) return { host: text, bracketed: false };
  const [host, port] = text.split(':');
  return { host: host!, port, bracketed: false };
}

function normalizeName(host: string): string {
  const lower = host.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** The canonical text of an IPv4 or IPv6 literal, or null for anything else. */
function canonicalIp(text: string): string | null {
  const family = isIP(text);
  if (family === 4) return text;
  if (family === 6 && !text.includes('%')) return new SocketAddress({ address: text, family: 'ipv6' }).address;
  return null;
}

/**
 * An ASCII DNS name in letters, digits and hyphens whose last label is not numeric: that rules out
 * `127.1`, `2130706433` or `0x7f.1`, which resolvers read as IPv4 addresses.
 */
function isHostname(name: string): boolean {
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split('.');
  return labels.every((l) => LABEL.test(l)) && !/^[0-9]+$/.test(labels[labels.length - 1]!) && !/^0x[0-9a-f]*$/.test(labels[labels.length - 1]!);
}

function domainProblem(name: string): string {
  if (name.length > 253) return 'longer than 253 characters';
  if (name.split('.').some((l) => l === '')) return 'empty label';
  const labels = name.split('.');
  if (/^(?:[0-9]+|0x[0-9a-f]*)$/.test(labels[labels.length - 1]!)) return 'numeric last label (an IP address must be written in full, e.g. 10.0.0.5)';
  return 'labels are letters, digits and inner hyphens, at most 63 characters each';
}

function compileAllowlist(allow: string[]): Rule[] {
  return allow.map((entry) => parseRule(entry));
}

// ---------------------------------------------------------------------------------------------
// Addresses the proxy never connects to (unless the allowlist names the IP itself)

const NON_PUBLIC: ReadonlyArray<[string, number, 'ipv4' | 'ipv6', string]> = [
  ['0.0.0.0', 8, 'ipv4', 'unspecified'],
  ['10.0.0.0', 8, 'ipv4', 'private'],
  ['100.64.0.0', 10, 'ipv4', 'shared (carrier-grade NAT)'],
  ['127.0.0.0', 8, 'ipv4', 'loopback'],
  ['169.254.0.0', 16, 'ipv4', 'link-local (cloud metadata)'],
  ['172.16.0.0', 12, 'ipv4', 'private'],
  ['192.0.0.0', 24, 'ipv4', 'IETF protocol'],
  ['192.168.0.0', 16, 'ipv4', 'private'],
  ['198.18.0.0', 15, 'ipv4', 'benchmarking'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved or broadcast'],
  ['::', 128, 'ipv6', 'unspecified'],
  ['::1', 128, 'ipv6', 'loopback'],
  ['::', 96, 'ipv6', 'IPv4-compatible'],
  ['64:ff9b::', 96, 'ipv6', 'NAT64'],
  ['64:ff9b:1::', 48, 'ipv6', 'NAT64'],
  ['100::', 64, 'ipv6', 'discard'],
  ['2002::', 16, 'ipv6', '6to4'],
  ['fc00::', 7, 'ipv6', 'private (unique local)'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local'],
  ['ff00::', 8, 'ipv6', 'multicast'],
];

const NON_PUBLIC_LISTS = NON_PUBLIC.map(([net, prefix, type, kind]) => {
  const list = new BlockList();
  list.addSubnet(net, prefix, type);
  return { list, kind };
});

/** What kind of non-public address `ip` is (IPv4-mapped IPv6 included), or null for a public one. */
export function nonPublicKind(ip: string): string | null {
  const type = isIP(ip) === 6 ? 'ipv6' : 'ipv4';
  for (const { list, kind } of NON_PUBLIC_LISTS) if (list.check(ip, type)) return kind;
  return null;
}

// ---------------------------------------------------------------------------------------------
// Decisions

type Target = { host: string; port: number; ip: string | null };
type Verdict = { ok: true; rule: Rule } | { ok: false; status: number; reason: string; message: string };

/** Parses `host:port` / `[v6]:port` (port required for CONNECT, default 80 for http). */
function parseAuthority(authority: string, defaultPort?: number): Target | null {
  const split = splitHostPort(authority);
  if (!split || (split.port === undefined && defaultPort === undefined)) return null;
  if (!split.bracketed && split.port === undefined && authority.includes(':')) return null; // bare IPv6 is not an authority
  const port = split.port === undefined ? defaultPort! : /^\d{1,5}$/.test(split.port) ? Number(split.port) : NaN;
  if (!(port >= 1 && port <= 65535) || split.host === '') return null;
  const host = normalizeName(split.host);
  const ip = canonicalIp(host);
  if (split.bracketed && (!ip || !ip.includes(':'))) return null;
  return { host: ip ?? host, port, ip };
}

function allowedList(rules: Rule[]): string {
  return rules.length ? `allowed: ${rules.map((r) => r.text).join(', ')}` : 'no host is allowed for this run: start it with --allow-net to allow some';
}

/** The policy decision before any DNS: is host:port on the allowlist, and is the name well formed? */
function judgeName(rules: Rule[], target: Target): Verdict {
  const shown = display(target);
  const refuse = (reason: string, message: string): Verdict => ({ ok: false, status: 403, reason, message: `${PREFIX} ${message}` });
  if (!target.ip && !isHostname(target.host)) {
    return refuse('invalid host name', `${JSON.stringify(target.host.slice(0, 100))} is not a plain ASCII host name (percent-encoded and non-ASCII names are refused; use the xn-- form)`);
  }
  const byName = rules.filter((r) =>
    target.ip ? r.kind === 'ip' && r.ip === target.ip : (r.kind === 'host' && r.host === target.host) || (r.kind === 'suffix' && target.host.endsWith(`.${r.domain}`)),
  );
  if (!byName.length) return refuse('not on the allowlist', `${shown} is not allowed (${allowedList(rules)})`);
  const rule = byName.find((r) => r.ports.includes(target.port));
  if (!rule) {
    const ports = [...new Set(byName.flatMap((r) => r.ports))];
    const on = `${ports.length > 1 ? 'ports' : 'port'} ${ports.join(', ')}`;
    return refuse('port not allowed', `${target.host} is allowed on ${on} only, not ${target.port} (${allowedList(rules)})`);
  }
  return { ok: true, rule };
}

function display(target: Target): string {
  return `${target.ip?.includes(':') ? `[${target.ip}]` : target.host}:${target.port}`;
}

// ---------------------------------------------------------------------------------------------
// The proxy

interface Exchange {
  method: 'CONNECT' | 'HTTP';
  target: Target;
  observedAt: string;
  address?: string;
  bytesOut: number;
  bytesIn: number;
  failure?: string;
  done: boolean;
}

type Decision = { addresses: string[]; observedAt: string } | { status: number; message: string };

/**
 * Starts the proxy. Throws (before listening) if an allowlist entry is invalid. Every socket has an
 * error handler and every failure becomes a one-line plain-text HTTP answer to the agent (400, 403,
 * 431, 502, 503), never an exception in the harness.
 */
export async function startEgressProxy(opts: EgressProxyOptions): Promise<EgressProxy> {
  const rules = compileAllowlist(opts.allow);
  const clock = opts.clock ?? (() => new Date());
  const maxConnections = opts.maxConnections ?? 256;
  const idleMs = opts.idleTimeoutMs ?? 120_000;
  const lookupMs = opts.lookupTimeoutMs ?? 10_000;
  const resolveName = opts.lookup ?? defaultLookup;
  const open = opts.connect ?? ((host: string, port: number) => netConnect({ host, port }));
  const onError = opts.onError ?? (() => undefined);

  const sockets = new Set<Duplex>(); // client connections and upstream sockets, destroyed on close()
  const clients = new Set<Socket>(); // the agent's connections, counted against maxConnections
  const overLimit = new WeakSet<Duplex>(); // connections answered 503: whatever they send is ignored
  const inflight = new Set<Promise<void>>(); // handlers still deciding or connecting
  const openExchanges = new Set<Exchange>(); // allowed exchanges whose event is not emitted yet
  const pending = new Set<Promise<void>>(); // record() calls not settled yet
  let closing = false;
  let stopWaiting: (error: Error) => void = () => undefined;
  const closed = new Promise<never>((_, reject) => (stopWaiting = reject));
  closed.catch(() => undefined);
  const now = () => clock().toISOString();

  /** Records one event; a recorder failure is reported, never thrown into a socket handler. */
  const emit = (data: EgressRecord): void => {
    const done = (async () => {
      try {
        await opts.record(data);
      } catch (error) {
        onError(error);
      }
    })();
    pending.add(done);
    void done.finally(() => pending.delete(done));
  };

  const base = (method: 'CONNECT' | 'HTTP', target: Target) => ({ host: target.host.slice(0, 300), port: target.port, method });

  const recordRefusal = (method: 'CONNECT' | 'HTTP', target: Target, reason: string, address?: string): void => {
    emit({ ...base(method, target), allowed: false, reason, ...(address ? { address } : {}), bytesOut: 0, bytesIn: 0, observedAt: now() });
  };

  /** Allowed by policy but never opened (DNS failed, the client left): closed as soon as decided. */
  const recordFailure = (method: 'CONNECT' | 'HTTP', target: Target, reason: string): void => {
    const at = now();
    emit({ ...base(method, target), allowed: true, reason, bytesOut: 0, bytesIn: 0, observedAt: at, closedAt: at });
  };

  const begin = (method: 'CONNECT' | 'HTTP', target: Target, observedAt: string): Exchange => {
    const x: Exchange = { method, target, observedAt, bytesOut: 0, bytesIn: 0, done: false };
    openExchanges.add(x);
    return x;
  };

  const recordClosed = (x: Exchange): void => {
    if (x.done) return;
    x.done = true;
    openExchanges.delete(x);
    if (closing && !x.failure) x.failure = 'closed by the harness (the proxy stopped)';
    emit({
      ...base(x.method, x.target),
      allowed: true,
      ...(x.failure ? { reason: x.failure.slice(0, 1000) } : {}),
      ...(x.address ? { address: x.address } : {}),
      bytesOut: x.bytesOut,
      bytesIn: x.bytesIn,
      observedAt: x.observedAt,
      closedAt: now(),
    });
  };

  /**
   * The whole decision for one target: the allowlist, then DNS (bounded), then the address check.
   * Answers the addresses to try, or the answer to send (the refusal is already recorded).
   */
  const decide = async (method: 'CONNECT' | 'HTTP', target: Target): Promise<Decision> => {
    const verdict = judgeName(rules, target);
    if (!verdict.ok) {
      recordRefusal(method, target, verdict.reason);
      return verdict;
    }
    // An IP the allowlist names literally: the one case where a non-public address is reachable.
    if (target.ip) return { addresses: [target.ip], observedAt: now() };
    let resolved: string[];
    try {
      resolved = await Promise.race([pTimeout(resolveName(target.host), { milliseconds: lookupMs, message: `DNS lookup timed out after ${lookupMs} ms` }), closed]);
    } catch (error) {
      recordFailure(method, target, `DNS lookup failed: ${errorText(error)}`);
      return { status: 502, message: `${PREFIX} could not resolve ${target.host} (${errorText(error)})` };
    }
    const valid = resolved.map((a) => canonicalIp(a)).filter((a): a is string => a !== null);
    const usable = valid.filter((a) => nonPublicKind(a) === null);
    if (usable.length) return { addresses: usable.slice(0, 4), observedAt: now() };
    const first = valid[0];
    if (!first) {
      recordFailure(method, target, 'DNS lookup found no address');
      return { status: 502, message: `${PREFIX} ${target.host} resolves to no address` };
    }
    const kind = nonPublicKind(first)!;
    recordRefusal(method, target, `resolves only to non-public addresses (${kind})`, first);
    return { status: 403, message: `${PREFIX} ${target.host} resolves to a ${kind} address; the proxy only connects to public addresses` };
  };

  /** Connects to the checked addresses in turn: no second lookup, so the checked IP is the one used. */
  const connectChecked = (addresses: string[], port: number): Promise<{ socket: Socket; address: string }> =>
    new Promise((resolveConnect, reject) => {
      let lastError: unknown = new Error('no address');
      const attempt = (i: number): void => {
        if (closing) return reject(new Error('the proxy is closing'));
        if (i >= addresses.length) return reject(lastError);
        const address = addresses[i]!;
        let socket: Socket;
        try {
          socket = open(address, port);
        } catch (error) {
          lastError = error;
          return attempt(i + 1);
        }
        sockets.add(socket);
        const onFail = (error: Error) => {
          sockets.delete(socket);
          socket.destroy();
          lastError = error;
          attempt(i + 1);
        };
        socket.once('error', onFail);
        socket.once('close', () => onFail(new Error('closed while connecting')));
        socket.setTimeout(idleMs, () => onFail(new Error(`connect timed out after ${idleMs} ms`)));
        socket.once('connect', () => {
          socket.removeAllListeners('error').removeAllListeners('close').removeAllListeners('timeout');
          socket.on('error', () => socket.destroy()); // until the caller attaches its own
          socket.setTimeout(0);
          resolveConnect({ socket, address });
        });
      };
      attempt(0);
    });

  /** Decides, then connects: the upstream socket for an allowed exchange, or null once answered. */
  const openUpstream = async (method: 'CONNECT' | 'HTTP', target: Target, answer: (status: number, message: string) => void): Promise<{ x: Exchange; upstream: Socket } | null> => {
    const decision = await decide(method, target);
    if ('status' in decision) {
      answer(decision.status, decision.message);
      return null;
    }
    const x = begin(method, target, decision.observedAt);
    try {
      const { socket, address } = await connectChecked(decision.addresses, target.port);
      x.address = address;
      return { x, upstream: socket };
    } catch (error) {
      x.failure = `upstream connect failed: ${errorText(error)}`;
      recordClosed(x);
      answer(502, `${PREFIX} could not connect to ${display(target)} (${errorText(error)})`);
      return null;
    }
  };

  // --- CONNECT -------------------------------------------------------------------------------

  const handleConnect = async (req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> => {
    const target = parseAuthority(req.url ?? '');
    if (!target) return answerRaw(client, 400, `${PREFIX} CONNECT needs host:port (got ${JSON.stringify((req.url ?? '').slice(0, 100))})`);
    const opened = await openUpstream('CONNECT', target, (status, message) => answerRaw(client, status, message));
    if (!opened) return;
    const { x, upstream } = opened;
    if (client.destroyed || upstream.destroyed) {
      x.failure = 'closed before the tunnel opened';
      client.destroy();
      upstream.destroy();
      sockets.delete(upstream);
      return recordClosed(x);
    }
    tunnel(client, upstream, head, x);
  };

  /** Pipes both ways, counting bytes, until either side closes or the tunnel goes idle. */
  const tunnel = (client: Duplex, upstream: Socket, head: Buffer, x: Exchange): void => {
    const finish = (why?: string) => {
      if (why && !x.failure) x.failure = why;
      client.destroy();
      upstream.destroy();
    };
    let closedSides = 0;
    const onClose = () => {
      closedSides += 1;
      sockets.delete(upstream);
      if (closedSides === 2) recordClosed(x);
      else finish();
    };
    upstream.on('error', (e) => finish(`upstream error: ${errorText(e)}`));
    client.on('error', () => finish());
    upstream.on('close', onClose);
    client.on('close', onClose);
    upstream.on('data', (chunk: Buffer) => (x.bytesIn += chunk.length));
    client.on('data', (chunk: Buffer) => (x.bytesOut += chunk.length));
    const idle = () => finish(`idle for ${idleMs} ms`);
    upstream.setTimeout(idleMs, idle);
    setSocketTimeout(client, idleMs, idle);

    client.write('HTTP/1.1 200 Connection established\r\n\r\n');
    if (head.length) {
      x.bytesOut += head.length;
      upstream.write(head);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  };

  // --- absolute-form HTTP --------------------------------------------------------------------

  const handleHttp = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = req.url ?? '';
    const form = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)([/?][^#]*)?/i.exec(url);
    if (!form) return answerHttp(res, 400, `${PREFIX} send absolute-form requests (GET http://host/path) or CONNECT host:port; got ${JSON.stringify(url.slice(0, 100))}`);
    const scheme = form[1]!.toLowerCase();
    if (scheme !== 'http') return answerHttp(res, 400, `${PREFIX} only http:// URLs are forwarded; use CONNECT for ${scheme}://`);
    const authority = form[2]!;
    if (/[@%]/.test(authority) || /[^\x21-\x7e]/.test(authority)) {
      // Userinfo and percent-encoded or non-ASCII hosts: refused, never decoded.
      recordRefusal('HTTP', { host: authority, port: 80, ip: null }, 'invalid host name');
      return answerHttp(res, 403, `${PREFIX} ${JSON.stringify(authority.slice(0, 100))} is not a plain host[:port] (userinfo, percent-encoded and non-ASCII hosts are refused)`);
    }
    const target = parseAuthority(authority, 80);
    if (!target) return answerHttp(res, 400, `${PREFIX} invalid host:port in ${JSON.stringify(url.slice(0, 100))}`);
    const path = form[3] === undefined ? '/' : form[3].startsWith('?') ? `/${form[3]}` : form[3];

    const opened = await openUpstream('HTTP', target, (status, message) => answerHttp(res, status, message));
    if (opened) forward(req, res, opened.upstream, path, opened.x);
  };

  /** Sends the request over the checked connection and streams the answer back. */
  const forward = (req: IncomingMessage, res: ServerResponse, upstream: Socket, path: string, x: Exchange): void => {
    const headers = forwardHeaders(req.headers);
    headers.host = x.target.port === 80 ? hostHeader(x.target) : `${hostHeader(x.target)}:${x.target.port}`;
    let upReq: ReturnType<typeof httpRequest> | undefined;
    const fail = (why: string) => {
      if (!x.failure) x.failure = why;
      if (!res.headersSent) answerHttp(res, 502, `${PREFIX} ${display(x.target)} failed: ${why}`);
      else res.destroy();
      upReq?.destroy();
      upstream.destroy();
    };
    res.on('close', () => {
      upReq?.destroy();
      upstream.destroy();
      sockets.delete(upstream);
      if (!res.writableFinished && !x.failure) x.failure = 'closed before the response was complete';
      recordClosed(x);
    });
    if (res.destroyed) return fail('the client went away');
    try {
      upReq = httpRequest({ method: req.method, path, headers, createConnection: () => upstream, setHost: false });
    } catch (error) {
      return fail(`invalid request: ${errorText(error)}`);
    }
    upReq.setTimeout(idleMs, () => fail(`idle for ${idleMs} ms`));
    upReq.on('error', (e) => fail(`upstream error: ${errorText(e)}`));
    upReq.on('response', (upRes) => {
      upRes.on('data', (chunk: Buffer) => (x.bytesIn += chunk.length));
      upRes.on('error', (e) => fail(`upstream error: ${errorText(e)}`));
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, forwardHeaders(upRes.headers));
      upRes.pipe(res);
    });
    req.on('data', (chunk: Buffer) => (x.bytesOut += chunk.length));
    req.on('error', () => fail('the client went away'));
    req.pipe(upReq);
  };

  // --- server --------------------------------------------------------------------------------

  /** Runs a handler so close() can wait for it; any exception becomes an answer, never a crash. */
  const track = (work: Promise<void>, onCrash: (error: unknown) => void): void => {
    const done = work.catch((error) => {
      onError(error);
      onCrash(error);
    });
    inflight.add(done);
    void done.finally(() => inflight.delete(done));
  };

  const server = createServer({ maxHeaderSize: opts.maxHeaderBytes ?? 16 * 1024, requestTimeout: 0, headersTimeout: 30_000, requireHostHeader: false }, (req, res) => {
    if (overLimit.has(req.socket) || closing) return void res.destroy();
    track(handleHttp(req, res), (error) => answerHttp(res, 502, `${PREFIX} internal error: ${errorText(error)}`));
  });
  server.keepAliveTimeout = 5_000;
  server.setTimeout(idleMs); // idle keep-alive connections and stalled requests are destroyed
  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    client.on('error', () => client.destroy());
    if (overLimit.has(client) || closing) return void client.destroy();
    track(handleConnect(req, client, head), (error) => answerRaw(client, 502, `${PREFIX} internal error: ${errorText(error)}`));
  });
  server.on('upgrade', (_req: IncomingMessage, client: Duplex) => {
    client.on('error', () => client.destroy());
    answerRaw(client, 400, `${PREFIX} protocol upgrades (WebSocket over plain HTTP) are not forwarded; use CONNECT`);
  });
  server.on('connection', (socket: Socket) => {
    socket.on('error', () => socket.destroy());
    if (closing) return void socket.destroy();
    if (clients.size >= maxConnections) {
      overLimit.add(socket);
      return answerRaw(socket, 503, `${PREFIX} too many connections (at most ${maxConnections} at once)`);
    }
    clients.add(socket);
    sockets.add(socket);
    socket.on('close', () => {
      clients.delete(socket);
      sockets.delete(socket);
    });
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
    answerRaw(socket, tooLarge ? 431 : 400, tooLarge ? `${PREFIX} request headers too large` : `${PREFIX} malformed request`);
  });
  server.on('error', (error) => onError(error));

  const address = await listen(server, opts.listen);
  return {
    address,
    close: async () => {
      closing = true;
      stopWaiting(new Error('the proxy is closing'));
      const stopped = new Promise<void>((done) => server.close(() => done()));
      server.closeAllConnections(); // keep-alive and half-closed ones too (tunnels are in `sockets`)
      for (const socket of sockets) socket.destroy();
      await stopped;
      // Destroyed sockets close on a later tick; their events are emitted from their close handlers.
      while (inflight.size || openExchanges.size || pending.size) {
        await Promise.allSettled([...inflight, ...pending]);
        if (openExchanges.size) await new Promise((r) => setTimeout(r, 5));
      }
    },
  };
}

function listen(server: ReturnType<typeof createServer>, where: EgressProxyOptions['listen']): Promise<string | number> {
  return new Promise((resolveListen, reject) => {
    server.once('error', reject);
    const done = () => {
      server.removeListener('error', reject);
      const bound = server.address();
      resolveListen(typeof bound === 'string' ? bound : bound?.port ?? 0);
    };
    if ('path' in where) server.listen({ path: where.path, writableAll: where.writableAll ?? false, readableAll: where.writableAll ?? false }, done);
    else server.listen({ port: where.port, host: where.host ?? '127.0.0.1' }, done);
  });
}

async function defaultLookup(host: string): Promise<string[]> {
  const answers = await dnsLookup(host, { all: true, verbatim: true });
  return answers.map((a) => a.address);
}

/** Drops hop-by-hop headers, those the Connection header names, and any proxy credentials. */
function forwardHeaders(incoming: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = String(incoming.connection ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  const drop = new Set([...HOP_BY_HOP, ...named]);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) if (value !== undefined && !drop.has(name)) out[name] = value;
  return out;
}

function hostHeader(target: Target): string {
  return target.ip?.includes(':') ? `[${target.ip}]` : target.host;
}

function setSocketTimeout(socket: Duplex, ms: number, onIdle: () => void): void {
  const s = socket as Partial<Socket>;
  if (typeof s.setTimeout === 'function') s.setTimeout(ms, onIdle);
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 403: 'Forbidden', 431: 'Request Header Fields Too Large', 502: 'Bad Gateway', 503: 'Service Unavailable' };

/** A complete one-line plain-text answer on a raw socket (CONNECT, upgrade, parse errors), then close. */
function answerRaw(socket: Duplex, status: number, message: string): void {
  if (socket.destroyed || !socket.writable) return void socket.destroy();
  const body = `${message}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

function answerHttp(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  const body = `${message}\n`;
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' });
  res.end(body);
}

function errorText(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  return (e?.code ?? e?.message ?? String(error)).slice(0, 200);
}
