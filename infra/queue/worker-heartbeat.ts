import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type { WorkerInfo } from '../../modules/ledger/events/catalog.js';
import { probeClient } from './redis-connection.js';

// Workers say they are alive with a key that expires: `<prefix>:worker:<id>`, renewed every half lease
// and kept for two. A job whose attempt is still assigned (the queue was flushed and rebuilt by
// `campaign resume`, or a lease expired) is settled as lost only once its holder's key is gone — a live
// holder finishes and records its own run.

const key = (prefix: string, workerId: string) => `${prefix}:worker:${workerId}`;

export interface Heartbeat {
  stop(): Promise<void>;
}

export async function startHeartbeat(url: string, prefix: string, workerId: string, leaseMs: number): Promise<Heartbeat> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => {}); // a Redis outage is the worker's queue's to report
  const beat = () => client.set(key(prefix, workerId), String(process.pid), 'PX', 2 * leaseMs).catch(() => undefined);
  await beat();
  const timer = setInterval(() => void beat(), Math.max(100, Math.floor(leaseMs / 2)));
  return {
    async stop() {
      clearInterval(timer);
      await client.del(key(prefix, workerId)).catch(() => undefined);
      client.disconnect();
    },
  };
}

/**
 * Whether a worker still beats. A missing key is looked at again after one beat, so a Redis that was
 * just flushed does not declare every worker dead; a Redis that does not answer says "alive" (ask later).
 */
export function heartbeatLiveness(url: string, prefix: string, leaseMs: number): (worker: WorkerInfo) => Promise<boolean> {
  return async (worker) => {
    const client = probeClient(url);
    try {
      await client.connect();
      if (await client.exists(key(prefix, worker.id))) return true;
      await sleep(Math.floor(leaseMs / 2) + 250);
      return (await client.exists(key(prefix, worker.id))) > 0;
    } catch {
      return true;
    } finally {
      client.disconnect();
    }
  };
}
