import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { checkUpstreams, UpstreamUnreachableError } from './preflight.js';

// The pre-flight asks real HTTP upstreams for their model list: one that lists models but fails
// every call passes (calls fail for reasons a listing cannot see), one that does not answer, or
// refuses the key, stops the run before it starts. Never a billable call.

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** An upstream answering GET <models path> with `listStatus`, anything else 500; every request is kept. */
async function upstream(listStatus: number): Promise<{ url: string; seen: IncomingMessage[] }> {
  const seen: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    seen.push(req);
    const listing = req.method === 'GET' && /\/models$/.test(req.url ?? '');
    res.writeHead(listing ? listStatus : 500, { 'content-type': 'application/json' });
    res.end(listing && listStatus === 200 ? JSON.stringify({ data: [{ id: 'm-1' }] }) : JSON.stringify({ error: { message: 'calls fail here' } }));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

/** A port nothing listens on: a server bound, then closed. */
async function closedPort(): Promise<string> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return `http://127.0.0.1:${port}`;
}

describe('the model upstream pre-flight', () => {
  it('passes an upstream that lists models but fails calls, asking only GET …/models with the key', async () => {
    const openai = await upstream(200);
    const anthropic = await upstream(200);
    await checkUpstreams(['openai', 'anthropic'], { openai: { url: `${openai.url}/v1`, key: 'sk-openai' }, anthropic: { url: anthropic.url, key: 'sk-ant' } });
    expect(openai.seen.map((r) => [r.method, r.url, r.headers.authorization])).toEqual([['GET', '/v1/models', 'Bearer sk-openai']]);
    expect(anthropic.seen.map((r) => [r.method, r.url, r.headers['x-api-key']])).toEqual([['GET', '/v1/models', 'sk-ant']]);
    // The same upstream does fail a model call: the pre-flight did not make one.
    expect((await fetch(`${openai.url}/v1/chat/completions`, { method: 'POST', body: '{}' })).status).toBe(500);
  });

  it('refuses an upstream that does not answer, in one line naming the variable and URL, never the key', async () => {
    const url = await closedPort();
    const refused = checkUpstreams(['openai'], { openai: { url: `${url}/v1`, key: 'sk-secret-key' } });
    await expect(refused).rejects.toThrow(UpstreamUnreachableError);
    const message = await refused.catch((e: Error) => e.message);
    expect(message).toMatch(new RegExp(`^A2RL_LLM_OPENAI_URL: the openai upstream at ${url}/v1 did not answer GET ${url}/v1/models \\(ECONNREFUSED\\); the run was not started$`));
    expect(message).not.toContain('sk-secret-key');
  });

  it('refuses an upstream that refuses the key, and a provider without a key', async () => {
    const gemini = await upstream(401);
    await expect(checkUpstreams(['gemini'], { gemini: { url: gemini.url, key: 'bad' } })).rejects.toThrow(/refused the key: GET .*\/v1beta\/models answered 401/);
    expect(gemini.seen.map((r) => r.headers['x-goog-api-key'])).toEqual(['bad']);
    await expect(checkUpstreams(['anthropic'], {})).rejects.toThrow(/^A2RL_LLM_ANTHROPIC_KEY: not set/);
  });

  it('gives up on an upstream that accepts the connection but never answers', async () => {
    const server = createServer(() => undefined); // never answers
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await expect(checkUpstreams(['openai'], { openai: { url, key: 'k' } }, { timeoutMs: 300 })).rejects.toThrow(/\(no answer within 0.3 s\)/);
    server.closeAllConnections();
  });
});
