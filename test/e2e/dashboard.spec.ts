import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { A2RL_BIN, runA2rl } from './a2rl-cli.js';
import { describeWithBrowser, eventually, launchBrowser, screenshot, type Server, startServer, tabStops, unreached, type FocusStop } from './testing/browser.js';

// The dashboard in Chromium against `a2rl serve` on a home holding the demo's three runs: what a user
// sees on each page, live updates without a reload, replay, and keyboard access. A screenshot of each
// page is kept under test-artifacts/dashboard/.

jest.setTimeout(180_000);

interface Summary {
  runId: string;
  task: string;
  submissions: number;
  state: string;
}

interface Ev {
  type: string;
  seq: number;
  data: Record<string, unknown>;
}

let home: string;
let server: Server;
let browser: Browser;
let page: Page;
let demo: Summary[];
const children: ChildProcess[] = [];

const env = () => ({ ...process.env, A2RL_HOME: home });
const a2rl = (args: string[]) => runA2rl(args, { env: env() });

async function events(runId: string): Promise<Ev[]> {
  return (await a2rl(['events', runId, '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
}

/** Loads the dashboard afresh at a hash route in the suite's page (a hash change alone would keep the last test's page state). */
async function open(route: string): Promise<void> {
  await page.goto('about:blank');
  await page.goto(`${server.url}/#${route}`);
}

describeWithBrowser('the dashboard in Chromium', () => {
  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-dashboard-'));
    const r = await a2rl(['demo', '--json']);
    if (r.code !== 0) throw new Error(`a2rl demo failed (${r.code}): ${r.stderr.slice(-2000)}`);
    demo = r.stdout.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Summary);
    server = await startServer(env());
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(90_000); // a busy machine: waits are deadlines, not assertions
  }, 300_000);

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await browser?.close();
    await server?.stop();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it("the runs page lists the demo's runs with their task and state", async () => {
    await open('/runs');
    for (const run of demo) {
      const row = page.getByRole('row').filter({ hasText: run.runId });
      await row.first().waitFor();
      await expect(row.first().textContent()).resolves.toContain(run.task);
      await expect(row.first().textContent()).resolves.toContain('completed');
    }
    await screenshot(page, 'runs');
  });

  it('a run page shows its score chart, submission diffs and events', async () => {
    const run = demo[0]!;
    await open(`/runs/${run.runId}`);
    await page.getByRole('heading', { name: new RegExp(run.runId) }).first().waitFor();
    // The score trajectory: an inline SVG with a point per graded submission.
    const chart = page.locator('svg[data-testid="score-chart"]');
    await chart.waitFor();
    await eventually('a point per submission', async () => ((await chart.locator('circle').count()) >= run.submissions ? true : undefined));
    // Each submission's code diff, collapsed: opened, it shows the training script's changed lines.
    const diffs = page.locator('[data-testid="submission-diff"]');
    await diffs.first().waitFor();
    expect(await diffs.count()).toBe(run.submissions);
    await diffs.first().locator('summary').first().click();
    const file = diffs.first().locator('details.file-diff').filter({ hasText: 'code/' }).first();
    await file.locator('summary').click();
    await file.locator('.diff-line.add').first().waitFor();
    // The run's events, to the end.
    await page.locator('[data-testid="events-list"]').getByText('RunCompleted').first().waitFor();
    await screenshot(page, 'run');
  });

  it('a run started while the runs page is open appears, and turns completed, without a reload', async () => {
    await open('/runs');
    await page.getByRole('row').filter({ hasText: demo[0]!.runId }).first().waitFor();
    await page.evaluate('window.notReloaded = true'); // gone if the page reloads

    // The agent waits for a file the test writes into its workspace, so the run is still going while
    // the page is checked, however slow the machine is.
    const child = spawn(process.execPath, [A2RL_BIN, 'run', '--json', '--task', 'ref-arith', '--budget', '10m', '--grace', '1s', '--agent-command', 'until [ -e code/go ]; do sleep 0.2; done'], { env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let stdout = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.resume();
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

    const known = new Set(demo.map((r) => r.runId));
    const runId = await eventually('the new run to appear on the page', async () => {
      const texts = await page.getByRole('row').allTextContents();
      const row = texts.find((t) => t.includes('ref-arith') && ![...known].some((id) => t.includes(id)) && /ref-arith-\d{14}-[0-9a-f]+/.test(t));
      return row?.match(/ref-arith-\d{14}-[0-9a-f]+/)?.[0];
    }, 180_000);
    const row = page.getByRole('row').filter({ hasText: runId });
    await eventually('the row to say running', async () => ((await row.first().textContent())?.includes('running') ? true : undefined));

    writeFileSync(path.join(home, 'workspaces', runId, 'code', 'go'), '');
    expect(await exited).toBe(0);
    expect(JSON.parse(stdout.trim().split('\n').pop()!)).toMatchObject({ runId, state: 'completed' });
    await eventually('the row to say completed', async () => ((await row.first().textContent())?.includes('completed') ? true : undefined));
    expect(await page.evaluate('window.notReloaded')).toBe(true);
  }, 300_000);

  it("the replay scrubber shows a file's content at two points of the run", async () => {
    const run = demo[0]!;
    // The training script as the agent wrote it, then as it revised it: two different contents.
    const changes = (await events(run.runId)).filter((e) => e.type === 'FileChanged' && e.data.path === 'code/train.mjs');
    expect(changes.length).toBeGreaterThanOrEqual(2);
    const [first, second] = [changes[0]!, changes.at(-1)!];
    const blob = (e: Ev) => readFileSync(path.join(home, 'artifacts', String(e.data.key)), 'utf8');
    expect(blob(first)).not.toBe(blob(second));

    await open(`/runs/${run.runId}/replay`);
    const scrubber = page.getByRole('slider', { name: 'Event' });
    await scrubber.waitFor();
    await scrubber.fill(String(first.seq));
    await page.locator('[data-testid="replay-tree"]').getByRole('button', { name: 'code/train.mjs' }).click();
    const file = page.locator('[data-testid="replay-file"]');
    await eventually('the first revision to show', async () => ((await file.textContent()) === blob(first) ? true : undefined));

    await scrubber.fill(String(second.seq));
    await eventually('the last revision to show', async () => ((await file.textContent()) === blob(second) ? true : undefined));
    await expect(page.locator('[data-testid="replay-diff"]').innerText()).resolves.toMatch(/^[+-][^+-]/m);
    await screenshot(page, 'replay');

    // The buttons step one event back and forth.
    await page.getByRole('button', { name: /previous/i }).click();
    await eventually('the scrubber to step back', async () => ((await scrubber.inputValue()) === String(second.seq - 1) ? true : undefined));
  });

  it("the audit page shows the run's signed heads and key fingerprint, and verifies on request", async () => {
    const run = demo[0]!;
    await open(`/runs/${run.runId}/audit`);
    // The fingerprint (sha256 of the public key) starts with the key id `a2rl keys show` prints.
    const keyId = /key id: ([0-9a-f]{16})/.exec((await a2rl(['keys', 'show'])).stdout)![1]!;
    await eventually('the fingerprint', async () => (new RegExp(`${keyId}[0-9a-f]{48}`).test((await page.locator('[data-testid="audit-fingerprint"]').textContent()) ?? '') ? true : undefined));
    await page.locator('[data-testid="audit-verify"]').click();
    await eventually('a verified status', async () => (/verified/i.test((await page.locator('[data-testid="audit-status"]').textContent()) ?? '') ? true : undefined));
    expect(await page.locator('[data-testid="audit-status"]').textContent()).not.toMatch(/fail|invalid/i);
    await screenshot(page, 'audit');
  });

  it('the scoreboard, campaigns and sign-in pages render (screenshots kept)', async () => {
    for (const [route, name] of [['/scoreboard', 'scoreboard'], ['/campaigns', 'campaigns'], ['/sign-in', 'sign-in']] as const) {
      await open(route);
      await page.getByRole('heading').first().waitFor();
      await screenshot(page, name);
    }
    await open('/scoreboard');
    await page.getByText('ref-household').first().waitFor();
    // The headline figures: a dot per row's improvement (one per demo task), a bar per row's failure classes.
    await page.locator('[data-testid="scoreboard-improvement-figure"] circle').nth(demo.length - 1).waitFor();
    await page.locator('[data-testid="scoreboard-failure-figure"] rect').first().waitFor();
  });

  it('every control on the runs page is reachable with Tab and has an accessible name', async () => {
    await open('/runs');
    await page.getByRole('row').filter({ hasText: demo[0]!.runId }).first().waitFor();
    const stops = await tabStops(page);
    expect(stops.length).toBeGreaterThan(demo.length); // at least a link per run, and the filters
    expect(stops.filter((s) => /^(textbox|combobox|searchbox|spinbutton)$/.test(s.role)).length).toBeGreaterThan(0); // the filters
    expect(await unreached(page)).toEqual([]);
    expect(stops.filter((s) => s.name === '')).toEqual([]);
  });

  it('so is every control on the run, replay, audit, sign-in, scoreboard and campaigns pages', async () => {
    const run = demo[0]!;
    const pages: [string, string][] = [
      [`/runs/${run.runId}`, '[data-testid="events-list"]'],
      [`/runs/${run.runId}/replay?path=code/train.mjs`, '[data-testid="replay-file"]'],
      [`/runs/${run.runId}/audit`, '[data-testid="audit-fingerprint"]'],
      ['/sign-in', '#sign-in-token'],
      ['/scoreboard', 'table'],
      ['/campaigns', 'h1'],
    ];
    const problems: Record<string, { unreached: string[]; unnamed: FocusStop[] }> = {};
    for (const [route, ready] of pages) {
      await open(route);
      await page.locator(ready).first().waitFor();
      // The run page asks for its report after its first view: its links (the baseline's among them) come then.
      await eventually('the run report', async () => ((await page.getByText('Loading the run report…').count()) === 0 ? true : undefined));
      const stops = await tabStops(page, 2000);
      const found = { unreached: await unreached(page), unnamed: stops.filter((s) => s.name === '') };
      if (found.unreached.length || found.unnamed.length) problems[route] = found;
    }
    expect(problems).toEqual({});
  });
});
