import { evolve, initialRunState, type RunCommand, type RunLifecycleState, type RunState } from '../modules/ledger/run-lifecycle.js';

/** A run's lifecycle state, as every projection derives it (defined by the run-lifecycle decider). */
export type { RunState };

/**
 * The state a run is in after `event`, given the state before it: the run-lifecycle `evolve`, so
 * projections and the recorder's decider can never disagree. Only lifecycle events change it.
 */
export function runStateAfter(state: RunState | null, event: RunCommand): RunState | null {
  return evolve(lifecycleWithStatus(state), event).status;
}

/** One lifecycle state per status, built once: evolve never mutates it, and run-list asks for one per event. */
const withStatus = new Map<RunState | null, RunLifecycleState>();

function lifecycleWithStatus(status: RunState | null): RunLifecycleState {
  let state = withStatus.get(status);
  if (!state) withStatus.set(status, (state = Object.freeze({ ...initialRunState, status })));
  return state;
}
