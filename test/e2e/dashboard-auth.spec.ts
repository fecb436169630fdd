import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { runA2rl } from './a2rl-cli.js';
import { describeWithBrowser, eventually, launchBrowser, screenshot, type Server, startServer } from './testing/browser.js';

// Who may look: a server that listens beyond loopback needs a credential. Without one it answers
// 401 and no data; a viewer token reads but cannot export (403); an operator's export succeeds and is
// itself recorded in the access stream (`a2rl access`, GET /access). Then the same through the
// dashboard in Chromium: sign in with a token, a viewer's export refused, an operator's downloaded.

jest.setTimeout(180_000);

interface AccessEvent {
  type: string;
  seq: number;
  data: { actor: { kind: string; name: string; role: string }; action: string; target: { runId?: string } | null; outcome: string };
}

let home: string;
let server: Server;
let runId: string;
let viewer: string;
let operator: string;

const env = (extra: Record<string, string> = {}) => ({ ...process.env, A2RL_HOME: home, ...extra });
const a2rl = (args: string[]) => runA2rl(args, { env: env() });

/** `a2rl tokens create`: the secret is printed once ({…, secret} with --json). */
async function createToken(name: string, role: 'viewer' | 'operator'): Promise<string> {
  const r = await a2rl(['tokens', 'create', '--name', name, '--role', role, '--json']);
  if (r.code !== 0) throw new Error(`a2rl tokens create failed (${r.code}): ${r.stderr}`);
  return (JSON.parse(r.stdout.trim().split('\n').pop()!) as { secret: string }).secret;
}

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/** The access stream as `a2rl access --json` prints it: one event per line. */
async function accessLog(): Promise<AccessEvent[]> {
  const r = await a2rl(['access', '--json']);
  expect(r.code).toBe(0);
  return r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as AccessEvent);
}

const isExportOf = (id: string, name: string) => (e: AccessEvent) =>
  e.type === 'AccessRecorded' && e.data.action === 'export' && e.data.target?.runId === id && e.data.actor.name === name && e.data.outcome === 'ok';

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-dashboard-auth-'));
  const r = await a2rl(['run', '--json', '--task', 'ref-arith', '--agent-command', 'true', '--budget', '30s']);
  if (r.code !== 0) throw new Error(`a2rl run failed (${r.code}): ${r.stderr.slice(-2000)}`);
  runId = (JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
  viewer = await createToken('vera', 'viewer');
  operator = await createToken('otto', 'operator');
  // Every address of this machine: beyond loopback, so a credential is required without A2RL_AUTH.
  server = await startServer(env(), { host: '0.0.0.0' });
}, 300_000);

