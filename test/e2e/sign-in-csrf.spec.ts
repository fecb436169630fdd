import { createServer, type Server as HttpServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { Browser, BrowserContext } from 'playwright-core';
import { runA2rl } from './a2rl-cli.js';
import { describeWithBrowser, launchBrowser, type Server, startServer } from './testing/browser.js';

// Login CSRF (issue 25, item 7): a page on another site posts a form to `a2rl serve`'s /auth/login
// with a token of the attacker's choosing, to sign the visitor's browser in as the attacker. In
// Chromium: the urlencoded form and the text/plain "JSON" form are refused (403) and set no cookie;
// the dashboard's own sign-in (fetch, JSON, same origin) still signs in.

jest.setTimeout(180_000);

let home: string;
let server: Server;
let attacker: HttpServer;
let attackerUrl: string;
let token: string;

const env = (extra: Record<string, string> = {}) => ({ ...process.env, A2RL_HOME: home, ...extra });

/** The attacker's page: a form that posts itself to the a2rl server as soon as it loads. */
function forgedPage(target: string, kind: string, secret: string): string {
  const form =
    kind === 'text'
      ? `<form method="POST" enctype="text/plain" action="${target}"><input name='{"token":"${secret}","x":"' value='"}'></form>`
      : `<form method="POST" action="${target}"><input name="token" value="${secret}"></form>`;
  return `<!DOCTYPE html><html><body>${form}<script>document.forms[0].submit()</script></body></html>`;
}

describeWithBrowser('a cross-site form post to /auth/login in Chromium', () => {
  let browser: Browser;

  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-sign-in-csrf-'));
    const created = await runA2rl(['tokens', 'create', '--name', 'mallory', '--role', 'operator', '--json'], { env: env() });
    if (created.code !== 0) throw new Error(`a2rl tokens create failed (${created.code}): ${created.stderr}`);
    token = (JSON.parse(created.stdout.trim().split('\n').pop()!) as { secret: string }).secret;
    server = await startServer(env({ A2RL_AUTH: 'required' }));
    // Another site: `localhost` is not the server's 127.0.0.1, so Chromium calls the post cross-site.
    attacker = createServer((req, res) => {
      const kind = new URL(req.url ?? '/', 'http://x').searchParams.get('kind') ?? 'form';
      res.writeHead(200, { 'content-type': 'text/html' }).end(forgedPage(`${server.url}/auth/login`, kind, token));
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    attackerUrl = `http://localhost:${(attacker.address() as { port: number }).port}`;
    browser = await launchBrowser();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await new Promise((resolve) => attacker?.close(resolve));
    rmSync(home, { recursive: true, force: true });
  });

  const sessionCookies = async (context: BrowserContext) => (await context.cookies(server.url)).filter((c) => c.name === 'a2rl_session');

  for (const kind of ['form', 'text']) {
    it(`refuses the ${kind === 'form' ? 'urlencoded' : 'text/plain'} form from another site: 403, no session cookie`, async () => {
      const context = await browser.newContext();
      context.setDefaultTimeout(90_000);
      try {
        const page = await context.newPage();
        const answered = page.waitForResponse((res) => res.url() === `${server.url}/auth/login` && res.request().method() === 'POST');
        await page.goto(`${attackerUrl}/?kind=${kind}`);
        const res = await answered;
        expect(res.status()).toBe(403);
        expect(await sessionCookies(context)).toEqual([]);
      } finally {
        await context.close();
      }
    });
  }

  it("the dashboard's own sign-in (JSON from its own page) still signs in", async () => {
    const context = await browser.newContext();
    context.setDefaultTimeout(90_000);
    try {
      const page = await context.newPage();
      await page.goto(`${server.url}/#/sign-in`);
      const status = await page.evaluate(async (secret) => {
        const res = await fetch('/auth/login', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token: secret }), credentials: 'same-origin' });
        return res.status;
      }, token);
      expect(status).toBe(204);
      expect(await sessionCookies(context)).toHaveLength(1);
      const me = await page.evaluate(async () => (await fetch('/auth/me')).json());
      expect(me).toMatchObject({ identity: { name: 'mallory', role: 'operator' } });
    } finally {
      await context.close();
    }
  });
});
