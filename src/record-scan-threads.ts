import { workerSegmentScanner } from '../modules/audit/page-scan-threads.js';
import type { SegmentScanner } from '../modules/audit/record-scan.js';

/**
 * `a2rl verify`'s parallel read (modules/audit/record-scan.ts): each later segment of a long run is
 * scanned in a worker thread that opens the ledger by its URL (SQLite, PostgreSQL or KurrentDB; an
 * in-memory ledger lives in one thread and is never given here) and sends back its leaves and findings.
 */
export function threadedSegmentScanner(ledgerUrl: string): SegmentScanner {
  return workerSegmentScanner(new URL('./record-scan-worker.js', import.meta.url), { ledgerUrl });
}
