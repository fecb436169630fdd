import type { SegmentScan, SegmentScanner } from '../modules/audit/record-scan.js';
import { startWorker } from '../modules/settings/worker-thread.js';

/**
 * `a2rl verify`'s parallel read (modules/audit/record-scan.ts): each later segment of a long run is
 * scanned in a worker thread that opens the ledger by its URL (SQLite, PostgreSQL or KurrentDB; an
 * in-memory ledger lives in one thread and is never given here) and sends back its leaves and findings.
 */
export function threadedSegmentScanner(ledgerUrl: string): SegmentScanner {
  return (runId, from, count, chunkSize, onProgress) =>
    new Promise<SegmentScan>((resolve, reject) => {
      const worker = startWorker(new URL('./record-scan-worker.js', import.meta.url), { ledgerUrl, runId, from, count, chunkSize });
      worker.on('message', (message: { progress: number } | { scan: SegmentScan } | { error: string }) => {
        if ('progress' in message) onProgress(message.progress);
        else if ('scan' in message) resolve(message.scan);
        else reject(new Error(message.error));
      });
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the thread reading seqs ${from}–${from + count - 1} exited with code ${code} before it finished`)));
    });
}
