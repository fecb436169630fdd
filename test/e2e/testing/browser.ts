import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe } from '@jest/globals';
import { type Browser, chromium, type Page } from 'playwright-core';
import { freePort } from '../../../modules/serving/free-port.js';
import { A2RL_BIN } from '../a2rl-cli.js';

// The dashboard's end-to-end specs drive Debian's Chromium (installed by .ci/run) through
// playwright-core against `a2rl serve` started from the built CLI, each with a home of its own.

export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);

/** Screenshots are test artifacts, kept out of git (.gitignore). */
export const ARTIFACTS_DIR = path.resolve('test-artifacts/dashboard');

/**
 * `describe`, or — without Chromium — `describe.skip` with one line saying why. Skipped only then:
 * these tests drive a real browser and nothing stands in for one; `.ci/run` installs Debian's
 * chromium, so CI always runs them, and a developer machine without it still runs the rest.
 */
export function describeWithBrowser(name: string, fn: () => void): void {
  if (hasChromium) {
    describe(name, fn);
    return;
  }
  console.warn(`skipping "${name}": no Chromium at ${CHROMIUM} (apt-get install chromium; .ci/run installs it)`);
  describe.skip(name, fn);
}

/** Headless Chromium that makes no request of its own (updates, safe browsing, first-run pages). */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-default-apps', '--no-first-run'],
  });
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS_DIR, { recursive: true });
  const file = path.join(ARTIFACTS_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** A focusable element as the browser's accessibility tree names it. */
export interface FocusStop {
  tag: string;
  role: string;
  name: string;
  /** Enough to find it in a failure message: id, test id, type or text. */
  hint: string;
}

/**
 * Visible, enabled controls that a walk with tabStops() did not stop on (run it first), each as a
 * short description; those inside a closed <details> are reached once it is opened. Page script as a string: the test code has no DOM types.
 */
export function unreached(page: Page): Promise<string[]> {
  return page.evaluate(`[...document.querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]')]
    .filter((el) => !el.disabled && el.tabIndex >= 0 && el.checkVisibility({ visibilityProperty: true }))
    .filter((el) => !el.closest('details:not([open]) > :not(summary)'))
    .filter((el) => !el.dataset.tabStop)
    .map((el) => el.outerHTML.slice(0, 120))`);
}

/**
 * Presses Tab from the top of the page until focus comes back round, recording every element it
 * stops on with the role and accessible name Chromium computes (CDP Accessibility domain).
 */
export async function tabStops(page: Page, max = 400): Promise<FocusStop[]> {
  const cdp = await page.context().newCDPSession(page);
  await page.evaluate('document.activeElement?.blur(); window.getSelection()?.removeAllRanges()');
  const stops: FocusStop[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    const { result } = await cdp.send('Runtime.evaluate', { expression: 'document.activeElement' });
    if (!result.objectId) break;
    const key = (await cdp.send('Runtime.callFunctionOn', {
      objectId: result.objectId,
      functionDeclaration: `function () {
        if (this === document.body || this === document.documentElement) return '';
        if (!this.dataset.tabStop) this.dataset.tabStop = String(Math.random()).slice(2);
        return this.dataset.tabStop;
      }`,
      returnByValue: true,
    })).result.value as string;
    if (!key) {
      if (stops.length > 0) break; // off the end of the document
      continue;
    }
    if (seen.has(key)) break; // wrapped round
    seen.add(key);
    const { nodes } = await cdp.send('Accessibility.getPartialAXTree', { objectId: result.objectId, fetchRelatives: false });
    const node = nodes[0];
    const hint = (await cdp.send('Runtime.callFunctionOn', {
      objectId: result.objectId,
      functionDeclaration: `function () {
        return [this.id && '#' + this.id, this.dataset.testid && '[data-testid=' + this.dataset.testid + ']',
          this.getAttribute('type') && '[type=' + this.getAttribute('type') + ']', (this.textContent || '').trim().slice(0, 40)]
          .filter(Boolean).join(' ');
      }`,
      returnByValue: true,
    })).result.value as string;
    stops.push({
      tag: (result.className ?? result.description ?? '').replace(/^HTML|Element$/g, '').toLowerCase(),
      role: String(node?.role?.value ?? ''),
      name: String(node?.name?.value ?? '').trim(),
      hint,
    });
  }
  await cdp.detach();
  return stops;
}


export interface Server {
  url: string;
  child: ChildProcess;
  output: () => string;
  stop: () => Promise<void>;
}

/** `a2rl serve` from the built CLI, resolved once GET /health answers. */
export async function startServer(env: NodeJS.ProcessEnv, opts: { host?: string; timeoutMs?: number } = {}): Promise<Server> {
  const host = opts.host ?? '127.0.0.1';
  const port = await freePort();
  const child = spawn(process.execPath, [A2RL_BIN, 'serve'], {
    env: { ...env, A2RL_HTTP_HOST: host, A2RL_HTTP_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killer);
  };
  // A wildcard address is reached through loopback (Chromium refuses to navigate to 0.0.0.0).
  const reach = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  const url = `http://${reach.includes(':') ? `[${reach}]` : reach}:${port}`;
  const deadline = Date.now() + (opts.timeoutMs ?? 90_000);
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`a2rl serve exited (${child.exitCode ?? child.signalCode}): ${out.slice(-2000)}`);
    try {
      if ((await fetch(`${url}/health`)).ok) return { url, child, output: () => out, stop };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  await stop();
  throw new Error(`a2rl serve did not answer GET /health within ${opts.timeoutMs ?? 90_000} ms: ${out.slice(-2000)}`);
}

/** Polls `probe` until it returns something other than undefined; `what` names it in the timeout. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
