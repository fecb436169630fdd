import { setTimeout as sleep } from 'node:timers/promises';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import { TranscriptBuilder } from '../../projections/transcript/transcript.js';
import { entryText, totalsText } from '../reports/transcript-text.js';
import type { RunSource } from './run-source.js';

/** The events that close a run (only TreeHeadSigned may follow them). */
const CLOSING = new Set<A2rlEvent['type']>(['RunCompleted', 'RunInterrupted']);

export interface FollowOptions {
  /** How often the ledger is read again while the run is open (default 1000 ms). */
  pollMs?: number;
  /** Stops following (the generator returns) when aborted. */
  signal?: AbortSignal;
}

/**
 * A run's events in seq order as they are appended: those already recorded, then new ones read
 * every `pollMs`, until the event that closes the run (yielded last) or `signal` aborts. Throws
 * when the run has no events at all (an unknown run id).
 */
export async function* followRunEvents(source: RunSource, runId: string, options: FollowOptions = {}): AsyncGenerator<A2rlEvent> {
  let last = -1;
  for (;;) {
    const batch = await source.eventsAfter(runId, last);
    if (last < 0 && !batch.length) throw new Error(`no run "${runId}" in the ledger`);
    for (const event of batch) {
      last = event.seq;
      yield event;
      if (CLOSING.has(event.type)) return;
    }
    try {
      await sleep(options.pollMs ?? 1000, undefined, { signal: options.signal });
    } catch (err) {
      if ((err as Error).name === 'AbortError') return;
      throw err;
    }
  }
}

/**
 * `a2rl transcript --follow`: each model call as the ledger records it — a block of text, or with
 * `json` one canonical JSON entry per line — then the totals once the run has ended.
 */
export async function followTranscript(source: RunSource, runId: string, write: (text: string) => void, options: FollowOptions & { json?: boolean } = {}): Promise<void> {
  const builder = new TranscriptBuilder();
  let printed = 0;
  for await (const event of followRunEvents(source, runId, options)) {
    const entry = builder.add(event);
    if (!entry) continue;
    write(options.json ? `${canonicalJson(entry)}\n` : `${printed++ ? '\n' : ''}${entryText(entry)}`);
  }
  const { totals } = builder.result();
  write(options.json ? `${canonicalJson({ totals })}\n` : `${printed ? '\n' : ''}${totalsText(totals)}`);
}
