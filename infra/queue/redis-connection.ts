import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { ConnectionOptions } from 'bullmq';
import pTimeout from 'p-timeout';
import type { CampaignJob } from '../../modules/campaigns/campaign-queue.port.js';

// What the BullMQ producer (bullmq-campaign-queue.ts) and the workers (redis-worker.ts) agree on:
// the queue names, the Redis connection and the check that Redis answers at all.

/** Where jobs that need no GPU wait: every worker takes them. */
export const CPU_QUEUE = 'campaign-cpu';

/**
 * Where jobs that need `n` GPUs wait (one queue per count): a worker advertising k GPUs takes from
 * the queues for 1…k, so it never fetches a job it could not run and a job needing more GPUs than a
 * worker has stays on the queue for one that has them.
 */
export const gpuQueue = (n: number): string => `campaign-gpu-${n}`;

export const queueOf = (job: Pick<CampaignJob, 'gpus'>): string => (job.gpus > 0 ? gpuQueue(job.gpus) : CPU_QUEUE);

/** Key prefix of every queue (BullMQ's `prefix`): lets several deployments or test runs share one Redis. */
export const DEFAULT_QUEUE_PREFIX = 'a2rl';
const PREFIX = /^[A-Za-z0-9_.-]{1,64}$/;
const CHECK_TIMEOUT_MS = 3_000;

export interface RedisQueueOptions {
  /** Key prefix (default 'a2rl'). */
  prefix?: string;
}

/** A checked `redis://` or `rediss://` URL; anything else is a one-line error naming the flag. */
export function redisUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`--queue must be a redis:// or rediss:// URL, got "${url}"`);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw new Error(`--queue must be a redis:// or rediss:// URL, got "${displayQueueUrl(url)}"`);
  if (!parsed.hostname) throw new Error(`--queue "${displayQueueUrl(url)}" names no host`);
  return url;
}

export function queuePrefix(prefix: string | undefined): string {
  const value = prefix ?? DEFAULT_QUEUE_PREFIX;
  if (!PREFIX.test(value)) throw new Error(`queue prefix must be 1-64 letters, digits, '_', '.' or '-', got "${value}"`);
  return value;
}

/**
 * The prefix a campaign's queue and its workers use: the operator's prefix and a digest of the
 * ledger's identity (EventStore.identity). A worker attached to another ledger (another database or
 * schema) then never sees, takes or burns the attempts of a job whose campaign its ledger lacks.
 */
export function ledgerQueuePrefix(prefix: string, ledgerIdentity: string): string {
  return `${prefix}-${createHash('sha256').update(ledgerIdentity).digest('hex').slice(0, 12)}`;
}

/** The URL as it may be printed: without its password. */
export function displayQueueUrl(url: string): string {
  return url.replace(/\/\/([^:@/]*):([^@/]+)@/, '//$1:***@');
}

/** BullMQ's connection options for the URL (BullMQ creates and owns the ioredis clients). */
export function bullConnection(url: string): ConnectionOptions {
  return { url };
}

/**
 * Fails within a few seconds, with one line, where nothing answers at `url` (BullMQ itself would retry
 * for ever): `cannot reach the queue at redis://127.0.0.1:6390 (ECONNREFUSED): start Redis or fix --queue`.
 */
export async function checkQueue(url: string, timeoutMs = CHECK_TIMEOUT_MS): Promise<void> {
  redisUrl(url);
  const client = probeClient(url, timeoutMs);
  // ioredis rejects with "Connection is closed."; the cause (ECONNREFUSED…) comes as an 'error' event.
  let cause: unknown;
  client.on('error', (err) => (cause ??= err));
  try {
    await withTimeout(
      client.connect().then(() => client.ping()),
      timeoutMs,
    );
  } catch (err) {
    throw new Error(`cannot reach the queue at ${displayQueueUrl(url)} (${reason(cause ?? err)}): start Redis or fix --queue`);
  } finally {
    client.disconnect();
  }
}

/** A client for one-off commands (probe, scans): no reconnecting, no offline queue, so failures surface at once. */
export function probeClient(url: string, timeoutMs = CHECK_TIMEOUT_MS): Redis {
  // disconnectTimeout: ioredis arms a timer on disconnect that a refused socket never clears; keep it short.
  const client = new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs, disconnectTimeout: 100, retryStrategy: () => null, maxRetriesPerRequest: 0, enableOfflineQueue: false });
  client.on('error', () => {}); // reported by the command that failed
  return client;
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  return pTimeout(work, { milliseconds: ms, message: Object.assign(new Error('no answer'), { code: 'ETIMEDOUT' }) });
}

function reason(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && code) return code;
  const message = err instanceof Error ? err.message : String(err);
  return message.split('\n')[0].slice(0, 200);
}
