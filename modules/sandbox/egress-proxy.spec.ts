import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validatePayload } from '../ledger/events/envelope.js';
import { buildWheel, fakeIndex, PKG, WHEEL } from './testing/fake-index.js';
import { nonPublicKind, parseAllowlist, startEgressProxy, type EgressProxy, type EgressProxyOptions, type EgressRecord } from './egress-proxy.js';

const T0 = new Date('2026-01-01T00:00:00.000Z');

// --- helpers -----------------------------------------------------------------------------------

// Everything a test opens is closed after it, passed or failed, so a failure cannot hang the run.
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A proxy on a Unix socket (as the harness runs it) or a TCP port, with its events collected. */
async function proxyWith(allow: string[], extra: Partial<EgressProxyOptions> = {}, tcp = false) {
  const events: EgressRecord[] = [];
  const dir = tempDir('a2rl-egress-');
  const proxy = await startEgressProxy({
    listen: tcp ? { port: 0 } : { path: join(dir, 'egress.sock') },
    allow,
    record: (e) => void events.push(e),
    clock: () => T0,
    ...extra,
  });
  cleanups.push(() => proxy.close());
  const dial = (): Socket => {
    const socket = typeof proxy.address === 'number' ? connect(proxy.address, '127.0.0.1') : connect(proxy.address);
    cleanups.push(() => socket.destroy());
    return socket;
  };
  /** Closes the proxy (which waits for every event) and checks each event against the catalog. */
  const finish = async (): Promise<EgressRecord[]> => {
    await proxy.close();
    for (const e of events) validatePayload('EgressConnection', e);
    return events;
  };
  return { proxy, events, dial, finish };
}

/** Sends `data`, then reads until the proxy closes the connection. */
async function exchange(socket: Socket, data: string | Buffer): Promise<string> {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('error', () => undefined);
  socket.write(data);
  await once(socket, 'close');
  return Buffer.concat(chunks).toString('latin1');
}

/** Reads until `marker` has arrived; answers everything read so far. */
async function readUntil(socket: Socket, marker: string): Promise<string> {
  let text = '';
  while (!text.includes(marker)) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    text += chunk.toString('latin1');
  }
  return text;
}

async function echoServer(): Promise<{ server: NetServer; port: number }> {
  const server = createNetServer((s) => {
    s.on('error', () => undefined);
    s.pipe(s);
  });
  await listening(server);
  return { server, port: (server.address() as AddressInfo).port };
}

async function closed(server: NetServer | HttpServer): Promise<void> {
  (server as HttpServer).closeAllConnections?.();
  await new Promise<void>((r) => server.close(() => r()));
}

/** Listens on a free loopback port; the server is closed after the test. */
async function listening(server: NetServer | HttpServer): Promise<void> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => closed(server));
}

function statusLine(response: string): string {
  return response.split('\r\n')[0]!;
}

function body(response: string): string {
  return response.slice(response.indexOf('\r\n\r\n') + 4);
}

/** Decodes a chunked body. */
function dechunk(text: string): string {
  let out = '';
  for (let at = 0; ; ) {
    const eol = text.indexOf('\r\n', at);
    const size = parseInt(text.slice(at, eol), 16);
    if (!size) return out;
    out += text.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}

// --- allowlist -----------------------------------------------------------------------------------

describe('parseAllowlist', () => {
  it('normalizes entries: lower case, trailing dot dropped, IPv6 canonical, duplicates removed', () => {
    expect(parseAllowlist(' PyPI.org., files.pythonhosted.org:443,*.Example.org, 10.0.0.5:8080, [FD00:0::1]:3128, pypi.org ,')).toEqual([
      'pypi.org',
      'files.pythonhosted.org:443',
      '*.example.org',
      '10.0.0.5:8080',
      '[fd00::1]:3128',
    ]);
    expect(parseAllowlist('')).toEqual([]);
    expect(parseAllowlist('::1')).toEqual(['[::1]']);
  });

  it.each([
    ['https://pypi.org/simple', /is a URL; give the host name only/],
    ['*', /would allow every host/],
    ['*.org', /too broad/],
    ['py*.org', /only use \* as a whole first label/],
    ['pypi.org:0', /invalid port "0"/],
    ['pypi.org:70000', /invalid port "70000"/],
    ['pypi.org:http', /invalid port "http"/],
    ['pyp%69.org', /may only contain a host name/],
    ['user@pypi.org', /may only contain a host name/],
    ['bücher.de', /non-ASCII.*xn--/],
    ['127.1', /numeric last label/],
    ['2130706433', /numeric last label/],
    ['under_score.org', /not a valid host name/],
    ['a..b', /empty label/],
    ['[pypi.org]:443', /brackets around something that is not an IPv6 address/],
  ])('refuses %s with a clear error', (spec, message) => {
    expect(() => parseAllowlist(spec)).toThrow(message);
    expect(() => parseAllowlist(spec)).toThrow(/^--allow-net: "/);
  });
});

describe('nonPublicKind', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['169.254.169.254', 'link-local (cloud metadata)'],
    ['fe80::1', 'link-local'],
    ['10.1.2.3', 'private'],
    ['172.31.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['fd12::1', 'private (unique local)'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'reserved or broadcast'],
    ['100.64.0.1', 'shared (carrier-grade NAT)'],
    ['64:ff9b::7f00:1', 'NAT64'],
  ])('%s is %s', (ip, kind) => expect(nonPublicKind(ip)).toBe(kind));

  it.each(['151.101.0.223', '8.8.8.8', '172.32.0.1', '2a04:4e42::223', '::ffff:8.8.8.8'])('%s is public', (ip) => expect(nonPublicKind(ip)).toBeNull());
});

