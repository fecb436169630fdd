import { startWorker } from '../settings/worker-thread.js';
import type { SegmentScan, SegmentScanner } from './record-scan.js';

/**
 * `a2rl verify`'s parallel read of an SQLite ledger: each later segment of a long run is read in
 * pages (modules/ledger/stores/raw-scan.ts) and scanned (record-scan.ts scanPages) in a worker
 * thread that opens the ledger file read-only, and sends back its leaves and findings.
 */
export function sqlitePageScanner(file: string): SegmentScanner {
  return (runId, from, count, chunkSize, onProgress) =>
    new Promise<SegmentScan>((resolve, reject) => {
      const worker = startWorker(new URL('./page-scan-worker.js', import.meta.url), { file, runId, from, count, chunkSize });
      worker.on('message', (message: { progress: number } | { scan: SegmentScan } | { error: string }) => {
        if ('progress' in message) onProgress(message.progress);
        else if ('scan' in message) resolve(message.scan);
        else reject(new Error(message.error));
      });
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the thread reading seqs ${from}–${from + count - 1} exited with code ${code} before it finished`)));
    });
}
