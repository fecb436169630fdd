import { setTimeout as sleep } from 'node:timers/promises';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { followRunEvents } from './follow.js';
import type { RunSource } from './run-source.js';

const CLOSING = new Set<A2rlEvent['type']>(['RunCompleted', 'RunInterrupted']);
/** How many times (a second apart) the follower looks for the final tree head after the closing event. */
const SEAL_POLLS = 30;

/**
 * A run's events as they are appended (followRunEvents), then, once it has closed, what follows the
 * closing event: its final signed tree head (the run seals right after closing). Ends when the seal
 * was read or `signal` aborts. The seal is polled a bounded number of times, so a harness that died
 * before sealing does not keep the follower waiting (recovery seals such a run later).
 */
export async function* followUntilSealed(source: RunSource, runId: string, signal: AbortSignal): AsyncGenerator<A2rlEvent> {
  let last: A2rlEvent | undefined;
  for await (const event of followRunEvents(source, runId, { signal })) {
    last = event;
    yield event;
  }
  if (!last || !CLOSING.has(last.type)) return; // aborted
  yield* sealOf(source, runId, last.seq, signal);
}

async function* sealOf(source: RunSource, runId: string, afterSeq: number, signal: AbortSignal): AsyncGenerator<A2rlEvent> {
  for (let poll = 0; poll < SEAL_POLLS; poll++) {
    const batch = await source.eventsAfter(runId, afterSeq);
    for (const event of batch) {
      afterSeq = event.seq;
      yield event;
    }
    if (batch.some((e) => e.type === 'TreeHeadSigned')) return;
    try {
      await sleep(1000, undefined, { signal });
    } catch {
      return; // aborted
    }
  }
}
