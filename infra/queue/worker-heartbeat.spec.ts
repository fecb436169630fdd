import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { checkQueue } from './redis-connection.js';
import { heartbeatLiveness, startHeartbeat } from './worker-heartbeat.js';

// Worker heartbeats against a real Redis (skipped, saying so, where none answers).

const URL = process.env.A2RL_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const reachable = await checkQueue(URL).then(
  () => true,
  (err: Error) => {
    console.warn(`skipping the heartbeat spec: ${err.message}`);
    return false;
  },
);
const describeRedis = reachable ? describe : describe.skip;
const worker = (id: string) => ({ id, host: 'elsewhere', pid: 1, gpus: [] });

describeRedis('worker heartbeats', () => {
  it('a beating worker is alive, a stopped one is not, and a flushed key comes back with the next beat', async () => {
    const prefix = `hb-${randomBytes(4).toString('hex')}`;
    const alive = heartbeatLiveness(URL, prefix, 2000);
    const beat = await startHeartbeat(URL, prefix, 'w1', 2000);
    try {
      expect(await alive(worker('w1'))).toBe(true);
      expect(await alive(worker('w-never'))).toBe(false);
      const admin = new Redis(URL);
      await admin.del(`${prefix}:worker:w1`); // as if Redis had been flushed
      admin.disconnect();
      expect(await alive(worker('w1'))).toBe(true); // looked at again after one beat
    } finally {
      await beat.stop();
    }
    expect(await alive(worker('w1'))).toBe(false);
  });

  it('a Redis that does not answer says alive (ask again later), never "lost"', async () => {
    expect(await heartbeatLiveness('redis://127.0.0.1:1', 'x', 600)(worker('w1'))).toBe(true);
  });
});
