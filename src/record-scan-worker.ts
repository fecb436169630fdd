import { parentPort, workerData } from 'node:worker_threads';
import { openEventStore } from '../infra/eventstore/open-event-store.js';
import { scanChunks, storedChunks, type ChunkQueue } from '../modules/audit/segment-scan.js';

// A thread of `a2rl verify`'s parallel read (record-scan-threads.ts): opens the ledger, takes chunks
// of the run from the queue it shares with the other threads, scans them and posts what it found.
const { ledgerUrl, runId, queue } = workerData as { ledgerUrl: string; runId: string; queue: ChunkQueue };
const port = parentPort!;
const store = await openEventStore(ledgerUrl).catch((error: Error) => {
  port.postMessage({ error: `cannot open the ledger in a verify thread: ${error.message}` });
  return null;
});
if (store) {
  try {
    const scans = await scanChunks(storedChunks(store, queue.stream), runId, queue, (progress) => port.postMessage({ progress }));
    port.postMessage({ scans });
  } catch (error) {
    port.postMessage({ error: (error as Error).message });
  } finally {
    await store.close();
  }
}
