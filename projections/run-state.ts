import type { EventType } from '../modules/ledger/events/catalog.js';

/** A run's lifecycle state, as every projection derives it. */
export type RunState = 'scheduled' | 'running' | 'completed' | 'interrupted';

/** The state a lifecycle event puts its run in (other events leave the state as it was). */
export const STATE_AFTER: Partial<Record<EventType, RunState>> = {
  RunScheduled: 'scheduled',
  WorkspacePrepared: 'running',
  AgentStarted: 'running',
  RunResumed: 'running',
  RunCompleted: 'completed',
  RunInterrupted: 'interrupted',
};
