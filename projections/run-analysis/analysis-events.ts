import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';

/**
 * Whether the run analysis (analyze.ts and what it calls) and the report model read this event for
 * what it says: not the signed tree heads, most of a long run's events. The agent's output chunks
 * are kept (their metadata only, a few hundred bytes each): the report's output section counts them
 * and reads the last ones of each stream.
 */
export function readByAnalysis(event: A2rlEvent): boolean {
  return event.type !== 'TreeHeadSigned';
}

/**
 * A run's events folded in seq order into what the analysis and the report read: the events
 * readByAnalysis keeps, plus the run's first and last events (its id, clock origin, last seq), and
 * how many there were. `analyzeRun(events, blobs, count)` over them equals analyzeRun over the whole
 * run (modules/audit/analysis-events.spec.ts), in the memory of the kept events only.
 */
export class AnalysisEvents {
  readonly events: A2rlEvent[] = [];
  count = 0;
  /** The last event when readByAnalysis dropped it (it is appended by `finish`). */
  private pending: A2rlEvent | null = null;

  add(event: A2rlEvent): void {
    this.count += 1;
    if (this.events.length === 0 || readByAnalysis(event)) {
      this.events.push(event);
      this.pending = null;
    } else this.pending = event;
  }

  /** The kept events, ending with the run's last event. */
  finish(): A2rlEvent[] {
    if (this.pending) this.events.push(this.pending);
    this.pending = null;
    return this.events;
  }
}
