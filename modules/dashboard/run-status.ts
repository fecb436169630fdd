import type { A2rlEvent } from '../ledger/events/catalog.js';
import type { RunState } from '../ledger/run-lifecycle.js';
import { evolveScores, initialRunScores, type RunScores } from '../ledger/run-scores.js';

/** A process of the run that has started and not exited (as far as the events go). */
export interface LiveProcess {
  pid: number;
  command: string;
  startedSeq: number;
}

/** What the run page shows while the run goes on (the `status` event of GET /runs/:id/live). */
export interface LiveStatus {
  state: RunState | null;
  /** Budget left of a running agent; null before the agent started and after it exited. */
  budgetLeftMs: number | null;
  submissions: number;
  best: number | null;
  baseline: number | null;
  /** The newest MAX_PROCESSES of the processes still running, oldest first. */
  processes: LiveProcess[];
  lastSeq: number;
}

const MAX_PROCESSES = 100;
const MAX_COMMAND = 300;

/** Events after which only the final tree head follows. */
const CLOSING = new Set<A2rlEvent['type']>(['RunCompleted', 'RunInterrupted']);

/**
 * Folds a run's events one at a time, in seq order, into its live status. Everything but the budget
 * left comes from the events; see `status(now)`.
 */
export class RunStatusFold {
  /** State, baseline, best and submissions: the run-scores fold. */
  private scores: RunScores = initialRunScores;
  private readonly running = new Map<number, LiveProcess>();
  private budgetMs: number | null = null;
  private agentStartedAt: number | null = null;
  private agentExited = false;
  private closedAt: number | null = null;
  private sealedFlag = false;
  private lastSeq = -1;

  add(event: A2rlEvent): void {
    this.lastSeq = event.seq;
    this.scores = evolveScores(this.scores, event);
    switch (event.type) {
      case 'RunScheduled':
        this.budgetMs = event.data.budgetSeconds * 1000;
        break;
      case 'AgentStarted':
        this.agentStartedAt = Date.parse(event.occurredAt);
        break;
      case 'AgentExited':
        this.agentExited = true;
        break;
      case 'ProcessStarted':
        this.running.delete(event.data.pid); // a reused pid: the new process
        this.running.set(event.data.pid, { pid: event.data.pid, command: event.data.argv.join(' ').slice(0, MAX_COMMAND), startedSeq: event.seq });
        break;
      case 'ProcessExited':
        this.running.delete(event.data.pid);
        break;
      case 'TreeHeadSigned':
        // The seal: a head that covers the event that closed the run.
        if (this.closedAt !== null && event.data.treeSize > this.closedAt) this.sealedFlag = true;
        break;
      default:
        if (CLOSING.has(event.type)) this.closedAt = event.seq;
    }
  }

  /** The run has ended (RunCompleted or RunInterrupted recorded). */
  get closed(): boolean {
    return this.closedAt !== null;
  }

  /** The run has ended and its final tree head is recorded: nothing more will be appended. */
  get sealed(): boolean {
    return this.sealedFlag;
  }

  /**
   * The status now. The budget left of a running agent is the one value not from the events: its
   * budget from AgentStarted's time, minus the server's clock `now` (a live view, never stored).
   */
  status(now: number): LiveStatus {
    const running = !this.agentExited && !this.closed && this.agentStartedAt !== null && this.budgetMs !== null;
    const processes = [...this.running.values()].slice(-MAX_PROCESSES);
    return {
      state: this.scores.lifecycle.status,
      budgetLeftMs: running ? Math.max(0, this.agentStartedAt! + this.budgetMs! - now) : null,
      submissions: this.scores.named.size,
      best: this.scores.best,
      baseline: this.scores.baseline,
      processes,
      lastSeq: this.lastSeq,
    };
  }
}
