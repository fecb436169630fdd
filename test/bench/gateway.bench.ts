// `npm run bench -- gateway`: what the LLM gateway adds to a model call. Three processes, as in a run:
// a local upstream streaming an Anthropic Messages answer (20 server-sent events), the gateway (this
// process, recording every call: blobs hashed in memory, records kept), and a client (the agent)
// making REQUESTS sequential keep-alive calls straight to the upstream and as many through the
// gateway's Unix socket, alternating the two, after a warm-up. Time to first byte of the body (TTFT)
// and to the end of the answer, p50 and p99 each way. Goal: the gateway adds ≤ 5 ms to TTFT at p99.
// The p99s are sensitive to other load on the machine (the gateway path has one more process to
// wake): the JSON line carries the 1-minute load average and the CPU count to judge them by.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { EventData } from '../../modules/ledger/events/catalog.js';
import { startLlmGateway } from '../../modules/llm-gateway/gateway.js';
import { anthropicCodec } from '../../modules/llm-gateway/protocols/anthropic.js';

const REQUESTS = 300;
const WARMUP = 20;
const EVENTS = 20;
const GOAL_ADDED_P99_MS = 5;
const TOKEN = 'bench-gateway-token-0123456789';

/**
 * The upstream, in a process of its own (the real one is remote): a Messages API answer of 20
 * server-sent events, each its own write a turn of the event loop apart, as a model streams them.
 * Prints its URL, then serves until killed.
 */
const UPSTREAM = `
const http = require('http');
const sse = (type, data) => 'event: ' + type + '\\ndata: ' + JSON.stringify({ type, ...data }) + '\\n\\n';
const usage = { input_tokens: 1200, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 };
const events = [
  sse('message_start', { message: { id: 'msg_bench', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5-20250929', content: [], stop_reason: null, usage } }),
  sse('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  ...Array.from({ length: ${EVENTS} - 4 }, (_, i) => sse('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'word' + i + ' ' } })),
  sse('content_block_stop', { index: 0 }),
  sse('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 64 } }),
  sse('message_stop', {}),
];
const server = http.createServer({ noDelay: true }, (req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let i = 0;
    const next = () => {
      if (i === events.length - 1) return void res.end(events[i]);
      res.write(events[i++]);
      setImmediate(next);
    };
    next();
  });
});
server.listen(0, '127.0.0.1', () => console.log('http://127.0.0.1:' + server.address().port));
`;

/** Starts the upstream process; resolves with its URL once it listens. */
function startUpstream(file: string): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => reject(new Error(`the bench upstream exited ${code}`)));
    child.stdout.once('data', (line: Buffer) => resolve({ url: line.toString().trim(), stop: () => child.kill() }));
  });
}

/** The agent's side: alternating direct and gateway calls; prints the timings in ms as JSON. */
const CLIENT = `
const http = require('http');
const [directUrl, socketPath, token, n, warmup] = process.argv.slice(2);
const body = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 1024, stream: true, messages: [{ role: 'user', content: 'hi' }] });
const direct = new URL(directUrl);
const agents = { direct: new http.Agent({ keepAlive: true, maxSockets: 1 }), gateway: new http.Agent({ keepAlive: true, maxSockets: 1 }) };
const target = {
  direct: { host: direct.hostname, port: direct.port, path: '/v1/messages' },
  gateway: { socketPath, path: '/anthropic/v1/messages' },
};
const call = (way) => new Promise((resolve, reject) => {
  const t0 = process.hrtime.bigint();
  let ttft = null;
  const req = http.request({ ...target[way], method: 'POST', agent: agents[way], headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-api-key': token, 'anthropic-version': '2023-06-01' } }, (res) => {
    res.on('data', () => { if (ttft === null) ttft = Number(process.hrtime.bigint() - t0) / 1e6; });
    res.on('end', () => res.statusCode === 200 ? resolve({ ttft, total: Number(process.hrtime.bigint() - t0) / 1e6 }) : reject(new Error(way + ' answered ' + res.statusCode)));
  });
  req.on('error', reject);
  req.end(body);
});
(async () => {
  for (let i = 0; i < Number(warmup); i++) { await call('direct'); await call('gateway'); }
  const out = { direct: { ttft: [], total: [] }, gateway: { ttft: [], total: [] } };
  for (let i = 0; i < Number(n); i++) {
    for (const way of i % 2 ? ['gateway', 'direct'] : ['direct', 'gateway']) {
      const t = await call(way);
      out[way].ttft.push(t.ttft);
      out[way].total.push(t.total);
    }
  }
  console.log(JSON.stringify(out));
  agents.direct.destroy();
  agents.gateway.destroy();
})().catch((err) => { console.error(err); process.exit(1); });
`;

