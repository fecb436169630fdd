import { evolveScores, initialRunScores } from '../ledger/run-scores.js';
import type { RunLock } from '../ledger/run-locks.port.js';
import type { RunDeps } from './run-session.js';
import type { RunOutcome } from './run.types.js';
import { sealStoredRun, signingKey } from './write-path.js';

/**
 * The one way a run left open by a harness that is gone (it crashed; a campaign's worker died) is
 * closed: what is left of its agent killed, RunInterrupted (cause harness_gone) recorded after its
 * events up to the end, a final head signed over the stored stream, and its lock on this machine removed.
 */
export async function settleAbandonedRun(deps: RunDeps, runId: string, reason: string, lock: RunLock | undefined): Promise<void> {
  if (lock?.pidFile) await deps.launcher.killLeftovers(lock.pidFile).catch(() => 0);
  const lastAliveAt = lock?.aliveAt && !Number.isNaN(Date.parse(lock.aliveAt)) ? new Date(lock.aliveAt).toISOString() : undefined;
  await deps.ledger.record(runId, 'RunInterrupted', { reason: reason.slice(0, 4000), cause: 'harness_gone', ...(lastAliveAt ? { lastAliveAt } : {}) });
  await sealStoredRun(deps.ledger, runId, signingKey(deps.settings.home, (m) => deps.diagnostics.warn(m)));
  if (lock) deps.locks.remove(runId);
}

/** How a stored run ended as its events say (the run-scores fold); `state` null while it is open. */
export async function storedOutcome(deps: RunDeps, runId: string): Promise<Omit<RunOutcome, 'state' | 'interruptedNow'> & { state: RunOutcome['state'] | null }> {
  let scores = initialRunScores;
  for await (const event of deps.ledger.events(runId)) scores = evolveScores(scores, event);
  const { phase } = scores.lifecycle;
  const state = phase === 'completed' || phase === 'interrupted' ? phase : null;
  return { state, best: scores.best, baseline: scores.baseline };
}

/** How many times the stored run was resumed (its RunResumed events). */
export async function resumesOf(deps: RunDeps, runId: string): Promise<number> {
  let n = 0;
  for await (const event of deps.ledger.events(runId)) if (event.type === 'RunResumed') n++;
  return n;
}
