import { describeModified, workspaceIntegrity } from '../../projections/run-analysis/integrity.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import type { VerificationFailure } from './verify-chain.js';

/** Paths named in the one-line failure; the report lists them all. */
const NAMED = 20;

/**
 * The run's own verdict on its read-only world: a WorkspaceIntegrityChecked that found a difference
 * fails verification (`a2rl verify` and `verify-bundle`), as one failure naming the paths. The
 * record may be authentic and the run still not be: data/ or models/ were changed under the agent.
 * A run without any check (recorded before checks existed) passes: there is nothing to contradict.
 */
export function integrityFailures(events: readonly A2rlEvent[]): VerificationFailure[] {
  const integrity = workspaceIntegrity(events);
  if (!integrity || integrity.ok) return [];
  const failed = integrity.checks.filter((c) => !c.ok);
  const named = integrity.modified.slice(0, NAMED).map(describeModified);
  const rest = integrity.modified.length - named.length + integrity.unlisted;
  const paths = named.length ? `${named.join(', ')}${rest > 0 ? ` and ${rest} more` : ''}` : `${rest} paths`;
  const where = failed.map((c) => `seq ${c.seq} (${c.phase === 'end' ? 'end of run' : c.phase === 'resume' ? 'on resume' : `before grading${c.submissionId ? ` ${c.submissionId}` : ''}`})`).join(', ');
  return [{ check: 'integrity', seq: failed[0].seq, message: `read-only data/models modified: ${paths}; found by the integrity check${failed.length === 1 ? '' : 's'} at ${where}` }];
}
