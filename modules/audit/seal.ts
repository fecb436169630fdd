import type { A2rlEvent } from '../ledger/events/catalog.js';
import type { VerificationFailure } from './verify-chain.js';

// The seal check's two rules, apart from verify-chain.ts so that the record scan of a worker thread
// (segment-scan.ts) uses them without loading the validators.

/**
 * Whether an event counts as the run's last for the seal check: not a head, and not a re-grading of
 * a submission (`a2rl regrade`), which the lifecycle accepts only after the run closed.
 */
export function sealRelevant(e: A2rlEvent): boolean {
  return e.type !== 'TreeHeadSigned' && !(e.type === 'GradingRepeated' && e.data.subject === 'submission');
}

/** sealFailures given only the run's last event that is not a head (what a streaming reader keeps). */
export function sealFailure(last: Pick<A2rlEvent, 'seq' | 'type'> | undefined): VerificationFailure[] {
  if (!last || last.type === 'RunCompleted' || last.type === 'RunInterrupted') return [];
  return [{ check: 'coverage', seq: last.seq, message: `the run is not sealed: its last event (seq ${last.seq}, ${last.type}) is not RunCompleted or RunInterrupted; it is still running or its last events were removed` }];
}
