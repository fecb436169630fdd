import type { Command } from 'commander';
import { onThisMachine, processAlive, workerInfo } from '../../modules/campaigns/worker-info.js';
import { keysDir, loadSigningKey } from '../../modules/ledger/tree-head.js';
import { CLOCK, EVENT_STORE } from '../../modules/ledger/tokens.js';
import { ConfigError, loadConfig, redact, type A2rlConfig } from '../config/config.js';
import { OpenError } from '../config/open-errors.js';
import { withRunApp } from './cli-support.js';
import { nextInterrupt } from './interrupt.js';
import { inertLine } from '../../modules/reports/inert-text.js';

// `a2rl worker`: one machine's share of a distributed campaign. It takes jobs from the Redis queue
// (infra/queue/redis-worker.ts) and runs each as `a2rl run` would, recording into the shared ledger;
// the campaign's stream says which worker ran what.

const DEFAULT_LEASE_MS = 30_000;

const HELP = `
Every worker and the scheduling \`a2rl campaign run --queue\` must share the ledger (A2RL_LEDGER_URL=postgres://…
or kurrentdb://…) and the artifact store (A2RL_ARTIFACTS_URL=s3://… for MinIO, or a file:// path that every
machine mounts), and use the same A2RL_QUEUE_PREFIX (default a2rl). The queue's keys are namespaced by the ledger's identity too
(the PostgreSQL cluster, database and schema; the KurrentDB database): a worker attached to another
ledger never sees this campaign's jobs, and says which ledger it serves when it starts.

A job holds a lease of A2RL_WORKER_LEASE_MS (default 30000), renewed while its run goes on. A worker that
dies (SIGKILL, machine lost) stops renewing: after about two lease periods another worker takes the job,
records the dead worker's run interrupted and retries the cell (up to the campaign's --retries).

SIGTERM / SIGINT: no new jobs; running runs are stopped, recorded and their cells handed back to the queue;
then the worker exits (143 / 130). A second signal quits at once (the next start of an a2rl process on this
A2RL_HOME records the open runs interrupted; other workers settle them when their leases run out).
`;

interface WorkerOptions {
  queue: string;
  slots: number;
  gpus?: string;
}

export function registerWorkerCommands(program: Command): void {
  program
    .command('worker')
    .description('run campaign jobs from a Redis queue until stopped (SIGTERM: running runs are stopped, recorded and handed back)')
    .requiredOption('--queue <redis://…>', 'the queue that `a2rl campaign run --queue` fills')
    .option('--slots <n>', 'runs that need no GPU at once (0: GPU jobs only)', parseSlots, 1)
    .option('--gpus <ids>', 'GPU ids this worker lends to jobs that need GPUs, e.g. 0,1 (default: none, so CPU jobs only); a job needing n GPUs gets n of them to itself')
    .addHelpText('after', HELP)
    .action(async (opts: WorkerOptions) => {
      // The queue (BullMQ, Redis), the campaign runner and the app's modules: loaded when a worker starts.
      const [{ openRedisCampaignQueue }, { checkQueue, displayQueueUrl, ledgerQueuePrefix, queuePrefix, redisUrl }, { startRedisWorker }, { heartbeatLiveness, startHeartbeat }, { ARTIFACT_STORE }, { CampaignLedger }, { CampaignRunner }, { LedgerService }] = await Promise.all([
        import('../../infra/queue/bullmq-campaign-queue.js'),
        import('../../infra/queue/redis-connection.js'),
        import('../../infra/queue/redis-worker.js'),
        import('../../infra/queue/worker-heartbeat.js'),
        import('../../modules/artifacts/artifacts.module.js'),
        import('../../modules/campaigns/campaign-ledger.js'),
        import('../../modules/campaigns/campaign-runner.js'),
        import('../../modules/ledger/ledger.service.js'),
      ]);
      const url = redisUrl(opts.queue);
      const { slots } = opts;
      const gpus = parseGpus(opts.gpus);
      if (slots === 0 && gpus.length === 0) throw new Error('--slots 0 takes no CPU jobs: give --gpus, or at least one slot');
      const basePrefix = queuePrefixFromEnv(process.env, queuePrefix);
      const leaseMs = leaseFromEnv(process.env);
      const config = loadConfig();
      checkSharedStores(config);
      await reachQueue(() => checkQueue(url)); // one line within seconds, before a store is opened or a run recovered
      warnWithoutSharedKey(config.home);
      await withRunApp(async (runs, gradingBaseUrl, _config, app) => {
        const info = workerInfo(gpus);
        // Jobs of this ledger's campaigns only: the producer namespaces the queue the same way.
        const prefix = ledgerQueuePrefix(basePrefix, await app.get(EVENT_STORE).identity());
        const liveness = heartbeatLiveness(url, prefix, leaseMs);
        const queue = await reachQueue(() => openRedisCampaignQueue(url, { prefix }));
        try {
          const runner = new CampaignRunner({
            ledger: new CampaignLedger(app.get(EVENT_STORE), app.get(CLOCK)),
            runs,
            runLedger: app.get(LedgerService),
            artifacts: app.get(ARTIFACT_STORE),
            gradingBaseUrl,
            enqueue: (jobs) => queue.enqueue(jobs),
            holderAlive: async (w) => (onThisMachine(w) && !processAlive(w.pid) ? false : liveness(w)),
            log,
          });
          const heartbeat = await startHeartbeat(url, prefix, info.id, leaseMs);
          const stopped = nextInterrupt();
          const worker = await startRedisWorker({ url, prefix, slots, gpus, handler: runner.handle, worker: info, leaseMs, log, ledger: redact(config.ledgerUrl) });
          log(
            `worker ${info.id}: taking jobs from ${displayQueueUrl(url)} (prefix ${prefix}: this ledger's campaigns), ${slots} CPU slot${slots === 1 ? '' : 's'}` +
              `${gpus.length ? `, GPUs ${gpus.join(',')}` : ', no GPUs'}; lease ${leaseMs} ms; ledger ${redact(config.ledgerUrl)}, artifacts ${redact(config.artifactsUrl)}`,
          );
          const signal = await stopped;
          log(`worker ${info.id}: ${signal}: taking no new jobs; stopping the running runs and handing their cells back`);
          await worker.close();
          await heartbeat.stop();
          log(`worker ${info.id}: stopped`);
        } finally {
          await queue.close();
        }
      });
    });
}

