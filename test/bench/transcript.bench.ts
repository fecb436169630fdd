// `npm run bench -- transcript`: what a long session's model calls cost in storage. A synthetic agent
// talks to an in-process Anthropic Messages upstream through the real gateway (recording path as in a
// run: a redacting filesystem artifact store, the body-store's pieces): CALLS sequential calls whose
// context grows by an assistant turn (text + tool_use) and a tool_result each, with the same system
// prompt and tool definitions in every call. Per call, the bytes newly stored (blobs are content-
// addressed: stored once). Goals: flat (mean over the last 100 calls ≤ 1.1× the first 100), total
// stored ≤ 1.2× the session's unique content (its distinct messages, system prompt and tools); also
// ÷ the whole-body layout (each request and answer one blob). A sample of the calls is rebuilt and
// compared with what the upstream received. A2RL_BENCH_TRANSCRIPT_CALLS overrides the call count.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { RedactingArtifactStore } from '../../modules/instrumentation/redacting-artifact-store.js';
import { BlobRemap } from '../../modules/instrumentation/redacting-artifact-store.js';
import { RunRedaction } from '../../modules/instrumentation/run-redaction.js';
import type { EventData } from '../../modules/ledger/events/catalog.js';
import { startLlmGateway } from '../../modules/llm-gateway/gateway.js';
import { anthropicCodec } from '../../modules/llm-gateway/protocols/anthropic.js';
import { rebuildBody, recordedBody, SegmentCache } from '../../modules/llm-gateway/request-pieces.js';
import { storeReader } from '../../modules/query/event-blob.js';

const CALLS = Number(process.env.A2RL_BENCH_TRANSCRIPT_CALLS ?? 2000);
const WINDOW = 100;
const GOALS = { flat: 1.1, storedPerUnique: 1.2 };
const TOKEN = 'bench-transcript-token-0123456789';
/** Disk the run needs at most (blobs stored once, a few MB; the margin is for a scaled-up run). */
const NEEDED_DISK_BYTES = 1 << 30;

type Call = EventData<'LlmCallRecorded'>;

