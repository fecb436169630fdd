import { probeClient } from '../redis-connection.js';

/** Deletes every key under `<prefix>:` (a test's or a bench's own queue), in pages. */
export async function deleteKeys(url: string, prefix: string): Promise<void> {
  const client = probeClient(url);
  try {
    await client.connect();
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await client.del(...keys);
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
}