interface Timings {
  ttft: number[];
  total: number[];
}

function runClient(file: string, args: string[]): Promise<{ direct: Timings; gateway: Timings }> {
  const child = spawn(process.execPath, [file, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.on('data', (c) => (stdout += c));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(stdout) as { direct: Timings; gateway: Timings }) : reject(new Error(`the bench client exited ${code}`))));
  });
}

/** Nearest-rank percentile. */
function percentile(xs: number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

const round = (n: number) => Math.round(n * 1000) / 1000;

export async function gatewayBench(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-gateway-bench-'));
  writeFileSync(path.join(dir, 'upstream.cjs'), UPSTREAM);
  writeFileSync(path.join(dir, 'client.cjs'), CLIENT);
  const upstream = await startUpstream(path.join(dir, 'upstream.cjs'));
  const records: Array<EventData<'LlmCallRecorded'>> = [];
  const gateway = await startLlmGateway({
    listen: { path: path.join(dir, 'llm.sock') },
    token: TOKEN,
    upstreams: { anthropic: { url: upstream.url, key: 'bench-harness-key' } },
    codecs: [anthropicCodec],
    record: async (data) => void records.push(data),
    storeBlob: async (body) => {
      const sha256 = createHash('sha256').update(body).digest('hex');
      return { sha256, size: body.length, key: `blobs/${sha256}` };
    },
  });
  try {
    const t = await runClient(path.join(dir, 'client.cjs'), [upstream.url, path.join(dir, 'llm.sock'), TOKEN, String(REQUESTS), String(WARMUP)]);
    await gateway.close();
    const f = {
      ttftDirectP50Ms: round(percentile(t.direct.ttft, 0.5)),
      ttftDirectP99Ms: round(percentile(t.direct.ttft, 0.99)),
      ttftGatewayP50Ms: round(percentile(t.gateway.ttft, 0.5)),
      ttftGatewayP99Ms: round(percentile(t.gateway.ttft, 0.99)),
      totalDirectP50Ms: round(percentile(t.direct.total, 0.5)),
      totalDirectP99Ms: round(percentile(t.direct.total, 0.99)),
      totalGatewayP50Ms: round(percentile(t.gateway.total, 0.5)),
      totalGatewayP99Ms: round(percentile(t.gateway.total, 0.99)),
    };
    const addedP50Ms = round(f.ttftGatewayP50Ms - f.ttftDirectP50Ms);
    const addedP99Ms = round(f.ttftGatewayP99Ms - f.ttftDirectP99Ms);
    const recordedOk = records.filter((r) => r.outcome === 'ok' && r.usage.outputTokens === 64).length;
    const expected = REQUESTS + WARMUP;
    console.log(`LLM gateway, ${REQUESTS} streamed answers of ${EVENTS} events each way (after ${WARMUP} warm-up), sequential, keep-alive; through the gateway's Unix socket vs straight to the upstream`);
    console.log(`time to first byte p50/p99: ${f.ttftGatewayP50Ms}/${f.ttftGatewayP99Ms} ms through the gateway vs ${f.ttftDirectP50Ms}/${f.ttftDirectP99Ms} ms direct: adds ${addedP50Ms}/${addedP99Ms} ms (goal ≤ ${GOAL_ADDED_P99_MS} ms at p99)`);
    console.log(`whole answer p50/p99: ${f.totalGatewayP50Ms}/${f.totalGatewayP99Ms} ms through the gateway vs ${f.totalDirectP50Ms}/${f.totalDirectP99Ms} ms direct`);
    console.log(`calls recorded ok with their usage: ${recordedOk} of ${expected}`);
    console.log(
      JSON.stringify({
        bench: 'gateway',
        requests: REQUESTS,
        events: EVENTS,
        ...f,
        addedP50Ms,
        addedP99Ms,
        goalAddedP99Ms: GOAL_ADDED_P99_MS,
        recorded: recordedOk,
        loadAverage1m: round(os.loadavg()[0]),
        cpus: os.cpus().length,
        pass: addedP99Ms <= GOAL_ADDED_P99_MS && recordedOk === expected,
      }),
    );
  } finally {
    await gateway.close();
    upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
