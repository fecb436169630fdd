import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { projectCliBin } from '../../modules/agents/agent-registry.js';
import { startFakeOpenAI } from '../servers/fake-llm/fake-openai.js';
import type { FakeLlmServer } from '../servers/fake-llm/types.js';
import { A2RL_BIN, agentStartedIn, runA2rl, sandboxedAsRoot } from './a2rl-cli.js';
import { describeWithBrowser, eventually, launchBrowser, screenshot, type Server, startServer } from './testing/browser.js';

// An LLM agent's run in Chromium while it runs: the openhands adapter starts an `openhands` of ours
// (on PATH) that prints to stdout and stderr, waits for a file the test writes, calls its model once
// through the run's gateway (a scripted OpenAI upstream), prints again, and waits to be let
// go. The run page, opened before the first model call, shows the call, the counters and the output
// as they are recorded, without a reload; the call's request and response and an output chunk open
// from the event drawer, readable and inert. Screenshots under test-artifacts/dashboard/.

jest.setTimeout(300_000);

const KEY = 'sk-upstream-dashboard-0123456789';
/** The HTML report of the run as Chromium shows it (kept outside the repository). */
const REPORT_SCREENSHOT = path.join(os.tmpdir(), 'a2rl-report-llm-run.png');
// Only the adapter's llm.env reaches the agent: the prompt is written into the script.
const PROMPT = `Post-train the model. ${'Read the rules carefully. '.repeat(40)}THE-END-OF-THE-PROMPT`;

const AGENT = String.raw`#!/usr/bin/env node
const fs = require('node:fs');
const http = require('node:http');
const base = new URL(process.env.LLM_BASE_URL);
const PROMPT = ${JSON.stringify(PROMPT)};
const wait = (file) => new Promise((resolve) => { const t = setInterval(() => { if (fs.existsSync(file)) { clearInterval(t); resolve(); } }, 200); });
async function main() {
  console.log('hello from the agent <img src=x onerror="window.pwned=1"> \u001b[31mred\u001b[0m');
  console.error('a warning on stderr');
  await wait('code/go');
  const body = JSON.stringify({ model: process.env.LLM_MODEL.replace(/^openai\//, ''), max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] });
  const status = await new Promise((resolve) => {
    const req = http.request({ host: base.hostname, port: base.port, method: 'POST', path: base.pathname.replace(/\/$/, '') + '/chat/completions', agent: false,
      headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.LLM_API_KEY } }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
    req.on('error', (e) => resolve(String(e)));
    req.end(body);
  });
  console.log('called the model: ' + status);
  await wait('code/done');
}
main().catch((err) => { console.error(err); process.exit(1); });
`;

// The scripted `openhands` must be the one found: a pinned OpenHands would come first.
const pinned = existsSync(path.join(projectCliBin(), 'openhands'));
const describeRun = sandboxedAsRoot && !pinned ? describeWithBrowser : describe.skip;

let home: string;
let bin: string;
let fake: FakeLlmServer;
let server: Server;
let browser: Browser;
let page: Page;
let child: ChildProcess | undefined;

// A2RL_CACHE, empty: the machine's pinned Python agent systems (a real OpenHands) would come first too.
const env = () => ({ ...process.env, A2RL_HOME: home, A2RL_CACHE: path.join(home, 'no-cache'), PATH: `${bin}:${process.env.PATH}`, A2RL_LLM_OPENAI_URL: `${fake.url}/v1`, A2RL_LLM_OPENAI_KEY: KEY });

