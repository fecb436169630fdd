import type { INestApplicationContext } from '@nestjs/common';
import type { CampaignLedger } from '../../modules/campaigns/campaign-ledger.js';
import type { CampaignQueue } from '../../modules/campaigns/campaign-queue.port.js';
import type { CampaignService } from '../../modules/campaigns/campaign.service.js';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { CLOCK, EVENT_STORE } from '../../modules/ledger/tokens.js';
import type { RunService } from '../../modules/runs/run.service.js';
import type { CampaignProgress } from '../../projections/campaign-progress/campaign-progress.js';
import { loadConfig } from '../config/config.js';
import type { CampaignProgressPrinter } from './campaign-progress-printer.js';
import { interruptSignal } from './interrupt.js';
import { jsonOut } from './terminal.js';
import { leaseFromEnv, queuePrefixFromEnv, reachQueue } from './worker.commands.js';

// How the campaign commands (campaign.commands.ts) run a campaign's jobs: here (the pool) or on a
// Redis queue, with the live progress printed; and how they follow one.

/** What the campaign commands run with (the queue, the campaign ledger and runner, the app's modules), loaded by each action: `a2rl --help` does not load it. */
export let deps!: Awaited<ReturnType<typeof campaignDeps>>;
async function campaignDeps() {
  const [queue, redis, artifacts, ledger, pool, service, runLedger, printer, dashboard] = await Promise.all([
    import('../../infra/queue/bullmq-campaign-queue.js'),
    import('../../infra/queue/redis-connection.js'),
    import('../../modules/artifacts/artifacts.module.js'),
    import('../../modules/campaigns/campaign-ledger.js'),
    import('../../modules/campaigns/campaign-pool.js'),
    import('../../modules/campaigns/campaign.service.js'),
    import('../../modules/ledger/ledger.service.js'),
    import('./campaign-progress-printer.js'),
    import('./dashboard-link.js'),
  ]);
  return {
    openRedisCampaignQueue: queue.openRedisCampaignQueue, displayQueueUrl: redis.displayQueueUrl, redisUrl: redis.redisUrl, queuePrefix: redis.queuePrefix, ledgerQueuePrefix: redis.ledgerQueuePrefix, ARTIFACT_STORE: artifacts.ARTIFACT_STORE,
    CampaignLedger: ledger.CampaignLedger, CampaignService: service.CampaignService, runEmbedded: pool.runEmbedded, runOnQueue: pool.runOnQueue, followWatching: pool.followWatching,
    LedgerService: runLedger.LedgerService, CampaignProgressPrinter: printer.CampaignProgressPrinter,
    dashboardBase: dashboard.dashboardBase, openDashboard: dashboard.openDashboard, serverUp: dashboard.serverUp,
  };
}
export const loadDeps = async () => void (deps ??= await campaignDeps());


// ── the campaign's parts ──────────────────────────────────────────────────────────────────────

export function campaigns(app: INestApplicationContext): { ledger: CampaignLedger; service: CampaignService } {
  const ledger = new deps.CampaignLedger(app.get(EVENT_STORE), app.get(CLOCK));
  return { ledger, service: new deps.CampaignService(ledger, app.get(CLOCK)) };
}

/**
 * The Redis queue's key prefix: A2RL_QUEUE_PREFIX (shared with the workers, default 'a2rl') and the
 * digest of this ledger's identity, as the workers of this ledger compute it (worker.commands.ts).
 */
export async function queueOptions(app: INestApplicationContext): Promise<{ prefix: string }> {
  const base = queuePrefixFromEnv(process.env, deps.queuePrefix);
  return { prefix: deps.ledgerQueuePrefix(base, await app.get(EVENT_STORE).identity()) };
}

/**
 * Opens the Redis queue at `url` (one line within seconds where it does not answer) for a campaign
 * whose runs other machines execute: they must record into the same ledger, so an embedded one is refused.
 */
export async function openSharedQueue(app: INestApplicationContext, url: string): Promise<CampaignQueue> {
  const options = await queueOptions(app);
  const queue = await reachQueue(() => deps.openRedisCampaignQueue(deps.redisUrl(url), options));
  const { ledgerUrl } = loadConfig();
  if (/^(sqlite|memory):/.test(ledgerUrl)) {
    await queue.close();
    throw new Error(`--queue needs a ledger the workers share (A2RL_LEDGER_URL=postgres://… or kurrentdb://…); this one is embedded (${ledgerUrl.split(':')[0]})`);
  }
  return queue;
}

