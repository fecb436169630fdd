import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium, type Browser } from 'playwright-core';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { SignedRunWriter } from '../../modules/audit/bundle/testing/signed-run.js';
import { DEFAULT_HEAD_EVERY_EVENTS } from '../../modules/ledger/tree-head-signer.js';
import { initSigningKey, type SigningKey } from '../../modules/ledger/tree-head.js';
import type { ArtifactStore } from '../../modules/artifacts/artifact-store.port.js';
import type { BlobRef } from '../../modules/ledger/events/catalog.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import { freePort } from '../../modules/serving/free-port.js';

// `npm run bench -- dashboard`: the run page of a large run in Chromium. A run of 100,000 events
// (A2RL_BENCH_DASHBOARD_EVENTS to change it) is written into a SQLite ledger under a fresh A2RL_HOME
// as a signing harness writes it: agent output, file changes (logs and the training script, with
// their blobs), processes, a submission and its grading every 2,000 events, a signed tree head
// every 10,000 events and at seal; beside it a run of 100 events written the same way. The read
// models are rebuilt (`a2rl projections rebuild`), `a2rl serve` is started, and headless Chromium
// opens `#/runs/<id>` afresh LOADS times per run, measuring from navigation start:
// - the run header's state shown ([data-testid=run-state] with a known state),
// - the first events page shown ([data-testid=events-list] has rows),
// - every API request the page makes (to its response's end; SSE streams excepted).
// References: a raw GET of one 50-event page, and the same page load for the 100-event run (ratio).
// Goal: the run page (header and first events) p99 ≤ 1000 ms.

const EVENTS = Number(process.env.A2RL_BENCH_DASHBOARD_EVENTS ?? 100_000);
const SMALL_EVENTS = 100;
const LOADS = Number(process.env.A2RL_BENCH_DASHBOARD_LOADS ?? 5);
const SUBMIT_EVERY = 2000;
const CHROMIUM = '/usr/bin/chromium';
const AT = '2026-01-01T00:00:00.000Z';
const GOAL_MS = 1000;

const exec = promisify(execFile);
const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/cli.js');
const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

function quantile(samples: number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * q) - 1))];
}

async function putBlob(store: ArtifactStore, text: string): Promise<BlobRef> {
  const bytes = Buffer.from(text);
  const ref = { sha256: sha256(bytes), size: bytes.length };
  return { ...ref, key: (await store.put(bytes, ref)).key };
}

/** Blobs the run's events name: output chunks, log files and revisions of the training script. */
interface Blobs {
  outputs: BlobRef[];
  logs: BlobRef[];
  scripts: BlobRef[];
}