// --- the proxy -----------------------------------------------------------------------------------

describe('egress proxy', () => {
  it('refuses to start on an invalid allowlist entry', async () => {
    await expect(startEgressProxy({ listen: { port: 0 }, allow: ['https://pypi.org'], record: () => undefined })).rejects.toThrow(/is a URL/);
  });

  it('tunnels CONNECT to an allowlisted IP and records the bytes each way when the tunnel closes', async () => {
    const echo = await echoServer();
    const { dial, finish } = await proxyWith([`127.0.0.1:${echo.port}`]);
    const client = dial();
    // "early" travels in the same packet as the CONNECT (the proxy gets it as `head`).
    client.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nHost: 127.0.0.1:${echo.port}\r\n\r\nearly`);
    const answer = await readUntil(client, 'early');
    expect(statusLine(answer)).toBe('HTTP/1.1 200 Connection established');
    client.write('hello, world');
    expect(await readUntil(client, 'hello, world')).toBe('hello, world');
    client.end();
    await once(client, 'close');

    const events = await finish();
    expect(events).toEqual([
      {
        host: '127.0.0.1',
        port: echo.port,
        method: 'CONNECT',
        allowed: true,
        address: '127.0.0.1',
        bytesOut: 17,
        bytesIn: 17,
        observedAt: T0.toISOString(),
        closedAt: T0.toISOString(),
      },
    ]);
  });

  it('refuses a host that is not allowlisted with 403, a one-line reason, and an allowed:false event', async () => {
    const connectSeam = jest.fn((_h: string, _p: number): Socket => {
      throw new Error('must not connect');
    });
    const lookup = jest.fn(async () => ['151.101.0.223']);
    const { dial, finish } = await proxyWith(['pypi.org', 'files.pythonhosted.org'], { connect: connectSeam, lookup });
    const answer = await exchange(dial(), 'CONNECT evil.com:443 HTTP/1.1\r\nHost: evil.com:443\r\n\r\n');
    expect(statusLine(answer)).toBe('HTTP/1.1 403 Forbidden');
    expect(body(answer)).toBe('a2rl egress proxy: evil.com:443 is not allowed (allowed: pypi.org, files.pythonhosted.org)\n');

    const port = await exchange(dial(), 'CONNECT pypi.org:22 HTTP/1.1\r\n\r\n');
    expect(body(port)).toBe('a2rl egress proxy: pypi.org is allowed on ports 80, 443 only, not 22 (allowed: pypi.org, files.pythonhosted.org)\n');

    const events = await finish();
    expect(events).toEqual([
      { host: 'evil.com', port: 443, method: 'CONNECT', allowed: false, reason: 'not on the allowlist', bytesOut: 0, bytesIn: 0, observedAt: T0.toISOString() },
      { host: 'pypi.org', port: 22, method: 'CONNECT', allowed: false, reason: 'port not allowed', bytesOut: 0, bytesIn: 0, observedAt: T0.toISOString() },
    ]);
    expect(lookup).not.toHaveBeenCalled();
    expect(connectSeam).not.toHaveBeenCalled();
  });

  it('says egress is off when the allowlist is empty', async () => {
    const { dial, finish } = await proxyWith([]);
    const answer = await exchange(dial(), 'GET http://pypi.org/simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n');
    expect(statusLine(answer)).toBe('HTTP/1.1 403 Forbidden');
    expect(body(answer)).toMatch(/pypi\.org:80 is not allowed \(no host is allowed for this run: start it with --allow-net/);
    expect(await finish()).toMatchObject([{ host: 'pypi.org', port: 80, method: 'HTTP', allowed: false }]);
  });

  it('refuses a loopback, private or metadata address even when the name resolving to it is allowlisted', async () => {
    const echo = await echoServer();
    const answers: Record<string, string[]> = {
      'pypi.org': ['127.0.0.1'],
      'rebind.example.org': ['169.254.169.254', 'fd00::1'],
      'localhost': ['::1', '127.0.0.1'],
    };
    const connectSeam = jest.fn((_h: string, _p: number): Socket => connect(echo.port, '127.0.0.1'));
    const { dial, finish } = await proxyWith(['pypi.org', `*.example.org`, `localhost:${echo.port}`, '127.0.0.1:1'], {
      lookup: async (h) => answers[h] ?? [],
      connect: connectSeam,
    });
    for (const target of ['pypi.org:443', 'rebind.example.org:443', `localhost:${echo.port}`]) {
      const answer = await exchange(dial(), `CONNECT ${target} HTTP/1.1\r\n\r\n`);
      expect(statusLine(answer)).toBe('HTTP/1.1 403 Forbidden');
      expect(body(answer)).toMatch(/resolves to a .* address; the proxy only connects to public addresses\n$/);
    }
    expect(connectSeam).not.toHaveBeenCalled();
    const events = await finish();
    expect(events.map((e) => [e.host, e.allowed, e.reason, e.address])).toEqual([
      ['pypi.org', false, 'resolves only to non-public addresses (loopback)', '127.0.0.1'],
      ['rebind.example.org', false, 'resolves only to non-public addresses (link-local (cloud metadata))', '169.254.169.254'],
      ['localhost', false, 'resolves only to non-public addresses (loopback)', '::1'],
    ]);
  });

  it('connects to the public address it checked, skipping the private ones in a mixed answer, without resolving again', async () => {
    const echo = await echoServer();
    const lookup = jest.fn(async () => ['10.0.0.7', '151.101.0.223', '127.0.0.1']);
    // The seam stands in for the internet: it records which address was dialled and reaches the echo server.
    const connectSeam = jest.fn((_h: string, _p: number): Socket => connect(echo.port, '127.0.0.1'));
    const { dial, finish } = await proxyWith(['pypi.org'], { lookup, connect: connectSeam });
    const client = dial();
    client.write('CONNECT pypi.org:443 HTTP/1.1\r\n\r\n');
    expect(statusLine(await readUntil(client, '\r\n\r\n'))).toBe('HTTP/1.1 200 Connection established');
    client.write('ping');
    await readUntil(client, 'ping');
    client.destroy();
    const events = await finish();
    expect(lookup).toHaveBeenCalledTimes(1);
    expect(connectSeam.mock.calls).toEqual([['151.101.0.223', 443]]);
    expect(events).toMatchObject([{ host: 'pypi.org', port: 443, method: 'CONNECT', allowed: true, address: '151.101.0.223', bytesOut: 4, bytesIn: 4 }]);
  });

  it('matches *.domain on subdomains only, and literal IPs only when the allowlist names that IP', async () => {
    const connectSeam = jest.fn((_h: string, _p: number): Socket => {
      throw new Error('offline');
    });
    const { dial, finish } = await proxyWith(['*.pythonhosted.org', '127.0.0.1:9'], { lookup: async () => ['151.101.0.223'], connect: connectSeam });
    const status = async (target: string) => statusLine(await exchange(dial(), `CONNECT ${target} HTTP/1.1\r\n\r\n`));
    expect(await status('FILES.PythonHosted.org.:443')).toBe('HTTP/1.1 502 Bad Gateway'); // allowed, then the (fake) upstream fails
    expect(await status('pythonhosted.org:443')).toBe('HTTP/1.1 403 Forbidden');
    expect(await status('evilpythonhosted.org:443')).toBe('HTTP/1.1 403 Forbidden');
    expect(await status('127.0.0.1:10')).toBe('HTTP/1.1 403 Forbidden');
    expect(await status('127.1:9')).toBe('HTTP/1.1 403 Forbidden');
    expect(await status('[::1]:9')).toBe('HTTP/1.1 403 Forbidden');
    expect(await status('[::ffff:127.0.0.1]:9')).toBe('HTTP/1.1 403 Forbidden');
    const events = await finish();
    expect(events.map((e) => [e.host, e.port, e.allowed, e.reason])).toEqual([
      ['files.pythonhosted.org', 443, true, 'upstream connect failed: offline'],
      ['pythonhosted.org', 443, false, 'not on the allowlist'],
      ['evilpythonhosted.org', 443, false, 'not on the allowlist'],
      ['127.0.0.1', 10, false, 'port not allowed'],
      ['127.1', 9, false, 'invalid host name'],
      ['::1', 9, false, 'not on the allowlist'],
      ['::ffff:127.0.0.1', 9, false, 'not on the allowlist'],
    ]);
  });

  it('forwards absolute-form HTTP with streamed bodies and without hop-by-hop or proxy headers', async () => {
    let seen: { url?: string; headers?: IncomingHttpHeaders; body?: string } = {};
    const upstream = createHttpServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen = { url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() };
        // Chunked (no length): the proxy streams it through, re-chunked towards the agent.
        res.writeHead(201, { 'content-type': 'text/plain', 'x-upstream': 'yes', connection: 'close' });
        res.write('created: ');
        res.end(seen.body);
      });
    });
    await listening(upstream);
    const port = (upstream.address() as AddressInfo).port;
    const { dial, finish } = await proxyWith([`127.0.0.1:${port}`], {}, true);

    const request =
      `POST http://127.0.0.1:${port}/upload?x=1 HTTP/1.1\r\nHost: attacker.invalid\r\nProxy-Authorization: Basic c2VjcmV0\r\n` +
      `Connection: close, X-Private\r\nX-Private: drop me\r\nX-Kept: 1\r\nContent-Length: 5\r\n\r\nhello`;
    const answer = await exchange(dial(), request);
    expect(statusLine(answer)).toBe('HTTP/1.1 201 Created');
    expect(answer).toMatch(/x-upstream: yes/i);
    expect(answer).toMatch(/transfer-encoding: chunked/i);
    expect(dechunk(body(answer))).toBe('created: hello');
    expect(seen.url).toBe('/upload?x=1');
    expect(seen.body).toBe('hello');
    expect(seen.headers).toMatchObject({ host: `127.0.0.1:${port}`, 'x-kept': '1' });
    expect(seen.headers).not.toHaveProperty('proxy-authorization');
    expect(seen.headers).not.toHaveProperty('x-private');

    const events = await finish();
    expect(events).toEqual([
      {
        host: '127.0.0.1',
        port,
        method: 'HTTP',
        allowed: true,
        address: '127.0.0.1',
        bytesOut: 5,
        bytesIn: 'created: hello'.length,
        observedAt: T0.toISOString(),
        closedAt: T0.toISOString(),
      },
    ]);
  });

  it('answers 502 with a reason when an allowed upstream is unreachable, and records it', async () => {
    const dead = await echoServer();
    const port = dead.port;
    await closed(dead.server); // nothing listens on this port any more
    const { dial, finish } = await proxyWith([`127.0.0.1:${port}`]);
    const answer = await exchange(dial(), `GET http://127.0.0.1:${port}/ HTTP/1.1\r\n\r\n`);
    expect(statusLine(answer)).toBe('HTTP/1.1 502 Bad Gateway');
    expect(body(answer)).toBe(`a2rl egress proxy: could not connect to 127.0.0.1:${port} (ECONNREFUSED)\n`);
    expect(await finish()).toMatchObject([{ host: '127.0.0.1', port, method: 'HTTP', allowed: true, reason: 'upstream connect failed: ECONNREFUSED', bytesOut: 0, bytesIn: 0 }]);
  });

  it('answers malformed and unsupported requests with 400 (or 431) and keeps serving', async () => {
    const echo = await echoServer();
    const { dial, finish } = await proxyWith([`127.0.0.1:${echo.port}`], { maxHeaderBytes: 1024 });
    const cases: Array<[string, string, RegExp]> = [
      ['\x00\x01\x02 garbage\r\n\r\n', 'HTTP/1.1 400 Bad Request', /malformed request/],
      ['GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n', 'HTTP/1.1 400 Bad Request', /send absolute-form requests/],
      ['GET https://pypi.org/ HTTP/1.1\r\n\r\n', 'HTTP/1.1 400 Bad Request', /only http:\/\/ URLs are forwarded; use CONNECT for https:\/\//],
      ['CONNECT pypi.org HTTP/1.1\r\n\r\n', 'HTTP/1.1 400 Bad Request', /CONNECT needs host:port/],
      ['CONNECT pypi.org:99999 HTTP/1.1\r\n\r\n', 'HTTP/1.1 400 Bad Request', /CONNECT needs host:port/],
      [`GET http://127.0.0.1:${echo.port}/ HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n`, 'HTTP/1.1 400 Bad Request', /upgrades/],
      [`GET http://x/ HTTP/1.1\r\nX-Big: ${'a'.repeat(4096)}\r\n\r\n`, 'HTTP/1.1 431 Request Header Fields Too Large', /headers too large/],
    ];
    for (const [request, status, reason] of cases) {
      const answer = await exchange(dial(), request);
      expect(statusLine(answer)).toBe(status);
      expect(body(answer)).toMatch(reason);
    }
    // Percent-encoded and userinfo hosts are refused as names (recorded), never decoded.
    for (const trick of ['http://127.0.0.1%2e:80/', 'http://pypi.org@127.0.0.1/']) {
      const answer = await exchange(dial(), `GET ${trick} HTTP/1.1\r\n\r\n`);
      expect(statusLine(answer)).toBe('HTTP/1.1 403 Forbidden');
    }
    // Still serving.
    const client = dial();
    client.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\n`);
    expect(statusLine(await readUntil(client, '\r\n\r\n'))).toBe('HTTP/1.1 200 Connection established');
    client.destroy();
    const events = await finish();
    expect(events.map((e) => [e.allowed, e.allowed ? 'tunnel' : e.reason])).toEqual([
      [false, 'invalid host name'],
      [false, 'invalid host name'],
      [true, 'tunnel'],
    ]);
  });

  it('resolves names with the system resolver by default: localhost is loopback, refused', async () => {
    const { dial, finish } = await proxyWith(['localhost:8080']);
    const answer = await exchange(dial(), 'GET http://localhost:8080/ HTTP/1.1\r\n\r\n');
    expect(statusLine(answer)).toBe('HTTP/1.1 403 Forbidden');
    expect(await finish()).toMatchObject([{ host: 'localhost', port: 8080, method: 'HTTP', allowed: false, reason: expect.stringMatching(/non-public addresses \(loopback\)/) }]);
  });

  it('closes a tunnel idle for idleTimeoutMs, and records why', async () => {
    const echo = await echoServer();
    const { dial, finish } = await proxyWith([`127.0.0.1:${echo.port}`], { idleTimeoutMs: 200 });
    const idle = dial();
    idle.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\n`);
    await readUntil(idle, '\r\n\r\n');
    await once(idle, 'close'); // the proxy closes it: nothing moved for 200 ms
    expect(await finish()).toEqual([expect.objectContaining({ allowed: true, reason: 'idle for 200 ms', bytesOut: 0, bytesIn: 0, closedAt: T0.toISOString() })]);
  });

  it('close() ends open tunnels and records them before it resolves', async () => {
    const echo = await echoServer();
    const { dial, finish } = await proxyWith([`127.0.0.1:${echo.port}`]);
    const open = dial();
    open.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\nx`);
    await readUntil(open, 'x');
    const events = await finish(); // while the agent's side is still open
    expect(events).toEqual([expect.objectContaining({ allowed: true, reason: 'closed by the harness (the proxy stopped)', bytesOut: 1, bytesIn: 1, closedAt: T0.toISOString() })]);
  });

  it('answers 503 beyond the connection limit', async () => {
    const echo = await echoServer();
    const { dial, finish } = await proxyWith([`127.0.0.1:${echo.port}`], { maxConnections: 1 });
    const first = dial();
    first.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\n`);
    await readUntil(first, '\r\n\r\n'); // the tunnel holds the only slot
    const answer = await exchange(dial(), `CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\n`);
    expect(statusLine(answer)).toBe('HTTP/1.1 503 Service Unavailable');
    expect(body(answer)).toBe('a2rl egress proxy: too many connections (at most 1 at once)\n');
    first.destroy();
    expect(await finish()).toHaveLength(1);
  });

  it('keeps serving when recording fails, and reports the failure', async () => {
    const errors: unknown[] = [];
    const dir = tempDir('a2rl-egress-');
    const proxy: EgressProxy = await startEgressProxy({
      listen: { path: join(dir, 'p.sock') },
      allow: [],
      record: () => Promise.reject(new Error('ledger is down')),
      onError: (e) => errors.push(e),
    });
    cleanups.push(() => proxy.close());
    for (let i = 0; i < 2; i++) {
      const answer = await exchange(connect(proxy.address as string), 'CONNECT evil.com:443 HTTP/1.1\r\n\r\n');
      expect(statusLine(answer)).toBe('HTTP/1.1 403 Forbidden');
    }
    await proxy.close();
    expect(errors.map((e) => (e as Error).message)).toEqual(['ledger is down', 'ledger is down']);
  });
});

