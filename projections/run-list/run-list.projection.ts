import { defineProjection } from '../projection.js';
import { runStateAfter } from '../run-state.js';
import { RunListRow } from './run-list.entity.js';

function emptyRow(runId: string): RunListRow {
  return {
    runId,
    task: null,
    agent: null,
    driver: null,
    baseModel: null,
    state: null,
    eventCount: 0,
    lastSeq: -1,
    scheduledAt: null,
    lastEventAt: '',
  };
}

/** The run list: what each run is and where it stands. */
export const runListProjection = defineProjection<RunListRow>({
  name: 'run-list',
  // 2: states setup_failed and cancelled (RunInterrupted.cause, AgentExited.stoppedBy); unchanged for runs recorded without them.
  version: 2,
  entity: RunListRow,
  keyOf: (event) => event.runId,
  evolve(row, event) {
    const next: RunListRow = { ...(row ?? emptyRow(event.runId)) };
    next.eventCount += 1;
    next.lastSeq = event.seq;
    next.lastEventAt = event.occurredAt;
    next.state = runStateAfter(next.state, event);
    if (event.type === 'RunScheduled') {
      next.task = event.data.task;
      next.agent = event.data.agent;
      next.driver = event.data.driver ?? null;
      next.baseModel = event.data.baseModel;
      next.scheduledAt = event.occurredAt;
    }
    return next;
  },
});