const logText = (i: number) => Array.from({ length: 30 }, (_, l) => `step ${i * 30 + l}: loss ${(1 / (i + l + 1)).toFixed(5)} lr 2e-5`).join('\n');
const scriptText = (v: number) =>
  ['import torch', 'from data import load', '', `LR = ${(2e-5 * (1 + (v % 7))).toExponential(1)}`, `STEPS = ${1000 + v * 10}`, '', 'def main():', ...Array.from({ length: 50 }, (_, l) => `    step_${l}(LR, STEPS)${l === v % 50 ? `  # revision ${v}` : ''}`), '', 'main()'].join('\n');

async function putBlobs(store: ArtifactStore): Promise<Blobs> {
  const blobs: Blobs = { outputs: [], logs: [], scripts: [] };
  for (let i = 0; i < 500; i++) blobs.outputs.push(await putBlob(store, logText(i)));
  for (let i = 0; i < 500; i++) blobs.logs.push(await putBlob(store, `${logText(i)}\n${logText(i + 1)}`));
  for (let v = 0; v < 200; v++) blobs.scripts.push(await putBlob(store, scriptText(v)));
  return blobs;
}

/** Writes a completed run of about `events` events; returns how many it has. */
async function writeRun(store: SqliteEventStore, blobs: Blobs, key: SigningKey, runId: string, events: number): Promise<number> {
  const w = new SignedRunWriter(store, runId, key, { headEvery: DEFAULT_HEAD_EVERY_EVENTS, batch: 5000 });
  await w.add('RunScheduled', { task: 'ref-arith', agent: 'bench', baseModel: 'arith-cue-base', budgetSeconds: 43_200, seed: 0, mode: 'free' });
  await w.add('WorkspacePrepared', { workspace: '/ws', sandbox: 'none', mounts: [], dataManifest: [] });
  await w.add('BaselineEvaluated', { score: 20, cached: true });
  await w.add('AgentStarted', { command: 'bash start.sh' });
  const body = events - 6 - Math.ceil(events / (DEFAULT_HEAD_EVERY_EVENTS + 1));
  let pid = 1000;
  let script = 0;
  let submissions = 0;
  let best = 0;
  for (let i = 0; i < body; i++) {
    if (i % SUBMIT_EVERY === SUBMIT_EVERY - 2) {
      const submissionId = `sub-${++submissions}`;
      await w.add('SubmissionReceived', { submissionId, modelPath: `/ws/checkpoints/${submissions}`, manifest: [{ path: 'model.safetensors', sha256: blobs.scripts[script % 200].sha256, size: 1 << 20 }] });
      continue;
    }
    if (i % SUBMIT_EVERY === SUBMIT_EVERY - 1 && submissions) {
      const score = Math.min(99, 20 + submissions * 1.3 + (submissions % 3));
      best = Math.max(best, score);
      await w.add('SubmissionGraded', { submissionId: `sub-${submissions}`, score, improvement: score - 20, details: { correct: Math.round(score * 10), total: 1000 } });
      continue;
    }
    const r = i % 10;
    if (r === 5) {
      const log = blobs.logs[i % blobs.logs.length];
      await w.add('FileChanged', { path: `logs/train-${i % 8}.log`, op: 'modify', ...log, previousSha256: blobs.logs[(i + 1) % blobs.logs.length].sha256, observedAt: AT });
    } else if (r === 6 && i % 500 === 6) {
      const previous = blobs.scripts[script % 200];
      const next = blobs.scripts[++script % 200];
      await w.add('FileChanged', { path: 'code/train.py', op: 'modify', ...next, previousSha256: previous.sha256, observedAt: AT });
    } else if (r === 7) {
      await w.add('ProcessStarted', { pid: ++pid, ppid: 999, argv: ['python', 'code/train.py', '--steps', String(pid)], cwd: '/ws', executable: '/usr/bin/python3', observedAt: AT });
    } else if (r === 8) {
      await w.add('ProcessExited', { pid, exitCode: 0, durationMs: 120 + (pid % 400), cpuMs: 80, peakRssKb: 340_000, observedAt: AT });
    } else {
      await w.add('AgentOutput', { stream: r === 4 ? 'stderr' : 'stdout', chunk: blobs.outputs[i % blobs.outputs.length], observedAt: AT });
    }
  }
  await w.add('AgentExited', { exitCode: 0, reason: 'completed', observedAt: AT });
  await w.add('RunCompleted', { submissions, ...(submissions ? { best } : {}) });
  await w.seal();
  return Number(await store.streamRevision(streamName(runId))) + 1;
}

/** `a2rl serve` (the built CLI) on a free loopback port, once GET /health answers. */
async function serve(home: string): Promise<{ url: string; child: ChildProcess; output: () => string }> {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, 'serve'], { env: { ...process.env, A2RL_HOME: home, A2RL_HTTP_HOST: '127.0.0.1', A2RL_HTTP_PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`a2rl serve exited ${child.exitCode}: ${out.slice(-1000)}`);
    try {
      if ((await fetch(`${url}/health`)).ok) return { url, child, output: () => out };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  child.kill('SIGKILL');
  throw new Error(`a2rl serve did not answer within 90 s: ${out.slice(-1000)}`);
}

/** Records, from navigation start, when the header's state and the first events are first shown. */
const MARKS_SCRIPT = `(() => {
  const marks = (window.__marks = {});
  const check = () => {
    const now = performance.now();
    const state = document.querySelector('[data-testid=run-state]');
    if (marks.state === undefined && state && state.dataset.state && state.dataset.state !== 'unknown') marks.state = now;
    if (marks.events === undefined && document.querySelector('[data-testid=events-list] li')) marks.events = now;
    if (marks.state !== undefined && marks.events !== undefined) observer.disconnect();
  };
  const observer = new MutationObserver(check);
  document.addEventListener('DOMContentLoaded', () => { observer.observe(document.body, { childList: true, subtree: true, attributes: true }); check(); });
})()`;

interface Load {
  stateMs: number;
  eventsMs: number;
  pageMs: number;
  /** API path (query left out) → ms from request start to response end. */
  requests: Map<string, number>;
}

/** Opens `#/runs/<id>` in a fresh browser context and waits for the header, the events and every API answer. */
async function loadRunPage(browser: Browser, url: string, runId: string): Promise<Load> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(120_000);
    await page.addInitScript(MARKS_SCRIPT);
    const requests = new Map<string, number>();
    let pending = 0;
    const api = (u: string) => {
      const p = new URL(u).pathname;
      return p.startsWith('/runs') || p.startsWith('/auth') || p.startsWith('/campaigns') || p.startsWith('/keys') ? p : null;
    };
    const sse = (u: string) => /\/live$/.test(new URL(u).pathname);
    page.on('request', (r) => void (api(r.url()) && !sse(r.url()) && pending++));
    const done = (r: import('playwright-core').Request) => {
      const p = api(r.url());
      if (!p || sse(r.url())) return;
      pending--;
      const key = `${r.method()} ${p}${new URL(r.url()).search.includes('format=json') && p.endsWith('/report') ? '?format=json' : ''}`;
      requests.set(key, Math.max(requests.get(key) ?? 0, r.timing().responseEnd));
    };
    page.on('requestfinished', done);
    page.on('requestfailed', done);
    await page.goto(`${url}/#/runs/${encodeURIComponent(runId)}`);
    const marks = (await (await page.waitForFunction('window.__marks && window.__marks.state !== undefined && window.__marks.events !== undefined && window.__marks', undefined, { polling: 50 })).jsonValue()) as { state: number; events: number };
    const deadline = Date.now() + 120_000;
    while (pending > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    return { stateMs: round(marks.state), eventsMs: round(marks.events), pageMs: round(Math.max(marks.state, marks.events)), requests };
  } finally {
    await context.close();
  }
}

interface PageFigures {
  pageP50: number;
  pageP99: number;
  stateP99: number;
  eventsP99: number;
  /** API request → its slowest time over the loads. */
  requests: Map<string, number>;
}

async function measure(browser: Browser, url: string, runId: string): Promise<PageFigures> {
  await loadRunPage(browser, url, runId); // warm-up: the server's first read of the run, the browser's first start
  const loads: Load[] = [];
  for (let i = 0; i < LOADS; i++) loads.push(await loadRunPage(browser, url, runId));
  const requests = new Map<string, number>();
  for (const l of loads) for (const [k, ms] of l.requests) requests.set(k, Math.max(requests.get(k) ?? 0, round(ms)));
  return {
    pageP50: quantile(loads.map((l) => l.pageMs), 0.5),
    pageP99: quantile(loads.map((l) => l.pageMs), 0.99),
    stateP99: quantile(loads.map((l) => l.stateMs), 0.99),
    eventsP99: quantile(loads.map((l) => l.eventsMs), 0.99),
    requests,
  };
}

/** p50 of a raw GET of the run's first 50 events (what the events list asks for first). */
async function rawPageP50(url: string, runId: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    const res = await fetch(`${url}/runs/${encodeURIComponent(runId)}/events?format=json&after_seq=-1&limit=50`);
    if (((await res.json()) as unknown[]).length !== 50) throw new Error('the events page is not 50 events');
    times.push(performance.now() - t);
  }
  return round(quantile(times, 0.5));
}

export async function dashboardBench(): Promise<void> {
  if (!existsSync(CHROMIUM)) {
    console.log(`no Chromium at ${CHROMIUM} (apt-get install chromium): the dashboard bench is skipped`);
    console.log(JSON.stringify({ bench: 'dashboard', skipped: `no Chromium at ${CHROMIUM}` }));
    return;
  }
  const home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-dashboard-'));
  let server: Awaited<ReturnType<typeof serve>> | undefined;
  let browser: Browser | undefined;
  try {
    const store = await SqliteEventStore.open(path.join(home, 'ledger.db'));
    const artifacts = await FsArtifactStore.open(path.join(home, 'artifacts'));
    const key = initSigningKey(home);
    let t = performance.now();
    const blobs = await putBlobs(artifacts);
    const big = 'bench-dashboard-large';
    const small = 'bench-dashboard-small';
    const events = await writeRun(store, blobs, key, big, EVENTS);
    const smallEvents = await writeRun(store, blobs, key, small, SMALL_EVENTS);
    await store.close();
    await artifacts.close();
    console.log(`runs written: ${events} and ${smallEvents} events in ${round((performance.now() - t) / 1000, 2)} s`);

    t = performance.now();
    await exec(process.execPath, [CLI, 'projections', 'rebuild'], { env: { ...process.env, A2RL_HOME: home }, maxBuffer: 16 << 20 });
    console.log(`read models rebuilt (a2rl projections rebuild): ${round((performance.now() - t) / 1000, 2)} s`);

    server = await serve(home);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-default-apps', '--no-first-run'] });

    const raw = await rawPageP50(server.url, big);
    console.log(`raw GET of the first 50-event page of the ${events}-event run: p50 ${raw} ms`);
    const smallFig = await measure(browser, server.url, small);
    console.log(`run page of the ${smallEvents}-event run over ${LOADS} loads: p50 ${smallFig.pageP50} ms, p99 ${smallFig.pageP99} ms`);
    const fig = await measure(browser, server.url, big);
    console.log(`run page of the ${events}-event run over ${LOADS} loads: p50 ${fig.pageP50} ms, p99 ${fig.pageP99} ms (header state p99 ${fig.stateP99} ms, first events p99 ${fig.eventsP99} ms; goal ≤ ${GOAL_MS} ms)`);
    const slowest = [...fig.requests].sort((a, b) => b[1] - a[1]);
    console.log('its API requests, slowest over the loads (request start to response end):');
    for (const [req, ms] of slowest) console.log(`  ${ms} ms  ${req}`);

    console.log(JSON.stringify({
      bench: 'dashboard', events,
      run_page_ms_p50: fig.pageP50, run_page_ms_p99: fig.pageP99,
      state_ms_p99: fig.stateP99, first_events_ms_p99: fig.eventsP99,
      slowest_request: slowest[0]?.[0] ?? null, slowest_request_ms: slowest[0]?.[1] ?? null,
      raw_events_page_ms_p50: raw,
      small_run_events: smallEvents, small_run_page_ms_p50: smallFig.pageP50,
      ratio_vs_small_run: round(fig.pageP50 / smallFig.pageP50, 2),
      goal_ms: GOAL_MS, ok: fig.pageP99 <= GOAL_MS,
    }));
  } finally {
    await browser?.close();
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await new Promise((r) => server!.child.once('exit', r));
    }
    rmSync(home, { recursive: true, force: true });
  }
}
