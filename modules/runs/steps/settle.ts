import { archiveAgentHome, watchAgentHome, type ArchivedHome } from '../agent-home.js';
import type { RunDeps, RunSession } from '../run-session.js';
import { epochSeconds } from '../workspace.js';
import type { LaunchedAgent } from './launch.js';
import type { Prepared } from './prepare.js';

/** How far a run got, which decides how it ends. */
export type Reached =
  /** Failed (or was stopped) before its agent was launched: interrupted, never the agent's fault. */
  | { stage: 'setup' }
  /** The agent's launch was tried and failed: the agent crashed. */
  | { stage: 'launch-failed' }
  /** The agent ran: the run completes, whatever its exit. */
  | { stage: 'launched'; prepared: Prepared; agent: LaunchedAgent };

/**
 * How the run ended, recorded after everything it started was undone: the agent's exit, the final
 * integrity check and RunCompleted for an agent that ran (or AgentExited crashed for one that could not
 * be launched), RunInterrupted for a set-up failure. `keep` is handed errors that must not stop it.
 */
export async function recordEnding(deps: RunDeps, s: RunSession, reached: Reached, failure: unknown, keep: (err: unknown) => void): Promise<void> {
  if (reached.stage === 'launched') {
    const { exitCode, signal, reason, endedAt } = await reached.agent.stop();
    const observedAt = new Date(endedAt ?? deps.clock().getTime()).toISOString();
    const stoppedBy = reason === 'killed' ? deps.control.stoppedBy(s.runId) : undefined;
    await s.record('AgentExited', { ...(exitCode !== undefined ? { exitCode } : {}), ...(signal !== undefined ? { signal } : {}), reason, observedAt, ...(stoppedBy ? { stoppedBy } : {}) });
    await reached.prepared.integrity.atEnd();
    await reached.prepared.workspace.runMeta.update({ end_time: epochSeconds(deps.clock()) }).catch(keep);
    // The best score is the projections' to fold from the gradings (RunCompleted.best is no longer written).
    await s.record('RunCompleted', { submissions: s.tally.submissions.size });
  } else if (reached.stage === 'launch-failed') {
    await s.record('AgentExited', { reason: 'crashed' });
    await s.record('RunCompleted', { submissions: 0 });
  } else if (failure !== undefined && s.guard.state.phase !== 'interrupted') {
    // (A resume that failed before RunResumed leaves the run interrupted as it was: nothing to record.)
    const message = failure instanceof Error ? failure.message : String(failure);
    await s.record('RunInterrupted', { reason: `setup failed before the agent started: ${message}`.slice(0, 4000), cause: 'setup_failed' });
  }
}

/** At most this many files of the agent's home are archived, each at most the run's fileBytes. */
const HOME_FILES = 2000;
/** How often the home is archived while the agent runs (what changed only). */
const HOME_ARCHIVE_EVERY_MS = 10_000;

/** The agent's home, whole, redacted, once at the end: the CLI's own state is evidence too (sessions, logs), but not code. */
export async function archiveHome(deps: RunDeps, s: RunSession, home: string): Promise<void> {
  const archived = await archiveAgentHome(home, s.instrumentation.store, { maxFiles: HOME_FILES, maxFileBytes: s.limits.fileBytes });
  await s.record('AgentHomeArchived', { ...archived, observedAt: deps.clock().toISOString() });
}

/**
 * While the agent runs, what changed in its home is archived every few seconds (AgentHomeArchived
 * changedOnly), so its CLI's session can be restored after a SIGKILL of the harness (docs/resume.md).
 * Stopped at teardown before the observers, so its last pass is recorded.
 */
export function watchHome(deps: RunDeps, s: RunSession, home: string): void {
  const record = (archived: ArchivedHome) => s.record('AgentHomeArchived', { ...archived, observedAt: deps.clock().toISOString() }).then(() => undefined);
  const onError = (err: unknown) => s.warn(`[${s.runId}] could not archive the agent's home: ${err instanceof Error ? err.message : String(err)}`);
  s.stack.defer(watchAgentHome(home, s.instrumentation.store, { maxFiles: HOME_FILES, maxFileBytes: s.limits.fileBytes }, record, { everyMs: HOME_ARCHIVE_EVERY_MS, onError }));
}

/**
 * Every event durable, the final head signed over the whole run, and the lock removed. A ledger that
 * fails here leaves the lock, so the next start on this machine records the run interrupted.
 */
export async function seal(deps: RunDeps, s: RunSession): Promise<void> {
  await s.recorder.settle();
  await s.signer.seal();
  deps.locks.remove(s.runId);
}
