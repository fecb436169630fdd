import { parentPort, workerData } from 'node:worker_threads';
import { openEventStore } from '../infra/eventstore/open-event-store.js';
import { scanSegment } from '../modules/audit/record-scan.js';
import { storedEvents } from '../modules/ledger/event-store.port.js';
import { streamName } from '../modules/ledger/events/ids.js';

// One segment of `a2rl verify`'s parallel read (record-scan-threads.ts): opens the ledger, scans
// seqs [from, from + count) of the run and posts what it found.
const { ledgerUrl, runId, from, count, chunkSize } = workerData as { ledgerUrl: string; runId: string; from: number; count: number; chunkSize: number };
const port = parentPort!;
const store = await openEventStore(ledgerUrl).catch((error: Error) => {
  port.postMessage({ error: `cannot open the ledger in a verify thread: ${error.message}` });
  return null;
});
if (store) {
  try {
    const events = storedEvents(store, streamName(runId), { fromRevision: BigInt(from), maxCount: count });
    const scan = await scanSegment(events, runId, from, count, chunkSize, (progress) => port.postMessage({ progress }));
    port.postMessage({ scan });
  } catch (error) {
    port.postMessage({ error: (error as Error).message });
  } finally {
    await store.close();
  }
}
