import { startWorker } from '../settings/worker-thread.js';
import type { SegmentScan, SegmentScanner } from './record-scan.js';

/**
 * `a2rl verify`'s parallel read of an SQLite ledger: each later segment of a long run is read in
 * pages (modules/ledger/stores/raw-scan.ts) and scanned (record-scan.ts scanPages) in a worker
 * thread that opens the ledger file read-only, and sends back its leaves and findings.
 */
export function sqlitePageScanner(file: string): SegmentScanner {
  return workerSegmentScanner(new URL('./page-scan-worker.js', import.meta.url), { file });
}

/**
 * A SegmentScanner whose segments are each scanned by a worker thread running `worker`, given `data`
 * plus the segment (runId, from, count, chunkSize); the worker posts `{progress}` messages, then
 * `{scan}` or `{error}`.
 */
export function workerSegmentScanner(worker: URL, data: Record<string, unknown>): SegmentScanner {
  return (runId, from, count, chunkSize, onProgress) =>
    new Promise<SegmentScan>((resolve, reject) => {
      const thread = startWorker(worker, { ...data, runId, from, count, chunkSize });
      thread.on('message', (message: { progress: number } | { scan: SegmentScan } | { error: string }) => {
        if ('progress' in message) onProgress(message.progress);
        else if ('scan' in message) resolve(message.scan);
        else reject(new Error(message.error));
      });
      thread.once('error', reject);
      thread.once('exit', (code) => reject(new Error(`the thread reading seqs ${from}–${from + count - 1} exited with code ${code} before it finished`)));
    });
}
