import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { defineProjection } from '../projection.js';
import { RunListRow, type RunState } from './run-list.entity.js';

const STATE_AFTER: Partial<Record<A2rlEvent['type'], RunState>> = {
  RunScheduled: 'scheduled',
  WorkspacePrepared: 'running',
  AgentStarted: 'running',
  RunResumed: 'running',
  RunCompleted: 'completed',
  RunInterrupted: 'interrupted',
};

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
  version: 1,
  entity: RunListRow,
  keyOf: (event) => event.runId,
  evolve(row, event) {
    const next: RunListRow = { ...(row ?? emptyRow(event.runId)) };
    next.eventCount += 1;
    next.lastSeq = event.seq;
    next.lastEventAt = event.occurredAt;
    next.state = STATE_AFTER[event.type] ?? next.state;
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