afterAll(async () => {
  await server?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('a2rl serve bound beyond loopback', () => {
  it('refuses the API without a credential: 401 and no data', async () => {
    for (const route of ['/runs', `/runs/${runId}`, `/runs/${runId}/events?format=json`, `/runs/${runId}/audit`, `/runs/${runId}/replay/tree?at=0`, '/scoreboard?format=json', '/access']) {
      const res = await fetch(`${server.url}${route}`);
      const body = await res.text();
      expect({ route, status: res.status }).toEqual({ route, status: 401 });
      expect(body).not.toContain(runId);
    }
    const wrong = await fetch(`${server.url}/runs`, { headers: bearer('a2rl_not-a-token') });
    expect(wrong.status).toBe(401);
    expect(await wrong.text()).not.toContain(runId);
  });

  it('still serves health, who-am-I and the dashboard itself without one', async () => {
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
    await expect((await fetch(`${server.url}/auth/me`)).json()).resolves.toMatchObject({ required: true });
    const page = await fetch(`${server.url}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<div id="app"');
  });

  it('lets a viewer token read but not export (403, no bundle)', async () => {
    const runs = await fetch(`${server.url}/runs`, { headers: bearer(viewer) });
    expect(runs.status).toBe(200);
    expect(await runs.text()).toContain(runId);
    await expect((await fetch(`${server.url}/auth/me`, { headers: bearer(viewer) })).json()).resolves.toMatchObject({ identity: { name: 'vera', role: 'viewer' } });

    const exported = await fetch(`${server.url}/runs/${runId}/export`, { method: 'POST', headers: bearer(viewer) });
    expect(exported.status).toBe(403);
    expect(exported.headers.get('content-type')).not.toContain('gzip');
    expect((await fetch(`${server.url}/access`, { headers: bearer(viewer) })).status).toBe(403);
  });

  it("records an operator's export in the access stream, read by `a2rl access` and GET /access", async () => {
    const exported = await fetch(`${server.url}/runs/${runId}/export`, { method: 'POST', headers: bearer(operator) });
    expect(exported.status).toBe(200);
    expect(exported.headers.get('content-type')).toContain('gzip');
    const bundle = Buffer.from(await exported.arrayBuffer());
    expect([...bundle.subarray(0, 2)]).toEqual([0x1f, 0x8b]);

    const logged = await eventually('the export in `a2rl access`', async () => (await accessLog()).find(isExportOf(runId, 'otto')));
    expect(logged.data.actor).toMatchObject({ name: 'otto', role: 'operator' });

    const res = await fetch(`${server.url}/access?limit=1000`, { headers: bearer(operator) });
    expect(res.status).toBe(200);
    const page = (await res.json()) as AccessEvent[] | { items: AccessEvent[] };
    const items = Array.isArray(page) ? page : page.items;
    expect(items.some(isExportOf(runId, 'otto'))).toBe(true);
  });
});

describe('a2rl serve with A2RL_AUTH=required on loopback', () => {
  it('refuses the API without a credential too', async () => {
    const local = await startServer(env({ A2RL_AUTH: 'required' }));
    try {
      const res = await fetch(`${local.url}/runs`);
      expect(res.status).toBe(401);
      expect(await res.text()).not.toContain(runId);
      expect((await fetch(`${local.url}/runs`, { headers: bearer(viewer) })).status).toBe(200);
    } finally {
      await local.stop();
    }
  });
});

describeWithBrowser('signing in to the dashboard in Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  /** A fresh browser context (no cookie) signed in with `token` from the page that asked for it. */
  async function signedIn(token: string, route: string) {
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(90_000); // a busy machine: waits are deadlines, not assertions
    const page = await context.newPage();
    await page.goto(`${server.url}/#${route}`);
    const field = page.getByLabel('API token');
    await field.waitFor(); // the page asked the API, got 401 and sent the user here
    await screenshot(page, 'sign-in-required');
    await field.fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await eventually(`the way back to ${route}`, async () => (new URL(page.url()).hash.startsWith(`#${route}`) ? true : undefined));
    return { context, page };
  }

  it('a viewer signs in, reads the run, and is told their role cannot export', async () => {
    const { context, page } = await signedIn(viewer, `/runs/${runId}/audit`);
    try {
      await page.locator('[data-testid="audit-fingerprint"]').waitFor();
      await page.locator('[data-testid="audit-export"]').click();
      await eventually('the refusal', async () => ((await page.locator('[data-testid="audit-export-status"]').textContent())?.includes('your role cannot export') ? true : undefined));
      await page.goto(`${server.url}/#/sign-in`);
      await eventually('who is signed in', async () => ((await page.locator('[data-testid="sign-in-identity"]').textContent())?.includes('vera (viewer)') ? true : undefined));
    } finally {
      await context.close();
    }
  });

  it("an operator's export downloads the bundle", async () => {
    const { context, page } = await signedIn(operator, `/runs/${runId}/audit`);
    try {
      const [download] = await Promise.all([page.waitForEvent('download'), page.locator('[data-testid="audit-export"]').click()]);
      const file = await download.path();
      expect([...readFileSync(file).subarray(0, 2)]).toEqual([0x1f, 0x8b]);
      expect(download.suggestedFilename()).toMatch(/\.tar\.gz$/);
    } finally {
      await context.close();
    }
  });
});
