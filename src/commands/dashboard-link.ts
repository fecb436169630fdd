import { createServer, type Server } from 'node:http';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplication } from '@nestjs/common';
import type { A2rlConfig } from '../config/config.js';
import { listenFailure } from '../server.js';
import { nextInterruptAlone } from './interrupt.js';

/** How long `a2rl run` waits for an `a2rl serve` to answer GET /health. */
const PROBE_MS = 300;

/** Where the dashboard is, for `a2rl run` and `a2rl campaign run`: its run and campaign pages, and how to stop serving it. */
export interface DashboardLink {
  runUrl(runId: string): string;
  campaignUrl(campaignId: string): string;
  close(): Promise<void>;
  /** This process serves the dashboard (`--serve` with no server up): it goes when the process ends. */
  serving: boolean;
}

/** The dashboard's base URL for the configured host and port (a wildcard host is reached by this machine's name). */
export function dashboardBase(config: Pick<A2rlConfig, 'httpHost' | 'httpPort'>): string {
  const host = config.httpHost === '0.0.0.0' || config.httpHost === '::' ? os.hostname() : config.httpHost;
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.httpPort}`;
}

/** Whether a server answers GET /health on the configured host and port within 300 ms. */
export async function serverUp(config: Pick<A2rlConfig, 'httpHost' | 'httpPort'>): Promise<boolean> {
  const host = config.httpHost === '0.0.0.0' ? '127.0.0.1' : config.httpHost === '::' ? '::1' : config.httpHost;
  try {
    const res = await fetch(`http://${host.includes(':') ? `[${host}]` : host}:${config.httpPort}/health`, { signal: AbortSignal.timeout(PROBE_MS) });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * The dashboard for a run started from the CLI: the server already up on A2RL_HTTP_HOST/PORT, or
 * with `serve` this process's app (grading API, query API and dashboard) also listening there for
 * as long as the command runs. Null when there is neither.
 */
export async function openDashboard(app: INestApplication, config: A2rlConfig, serve: boolean): Promise<DashboardLink | null> {
  let server: Server | null = null;
  if (!(await serverUp(config))) {
    if (!serve) return null;
    server = await listenBeside(app, config);
  } else if (serve) {
    process.stderr.write(`--serve: a server already answers on ${dashboardBase(config)}; the dashboard there shows this run\n`);
  }
  const base = dashboardBase(config);
  return {
    runUrl: (runId) => `${base}/#/runs/${encodeURIComponent(runId)}`,
    campaignUrl: (campaignId) => `${base}/#/campaigns/${encodeURIComponent(campaignId)}`,
    close: () => closeServer(server),
    serving: server !== null,
  };
}

/**
 * After a run started with `--serve`: on a terminal the dashboard keeps serving until Ctrl-C (the run's
 * own Ctrl-C handling is set aside meanwhile: the run has ended), and says so; otherwise it says that
 * it stopped. Then closes it.
 */
export async function afterRun(link: DashboardLink | null, url: string): Promise<void> {
  if (!link?.serving) return link?.close();
  if (process.stdin.isTTY && process.stderr.isTTY) {
    process.stderr.write(`the run has ended; the dashboard keeps serving at ${url} — Ctrl-C to stop it\n`);
    await nextInterruptAlone();
    process.stderr.write('dashboard stopped\n');
  } else {
    process.stderr.write(`dashboard at ${url} stopped: the run has ended (--serve keeps serving after the run only on a terminal; \`a2rl serve\` serves the dashboard for good)\n`);
  }
  await link.close();
}

/** A second HTTP server over the app's request handler, on the configured address. */
async function listenBeside(app: INestApplication, config: A2rlConfig): Promise<Server> {
  const server = createServer(app.getHttpAdapter().getInstance());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.httpPort, config.httpHost, () => {
      server.off('error', reject);
      resolve();
    });
  }).catch((err: unknown) => {
    throw listenFailure(config, err);
  });
  return server;
}

/** Pages still open get this long to receive the run's last events before the server goes. */
const LAST_EVENTS_MS = 1000;

/** Closes the server, live dashboard streams included (they never end on their own). */
async function closeServer(server: Server | null): Promise<void> {
  if (!server) return;
  const open = await new Promise<number>((resolve) => server.getConnections((err, n) => resolve(err ? 0 : n)));
  if (open) await sleep(LAST_EVENTS_MS);
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
}
