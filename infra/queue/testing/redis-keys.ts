import { probeClient } from '../redis-connection.js';

/**
 * Deletes every key of a test's or a bench's own queue prefix, in pages: `<prefix>:…` and the
 * ledger-namespaced `<prefix>-<ledger digest>:…` (ledgerQueuePrefix). Returns how many were deleted.
 */
export async function deleteKeys(url: string, prefix: string): Promise<number> {
  const client = probeClient(url);
  let deleted = 0;
  try {
    await client.connect();
    for (const match of [`${prefix}:*`, `${prefix}-*`]) {
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        cursor = next;
        if (keys.length) deleted += await client.del(...keys);
      } while (cursor !== '0');
    }
  } finally {
    client.disconnect();
  }
  return deleted;
}
