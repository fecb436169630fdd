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
 * A SegmentScanner whose chunks are scanned by a worker thread running `worker`, given `data` plus
 * the run and its chunk queue (runId, queue); the worker posts `{progress}` messages, then
 * `{scans}` or `{error}`.
 */
export function workerSegmentScanner(worker: URL, data: Record<string, unknown>): SegmentScanner {
  return (runId, queue, onProgress) =>
    new Promise<SegmentScan[]>((resolve, reject) => {
      const thread = startWorker(worker, { ...data, runId, queue });
      thread.on('message', (message: { progress: number } | { scans: SegmentScan[] } | { error: string }) => {
        if ('progress' in message) onProgress(message.progress);
        else if ('scans' in message) resolve(message.scans);
        else reject(new Error(message.error));
      });
      thread.once('error', reject);
      thread.once('exit', (code) => reject(new Error(`a thread reading the run exited with code ${code} before it finished`)));
    });
}
