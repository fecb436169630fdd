import { parentPort, workerData } from 'node:worker_threads';
import { streamName } from '../ledger/events/ids.js';
import { SqliteRawScan } from '../ledger/stores/raw-scan.js';
import { scanPages } from './record-scan.js';

// One segment of `a2rl verify`'s parallel read of an SQLite ledger (page-scan-threads.ts): reads
// seqs [from, from + count) of the run in pages, scans them and posts what it found.
const { file, runId, from, count, chunkSize } = workerData as { file: string; runId: string; from: number; count: number; chunkSize: number };
const port = parentPort!;
let reader: SqliteRawScan | null = null;
try {
  reader = SqliteRawScan.open(file);
} catch (error) {
  port.postMessage({ error: `cannot open the ledger in a verify thread: ${(error as Error).message}` });
}
if (reader) {
  try {
    const scan = await scanPages(reader.pages(streamName(runId), from, count), runId, from, count, chunkSize, (progress) => port.postMessage({ progress }));
    port.postMessage({ scan });
  } catch (error) {
    port.postMessage({ error: (error as Error).message });
  } finally {
    reader.close();
  }
}