/** Deterministic content: the same session every run. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = prng(32);
const WORDS = ['the', 'loss', 'train', 'model', 'epoch', 'file', 'grad', 'def', 'return', 'import', 'torch', 'data', 'batch', 'step', 'eval', 'score', 'ok', 'error', 'line', 'path'];
const words = (min: number, max: number) => {
  const n = min + Math.floor(random() * (max - min));
  let out = '';
  while (out.length < n) out += `${WORDS[Math.floor(random() * WORDS.length)]}${random() < 0.1 ? '\n' : ' '}`;
  return out.slice(0, n);
};

const SYSTEM = JSON.stringify([{ type: 'text', text: words(6000, 6001) }]);
const TOOLS = JSON.stringify(['Bash', 'Read', 'Edit', 'Write', 'Grep', 'Glob', 'TodoWrite', 'WebFetch'].map((name) => ({ name, description: words(900, 1400), input_schema: { type: 'object', properties: { command: { type: 'string', description: words(80, 200) } }, required: ['command'] } })));

/** The upstream: answers each call with a text and a tool_use (JSON, not streamed); notes each body's sha256. */
async function startUpstream(): Promise<{ url: string; received: string[]; close: () => Promise<void> }> {
  const received: string[] = [];
  const server = http.createServer((req, res) => {
    const hash = createHash('sha256');
    req.on('data', (chunk: Buffer) => hash.update(chunk));
    req.on('end', () => {
      const i = received.push(hash.digest('hex')) - 1;
      const content = [{ type: 'text', text: words(80, 300) }, { type: 'tool_use', id: `toolu_${String(i).padStart(6, '0')}`, name: 'Bash', input: { command: words(50, 400) } }];
      const body = JSON.stringify({ id: `msg_${String(i).padStart(6, '0')}`, type: 'message', role: 'assistant', model: 'claude-sonnet-4-5-20250929', content, stop_reason: 'tool_use', stop_sequence: null, usage: { input_tokens: 1000 + i, output_tokens: 120, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 } });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function post(url: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/anthropic/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': TOKEN, 'anthropic-version': '2023-06-01' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks).toString('utf8')) : reject(new Error(`the gateway answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const round = (x: number, digits = 3) => Number(x.toFixed(digits));

export async function transcriptBench(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-transcript-'));
  const free = await statfs(dir).then((s) => s.bavail * s.bsize);
  const calls = free < NEEDED_DISK_BYTES ? Math.min(CALLS, 200) : CALLS;
  const scaled = calls < CALLS ? `scaled down to ${calls} calls: ${Math.round(free / 2 ** 20)} MiB free` : undefined;
  const fsStore = await FsArtifactStore.open(path.join(dir, 'artifacts'));
  const redaction = new RunRedaction({ secrets: [{ kind: 'gateway-token', value: TOKEN }] });
  const store = new RedactingArtifactStore(fsStore, { redactor: redaction.redactor, blobs: new BlobRemap() });
  const upstream = await startUpstream();

  // What the store holds: each blob counted once, when first stored.
  const seen = new Set<string>();
  let storedBytes = 0;
  const records: Call[] = [];
  let recorded: (() => void) | undefined;
  const gateway = await startLlmGateway({
    listen: { port: 0 },
    token: TOKEN,
    upstreams: { anthropic: { url: upstream.url, key: 'bench-upstream-key' } },
    codecs: [anthropicCodec],
    record: async (data) => {
      records.push(data);
      recorded?.();
    },
    storeBlob: async (body) => {
      const put = await store.put(body, { sha256: createHash('sha256').update(body).digest('hex'), size: body.length });
      if (!seen.has(put.sha256)) {
        seen.add(put.sha256);
        storedBytes += put.size;
      }
      return { sha256: put.sha256, size: put.size, key: put.key };
    },
    wouldRedact: (body) => redaction.redactor.redactBlob(body) !== null,
  });

  const started = performance.now();
  const messages: string[] = [JSON.stringify({ role: 'user', content: words(1500, 2500) })];
  const unique = new Set<string>([SYSTEM, TOOLS]);
  let uniqueBytes = Buffer.byteLength(SYSTEM) + Buffer.byteLength(TOOLS);
  const note = (m: string) => {
    if (unique.has(m)) return;
    unique.add(m);
    uniqueBytes += Buffer.byteLength(m);
  };
  const perCall: number[] = [];
  const uniquePerCall: number[] = [];
  const eventBytes: number[] = [];
  let todayBytes = 0;
  let lastRequestBytes = 0;
  try {
    for (let i = 0; i < calls; i++) {
      const body = `{"model":"claude-sonnet-4-5","max_tokens":32000,"messages":[${messages.join(',')}],"system":${SYSTEM},"tools":${TOOLS},"metadata":{"user_id":"bench"},"stream":false}`;
      const uniqueBefore = uniqueBytes;
      for (const m of messages.slice(-2)) note(m);
      const before = storedBytes;
      const written = new Promise<void>((resolve) => (recorded = resolve));
      const answer = await post(gateway.url!, body);
      await written;
      perCall.push(storedBytes - before);
      uniquePerCall.push(uniqueBytes - uniqueBefore);
      eventBytes.push(Buffer.byteLength(JSON.stringify(records[i])));
      todayBytes += Buffer.byteLength(body) + Buffer.byteLength(answer);
      lastRequestBytes = Buffer.byteLength(body);
      // The agent sends the answer back as its assistant turn, then the tool's result.
      const { content } = JSON.parse(answer) as { content: Array<{ id?: string }> };
      messages.push(JSON.stringify({ role: 'assistant', content }));
      messages.push(JSON.stringify({ role: 'user', content: [{ type: 'tool_result', tool_use_id: content[1].id, content: words(300, 3700) }] }));
    }
    const sessionS = (performance.now() - started) / 1000;

    // Rebuilt as every reader gets them (a sample, in order, one cache), and the last call cold.
    const readBlob = storeReader(fsStore);
    const cache = new SegmentCache();
    const sample = records.map((_, i) => i).filter((i) => i % 50 === 0 || i === records.length - 1);
    let exact = 0;
    for (const i of sample) {
      const bytes = await rebuildBody(recordedBody(records[i], 'request'), readBlob, cache);
      if (createHash('sha256').update(bytes).digest('hex') === upstream.received[i]) exact++;
    }
    const t0 = performance.now();
    await rebuildBody(recordedBody(records[records.length - 1], 'request'), readBlob);
    const rebuildLastColdMs = performance.now() - t0;

    const first = mean(perCall.slice(0, WINDOW));
    const last = mean(perCall.slice(-WINDOW));
    const out = {
      bench: 'transcript',
      calls,
      ...(scaled ? { note: scaled } : {}),
      pieces: records.filter((r) => r.requestPieces).length,
      last_request_bytes: lastRequestBytes,
      stored_per_call_first100: Math.round(first),
      stored_per_call_last100: Math.round(last),
      unique_per_call_last100: Math.round(mean(uniquePerCall.slice(-WINDOW))),
      flat: round(last / first),
      flat_goal: GOALS.flat,
      stored_bytes: storedBytes,
      unique_content_bytes: uniqueBytes,
      stored_per_unique: round(storedBytes / uniqueBytes),
      stored_per_unique_goal: GOALS.storedPerUnique,
      whole_body_bytes: todayBytes,
      stored_per_whole_body: round(storedBytes / todayBytes, 5),
      event_bytes_first100: Math.round(mean(eventBytes.slice(0, WINDOW))),
      event_bytes_last100: Math.round(mean(eventBytes.slice(-WINDOW))),
      rebuilt_exact: `${exact}/${sample.length}`,
      rebuild_last_cold_ms: round(rebuildLastColdMs, 1),
      session_s: round(sessionS, 1),
      pass: last <= GOALS.flat * first && storedBytes <= GOALS.storedPerUnique * uniqueBytes && exact === sample.length,
      load1: round(os.loadavg()[0], 2),
      cpus: os.cpus().length,
    };
    console.log(JSON.stringify(out));
  } finally {
    await gateway.close();
    await upstream.close();
    await fsStore.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
