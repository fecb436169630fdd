import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { FakeLlmCall, FakeLlmOptions, FakeLlmServer } from './types.js';
import { PREFLIGHT_USER_AGENT } from '../../../modules/llm-gateway/preflight.js';

/** What a provider's fake does with one parsed request; it pushes its FakeLlmCall itself. */
export type FakeHandler = (req: IncomingMessage, body: unknown, res: ServerResponse, calls: FakeLlmCall[]) => void | Promise<void>;

/**
 * The HTTP side every fake shares: reads the JSON body, answers nothing in `hang` mode (close() ends
 * such connections), and closes cleanly so a test's server never outlives it.
 */
export async function serveFake(options: FakeLlmOptions, handle: FakeHandler): Promise<FakeLlmServer> {
  const calls: FakeLlmCall[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: unknown;
      try {
        body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"body is not JSON"}}');
        return;
      }
      Promise.resolve(options.before?.((req.url ?? '/').split('?')[0], body))
        .then(() => handle(req, body, res, calls))
        .catch((err: unknown) => {
          if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: String(err) } }));
        });
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The usage of the n-th answer (FakeLlmOptions.usage, or the documented default). */
export function usageOf(options: FakeLlmOptions, n: number, request?: unknown): { input: number; output: number } {
  return options.usage ? options.usage(n, request) : { input: 1000 + 100 * n, output: 50 + n };
}

/**
 * Usage as a provider that keeps to the request would report it: input about a token per four bytes
 * of the body, output the request's own maximum (max_tokens, max_output_tokens,
 * generationConfig.maxOutputTokens), else `output`.
 */
export function usageFromRequest(output = 50): (n: number, request: unknown) => { input: number; output: number } {
  return (_n, request) => {
    const body = (request ?? {}) as Record<string, unknown>;
    const config = (body.generationConfig ?? {}) as Record<string, unknown>;
    const max = [body.max_tokens, body.max_completion_tokens, body.max_output_tokens, config.maxOutputTokens].find((v) => typeof v === 'number');
    return { input: Math.ceil(Buffer.byteLength(JSON.stringify(request ?? '')) / 4), output: typeof max === 'number' ? max : output };
  };
}

/** The FakeLlmCall fields every fake fills from the request itself. */
export function requestSeen(req: IncomingMessage, body?: unknown): Pick<FakeLlmCall, 'headers' | 'url' | 'finished' | 'body'> {
  return { headers: { ...req.headers }, url: req.url ?? '/', finished: false, body };
}

/** Ends the answer, noting whether it went out whole (the client may have gone). */
export function endAnswer(res: ServerResponse, call: FakeLlmCall, last?: string): void {
  res.end(last, (err?: Error | null) => (call.finished = !err));
}

/** Writes one server-sent event (`event:` line only when named). */
export function sse(res: ServerResponse, data: unknown, event?: string): void {
  res.write(`${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
}

/** The calls an agent made (through the gateway): the run's pre-flight model listing left out. */
export function agentCalls(server: { calls: readonly FakeLlmCall[] }): FakeLlmCall[] {
  return server.calls.filter((c) => c.headers['user-agent'] !== PREFLIGHT_USER_AGENT);
}
