import { processLauncher } from './agent-launcher.js';
import type { RunState } from '../ledger/run-lifecycle.js';
import type { RunLocks } from '../ledger/run-locks.port.js';

// Whether an open run's harness is still there: a live observation made when runs are listed, not a
// projection (projections see only events). Nothing is recorded here: a read (`a2rl runs`, GET
// /runs) must not write to the ledger, sign heads or kill leftovers. The fact is recorded by the
// next harness that starts on this machine (RunService.recoverInterruptedRuns: RunInterrupted with
// cause harness_gone), or by a campaign settling a lost worker's run.

/**
 * Runs whose lock on this machine names a harness process that is no longer alive. Locks of other
 * machines (a shared ledger) are not here, so their runs are never judged. A lock directory that
 * cannot be read reads as no lock: listing runs does not fail over it.
 */
export function runsWithHarnessGone(locks: Pick<RunLocks, 'list'> | undefined, alive: (pid: number) => boolean = processLauncher.alive, self: number = process.pid): ReadonlySet<string> {
  const gone = new Set<string>();
  if (!locks) return gone;
  let listed: ReturnType<RunLocks['list']>;
  try {
    listed = locks.list();
  } catch {
    return gone;
  }
  for (const lock of listed) if (lock.pid !== self && !alive(lock.pid)) gone.add(lock.runId);
  return gone;
}

/** A run as listed: its recorded state, or `interrupted` with `harnessGone: true` when it is open and its harness is gone. */
export type LiveRun<T> = T & { harnessGone?: true };

/** The state to show for `run`: an open run (scheduled, running) whose harness is gone is shown interrupted. */
export function liveRun<T extends { runId: string; state: RunState | null }>(run: T, gone: ReadonlySet<string>): LiveRun<T> {
  const open = run.state === 'scheduled' || run.state === 'running';
  return open && gone.has(run.runId) ? { ...run, state: 'interrupted', harnessGone: true } : run;
}

/** How a listed run's state reads to a person: `interrupted (harness gone)` for one shown so by liveRun. */
export function stateLabel(run: { state: RunState | null; harnessGone?: true }): string {
  return run.harnessGone ? `${run.state} (harness gone)` : (run.state ?? '-');
}