/** A queue that does not answer is the operator's to fix, like a store that cannot be opened: one line, exit 2. */
export async function reachQueue<T>(open: () => Promise<T>): Promise<T> {
  try {
    return await open();
  } catch (err) {
    throw new OpenError(err instanceof Error ? err.message : String(err), { cause: err });
  }
}

/** A worker without the campaign's signing key signs its runs with a key of its own, which verifiers elsewhere do not know. */
function warnWithoutSharedKey(home: string): void {
  if (loadSigningKey(home)) return;
  process.stderr.write(
    `a2rl worker: warning: no signing key in ${keysDir(home)}: this worker's first run creates one of its own. Copy the campaign's key there ` +
      `(docs/operations.md), or trust this worker's key where runs are verified (a2rl keys show here, a2rl keys trust there)\n`,
  );
}

/** One line on stderr, time-stamped: a worker's log is read long after (inert: runner lines quote recorded errors). */
function log(line: string): void {
  process.stderr.write(`${new Date().toISOString()} ${inertLine(line)}\n`);
}

/**
 * Workers on other machines record into the same ledger, so an embedded one (SQLite, memory) is refused;
 * artifacts on a filesystem path work only where every machine mounts it, so that gets a warning.
 */
export function checkSharedStores(config: Pick<A2rlConfig, 'ledgerUrl' | 'artifactsUrl'>, warn: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): void {
  const scheme = config.ledgerUrl.slice(0, config.ledgerUrl.indexOf(':'));
  if (scheme === 'sqlite' || scheme === 'memory') {
    const which = scheme === 'sqlite' ? `embedded SQLite, ${redact(config.ledgerUrl)}` : 'in memory';
    throw new Error(`workers record into one ledger they all share: set A2RL_LEDGER_URL=postgres://… or kurrentdb://… (this one is ${which})`);
  }
  if (config.artifactsUrl.startsWith('file:')) {
    warn(`a2rl worker: warning: artifacts are on a filesystem path (${config.artifactsUrl}): every worker and the scheduler must mount the same directory there (or use A2RL_ARTIFACTS_URL=s3://… for MinIO)`);
  }
}

export function parseSlots(text: string): number {
  if (!/^\d+$/.test(text.trim()) || Number(text) > 1024) throw new Error(`--slots must be a whole number from 0 to 1024, got "${text}"`);
  return Number(text);
}

/** `0,1` → ['0', '1']: indices, UUIDs or MIG ids as CUDA_VISIBLE_DEVICES takes them; distinct, at most 64. */
export function parseGpus(text: string | undefined): string[] {
  if (text === undefined) return [];
  const ids = text.split(',').map((id) => id.trim());
  const bad = ids.find((id) => !/^[A-Za-z0-9][A-Za-z0-9:_./-]{0,127}$/.test(id) || id.toLowerCase() === 'cpu');
  if (bad !== undefined) throw new Error(`--gpus takes GPU ids separated by commas, e.g. 0,1 or GPU-5d8f…, got "${text}"`);
  if (new Set(ids).size !== ids.length) throw new Error(`--gpus names a GPU twice: "${text}"`);
  if (ids.length > 64) throw new Error(`--gpus names ${ids.length} GPUs; at most 64`);
  return ids;
}

export function leaseFromEnv(env: NodeJS.ProcessEnv): number {
  const text = env.A2RL_WORKER_LEASE_MS?.trim();
  if (!text) return DEFAULT_LEASE_MS;
  if (!/^\d+$/.test(text) || Number(text) < 500 || Number(text) > 3_600_000) {
    throw new ConfigError('A2RL_WORKER_LEASE_MS', `a job's lease in milliseconds, from 500 to 3600000, got "${text}"`);
  }
  return Number(text);
}

/** A2RL_QUEUE_PREFIX checked by `check` (redis-connection.ts's queuePrefix), a bad one named as a ConfigError. */
export function queuePrefixFromEnv(env: NodeJS.ProcessEnv, check: (prefix: string | undefined) => string): string {
  try {
    return check(env.A2RL_QUEUE_PREFIX?.trim() || undefined);
  } catch (err) {
    throw new ConfigError('A2RL_QUEUE_PREFIX', (err as Error).message);
  }
}