// --- pip through the proxy --------------------------------------------------------------------

const PYTHON = spawnSync('python3', ['-c', 'import sys, pip; print(sys.executable)'], { encoding: 'utf8' });
const PIP_AVAILABLE = PYTHON.status === 0;
const pipIt = PIP_AVAILABLE ? it : it.skip;
if (!PIP_AVAILABLE) console.warn('egress-proxy.spec: skipping the pip install tests: `python3 -m pip` is unavailable here');

/** `pip install` with a clean environment (no no_proxy, no user pip config, nothing cached). */
function pipInstall(indexPort: number, proxyPort: number, target: string, home: string): Promise<{ code: number; output: string }> {
  const args = ['-m', 'pip', 'install', '--no-cache-dir', '--disable-pip-version-check', '--no-input', '--retries', '0', '--timeout', '30'];
  args.push('--target', target, '--index-url', `http://127.0.0.1:${indexPort}/simple`, '--proxy', `http://127.0.0.1:${proxyPort}`, 'a2rl-egress-probe');
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, PIP_CONFIG_FILE: '/dev/null', PYTHONNOUSERSITE: '1' };
  return new Promise((resolve) => {
    execFile(PYTHON.stdout.trim(), args, { env, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr });
    });
  });
}

describe('pip install through the egress proxy', () => {
  pipIt(
    'installs a package from an allowlisted local index, every request recorded as allowed',
    async () => {
      const dir = tempDir('a2rl-pip-');
      const index = await fakeIndex(buildWheel(dir, PYTHON.stdout.trim()));
      cleanups.push(() => closed(index.server));
      const { proxy, finish } = await proxyWith([`127.0.0.1:${index.port}`], {}, true);

      const result = await pipInstall(index.port, proxy.address as number, join(dir, 'site'), dir);
      expect(result.output).toMatch(/Successfully installed a2rl-egress-probe-0\.1/);
      expect(result.code).toBe(0);
      expect(readFileSync(join(dir, 'site', PKG, '__init__.py'), 'utf8')).toMatch(/installed through the a2rl egress proxy/);

      const events = await finish();
      expect(index.hits).toEqual(expect.arrayContaining(['/simple/a2rl-egress-probe/', `/files/${WHEEL}`]));
      expect(events.length).toBe(index.hits.length); // every request the index saw came through the proxy
      for (const e of events) expect(e).toMatchObject({ host: '127.0.0.1', port: index.port, method: 'HTTP', allowed: true, address: '127.0.0.1' });
      expect(events.some((e) => e.bytesIn === readFileSync(join(dir, WHEEL)).length)).toBe(true);
    },
    180_000,
  );

  pipIt(
    'cannot install when the index is not allowlisted, and the refusal is recorded',
    async () => {
      const dir = tempDir('a2rl-pip-');
      const index = await fakeIndex(buildWheel(dir, PYTHON.stdout.trim()));
      cleanups.push(() => closed(index.server));
      const { proxy, finish } = await proxyWith(['pypi.org'], {}, true);

      const result = await pipInstall(index.port, proxy.address as number, join(dir, 'site'), dir);
      expect(result.code).not.toBe(0);
      expect(existsSync(join(dir, 'site', PKG))).toBe(false);
      expect(index.hits).toEqual([]);
      const events = await finish();
      expect(events.length).toBeGreaterThan(0);
      for (const e of events) expect(e).toMatchObject({ host: '127.0.0.1', port: index.port, allowed: false, reason: 'not on the allowlist' });
    },
    180_000,
  );
});