describeRun("an LLM agent's run page in Chromium, live", () => {
  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-dashboard-agent-'));
    bin = mkdtempSync(path.join(os.tmpdir(), 'a2rl-dashboard-openhands-'));
    chmodSync(bin, 0o755);
    writeFileSync(path.join(bin, 'openhands'), AGENT, { mode: 0o755 });
    fake = await startFakeOpenAI({ script: [], expectKey: KEY });
    mkdirSync(home, { recursive: true });
    server = await startServer(env());
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(90_000);
  }, 300_000);

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await browser?.close();
    await server?.stop();
    await fake?.close();
    if (home) rmSync(home, { recursive: true, force: true });
    if (bin) rmSync(bin, { recursive: true, force: true });
  });

  it('shows the model call, its counters and the output as they are recorded, and opens the blobs readably', async () => {
    child = spawn(process.execPath, [A2RL_BIN, 'run', '--json', '--task', 'ref-arith', '--agent', 'openhands', '--driver', 'gpt-5', '--budget', '10m', '--grace', '1s'], { env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child!.once('exit', (code) => resolve(code)));
    const runId = await eventually('the run to be scheduled', async () => /run (\S+) scheduled/.exec(stderr)?.[1], 180_000);
    await agentStartedIn(home, runId, Date.now() + 180_000);
    const workspace = path.join(home, 'workspaces', runId);

    // Opened before the first model call.
    await page.goto(`${server.url}/#/runs/${runId}`);
    await page.getByRole('heading', { name: new RegExp(runId) }).first().waitFor();
    await page.locator('[data-testid="transcript"]').waitFor();
    await page.getByText('No model calls recorded for this run').waitFor();
    expect(fake.calls.filter((c) => c.path === '/v1/chat/completions')).toEqual([]);
    await page.evaluate('window.notReloaded = true');

    writeFileSync(path.join(workspace, 'code', 'go'), '');
    // The call appears, without a reload, with its counters.
    const call = page.locator('[data-testid="transcript"] article.call');
    await call.first().waitFor({ timeout: 180_000 });
    await eventually('the counters to count the call', async () => (/calls\s*1\b/.test((await page.locator('[data-testid="transcript"] dl').first().innerText()).replace(/\n/g, ' ')) ? true : undefined));
    // The prompt is cut, and shown whole on request.
    await expect(call.first().innerText()).resolves.not.toContain('THE-END-OF-THE-PROMPT');
    await call.first().getByRole('button', { name: /Show all of the user text/ }).click();
    await call.first().getByText(/THE-END-OF-THE-PROMPT/).waitFor();
    // The model calls lane of the timeline.
    await eventually('a model call on the timeline', async () => ((await page.locator('[data-testid="timeline-chart"] text', { hasText: 'model-calls' }).count()) ? true : undefined), 120_000);
    await screenshot(page, 'run-llm-transcript');

    // The output tab: both streams, then the line printed after the call, live.
    await page.getByTestId('tab-output').click();
    const output = page.locator('[data-testid="agent-output"]');
    await output.waitFor();
    await eventually('the output after the call', async () => ((await output.innerText()).includes('called the model: 200') ? true : undefined), 180_000);
    const text = await output.innerText();
    expect(text).toContain('hello from the agent <img src=x onerror="window.pwned=1">');
    expect(text).toContain('\\x1b[31mred');
    expect(text).toContain('a warning on stderr');
    expect(await output.locator('img').count()).toBe(0);
    expect(await page.evaluate('window.pwned')).toBeUndefined();
    await screenshot(page, 'run-llm-output');

    writeFileSync(path.join(workspace, 'code', 'done'), '');
    expect(await exited).toBe(0);
    expect(await page.evaluate('window.notReloaded')).toBe(true);

    // The call's request and response from the event drawer: pretty-printed JSON.
    const events = (await runA2rl(['events', runId, '--json'], { env: env() })).stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; seq: number });
    const callSeq = events.find((e) => e.type === 'LlmCallRecorded')!.seq;
    const outputSeq = events.find((e) => e.type === 'AgentOutput')!.seq;
    await page.goto('about:blank');
    await page.goto(`${server.url}/#/runs/${runId}?seq=${callSeq}`);
    const drawer = page.locator('[data-testid="event-drawer"]');
    await drawer.locator('[data-testid="blob-part-request"]').click();
    const blob = drawer.locator('pre.blob');
    await eventually('the request, pretty-printed', async () => ((await blob.textContent())?.includes('\n  "messages": [') ? true : undefined));
    expect(await blob.textContent()).toContain('Post-train the model.');
    expect(await blob.textContent()).not.toContain(KEY);
    await screenshot(page, 'blob-request');
    await drawer.locator('[data-testid="blob-part-response"]').click();
    await eventually('the response, pretty-printed', async () => ((await drawer.locator('pre.blob').textContent())?.includes('\n  "object": "chat.completion"') ? true : undefined));
    await screenshot(page, 'blob-response');

    // An output chunk, as text, inert.
    await page.goto('about:blank');
    await page.goto(`${server.url}/#/runs/${runId}?seq=${outputSeq}`);
    await eventually('the chunk', async () => ((await page.locator('[data-testid="event-drawer"] pre.blob').textContent())?.length ? true : undefined));
    expect(await page.locator('[data-testid="event-drawer"] img').count()).toBe(0);
    await screenshot(page, 'blob-output-chunk');
    expect(stdout.trim().split('\n').pop()).toContain(runId);

    // The HTML report in Chromium: the model calls, the transcript collapsed (its 1 KB prompt wrapped
    // when opened), the output's end; nothing runs wider than the page. Screenshot kept in /tmp.
    await page.goto('about:blank');
    await page.goto(`${server.url}/runs/${runId}/report?format=html`);
    await page.getByRole('heading', { name: 'Agent output' }).waitFor();
    await page.getByRole('heading', { name: 'Model calls' }).waitFor();
    const fits = () => page.evaluate('document.documentElement.scrollWidth <= window.innerWidth');
    expect(await fits()).toBe(true);
    const transcript = page.locator('details').filter({ hasText: 'a2rl transcript' }).first();
    await transcript.locator('summary').click();
    await transcript.getByText(/Post-train the model\. Read the rules/).first().waitFor(); // cut at 600 characters in reports
    expect(await fits()).toBe(true);
    const outputText = await page.locator('pre.text').allTextContents();
    expect(outputText.some((t) => t.includes('called the model: 200'))).toBe(true);
    expect(await page.locator('img').count()).toBe(0);
    await page.screenshot({ path: REPORT_SCREENSHOT, fullPage: true });
  }, 600_000);
});