// ── running the jobs ──────────────────────────────────────────────────────────────────────────

interface RunContext {
  app: INestApplicationContext;
  runs: RunService;
  gradingBaseUrl: string;
}

/**
 * Runs the campaign's owed jobs in this process (modules/campaigns/campaign-pool.ts) with the live
 * progress printed. Ctrl-C (withRunApp stops the agents) also aborts the pool: running jobs hand
 * their cell back (recorded), waiting ones stay owed, and `campaign resume` picks them up.
 */
export async function embedded(ctx: RunContext, progress: CampaignProgress, concurrency: number): Promise<CampaignProgress> {
  const { ledger, service } = campaigns(ctx.app);
  const printer = new deps.CampaignProgressPrinter();
  const interrupt = interruptSignal();
  let last: CampaignProgress;
  try {
    last = await deps.runEmbedded(progress, {
      ledger, service, runs: ctx.runs, runLedger: ctx.app.get(deps.LedgerService), artifacts: ctx.app.get(deps.ARTIFACT_STORE), gradingBaseUrl: ctx.gradingBaseUrl,
      concurrency, signal: interrupt.signal,
      onProgress: (p) => printer.update(p), // what had ended before is not printed again
      log: (line) => runnerLine(printer, line),
      onJobError: (job, err) => printer.log(`[${job.campaignId}] cell ${job.cell}: not recorded: ${err instanceof Error ? err.message : String(err)}`),
    });
  } finally {
    interrupt.dispose();
    printer.stop();
  }
  if (interrupt.signal.aborted) process.stderr.write(`campaign ${progress.campaignId} interrupted: \`a2rl campaign resume ${progress.campaignId}\` runs what is left\n`);
  return last;
}

/** Puts the owed jobs on the Redis queue and follows the campaign while workers run them (Ctrl-C stops following only). */
export async function onQueue(app: INestApplicationContext, queue: CampaignQueue, progress: CampaignProgress): Promise<CampaignProgress> {
  const { ledger, service } = campaigns(app);
  const printer = new deps.CampaignProgressPrinter();
  const interrupt = interruptSignal({ exitCodes: true });
  const watch = { watchMs: watchInterval(), log: (line: string) => printer.log(line) };
  const last = await deps.runOnQueue(progress, queue, { ledger, service, onProgress: (p) => printer.update(p), signal: interrupt.signal, ...watch }).finally(() => {
    interrupt.dispose();
    printer.stop();
  });
  if (interrupt.signal.aborted) process.stderr.write(`stopped following; campaign ${progress.campaignId} goes on on the workers (\`a2rl campaign status ${progress.campaignId} --follow\`)\n`);
  return last;
}

/** Half a worker's lease (A2RL_WORKER_LEASE_MS): two looks in a row that miss a cell's job fit in one lease. */
const watchInterval = () => Math.floor(leaseFromEnv(process.env) / 2);

/**
 * Follows a campaign with the printer until it ends or Ctrl-C; with the campaign's `queue`, also acts
 * on cells whose job the queue lost (modules/campaigns/stranded-cells.ts).
 */
export async function followed(ledger: CampaignLedger, id: string, printer: CampaignProgressPrinter, queue?: CampaignQueue): Promise<CampaignProgress> {
  const interrupt = interruptSignal({ exitCodes: true });
  try {
    const onProgress = (p: CampaignProgress) => printer.update(p);
    if (queue) return await deps.followWatching(id, queue, { ledger, onProgress, signal: interrupt.signal, watchMs: watchInterval(), log: (line) => printer.log(line) });
    return await ledger.follow(id, onProgress, interrupt.signal);
  } finally {
    interrupt.dispose();
    printer.stop();
  }
}

/** Follows a campaign as one canonical JSON line per change until it ends or Ctrl-C. */
export async function followJson(ledger: CampaignLedger, id: string): Promise<CampaignProgress> {
  const interrupt = interruptSignal({ exitCodes: true });
  try {
    return await ledger.follow(id, (p) => void process.stdout.write(jsonOut(`${canonicalJson(p)}\n`)), interrupt.signal);
  } finally {
    interrupt.dispose();
  }
}

/**
 * The runner's own lines, except how an attempt ended: the printer says that, once, from the
 * campaign's stream (the same line whoever ran it). Set-up warnings and starts pass through.
 */
function runnerLine(printer: CampaignProgressPrinter, line: string): void {
  if (/^\[[^\]]+\] cell \d+: (completed|infra_failed|lost|cancelled)\b/.test(line)) return;
  printer.log(line);
}
