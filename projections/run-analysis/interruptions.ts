import { eventTime } from '../../modules/ledger/events/event-time.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';

// A resumed run is one run with interruptions (docs/resume.md): each loss of its harness, how long the
// harness was down (not counted against the budget) and how much agent time fell between the last
// recorded fact and the loss (the work the record cannot show). Interpretations of RunInterrupted
// (cause harness_gone, lastAliveAt) and RunResumed (lastFactAt): no clock but theirs.

export interface Interruption {
  /** The RunInterrupted that recorded the loss, and the RunResumed that ended it (null: not resumed). */
  interruptedSeq: number;
  resumedSeq: number | null;
  /** The last fact recorded before the loss. */
  lastFactAt: string | null;
  /** The harness's last heartbeat (it was alive then), when the machine that recovered it had its lock. */
  lastAliveAt: string | null;
  resumedAt: string | null;
  /** Agent time between the last recorded fact and the last heartbeat: work the record cannot show (null: unknown). */
  unrecordedS: number | null;
  /** From the loss (the last heartbeat, else the last fact) to the resume: not agent time. */
  downtimeS: number | null;
}

export interface Interruptions {
  /** How many times the run's harness was lost. */
  count: number;
  resumed: number;
  downtimeS: number;
  /** Sum of the known unrecordedS. */
  unrecordedS: number;
  list: Interruption[];
}

const seconds = (from: string, to: string) => Math.round(Math.max(0, Date.parse(to) - Date.parse(from))) / 1000;

/** The run's interruptions by a lost harness, in order; null when it had none. */
export function interruptionsOf(events: readonly A2rlEvent[]): Interruptions | null {
  const list: Interruption[] = [];
  let lastFactAt: string | null = null;
  let open: Interruption | null = null;
  for (const e of events) {
    if (e.type === 'RunInterrupted' && e.data.cause === 'harness_gone') {
      const lastAliveAt = e.data.lastAliveAt ?? null;
      open = { interruptedSeq: e.seq, resumedSeq: null, lastFactAt, lastAliveAt, resumedAt: null, unrecordedS: lastAliveAt && lastFactAt ? seconds(lastFactAt, lastAliveAt) : null, downtimeS: null };
      list.push(open);
    } else if (e.type === 'RunResumed' && open) {
      open.resumedSeq = e.seq;
      open.resumedAt = e.occurredAt;
      open.lastFactAt = e.data.lastFactAt ?? open.lastFactAt;
      if (open.lastAliveAt && open.lastFactAt) open.unrecordedS = seconds(open.lastFactAt, open.lastAliveAt);
      const lostAt = laterOf(open.lastAliveAt, open.lastFactAt);
      open.downtimeS = lostAt ? seconds(lostAt, e.occurredAt) : null;
      open = null;
    } else if (e.type !== 'TreeHeadSigned' && e.type !== 'RunInterrupted') {
      lastFactAt = eventTime(e);
    }
  }
  if (list.length === 0) return null;
  const sum = (pick: (i: Interruption) => number | null) => Math.round(list.reduce((t, i) => t + (pick(i) ?? 0), 0) * 1000) / 1000;
  return { count: list.length, resumed: list.filter((i) => i.resumedSeq !== null).length, downtimeS: sum((i) => i.downtimeS), unrecordedS: sum((i) => i.unrecordedS), list };
}


function laterOf(a: string | null, b: string | null): string | null {
  if (a === null) return b;
  if (b === null) return a;
  return Date.parse(a) >= Date.parse(b) ? a : b;
}
