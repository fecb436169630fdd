import { parentPort, workerData } from 'node:worker_threads';
import { SqliteRawScan } from '../ledger/stores/raw-scan.js';
import { scanChunks, type ChunkQueue } from './segment-scan.js';

// A thread of `a2rl verify`'s parallel read of an SQLite ledger (page-scan-threads.ts): takes chunks
// of the run from the queue it shares with the other threads, reads each in pages, scans them and
// posts what it found.
const { file, runId, queue } = workerData as { file: string; runId: string; queue: ChunkQueue };
const port = parentPort!;
let reader: SqliteRawScan | null = null;
try {
  reader = SqliteRawScan.open(file);
} catch (error) {
  port.postMessage({ error: `cannot open the ledger in a verify thread: ${(error as Error).message}` });
}
if (reader) {
  try {
    const scans = await scanChunks((from, count) => reader!.pages(queue.stream, from, count), runId, queue, (progress) => port.postMessage({ progress }));
    port.postMessage({ scans });
  } catch (error) {
    port.postMessage({ error: (error as Error).message });
  } finally {
    reader.close();
  }
}
