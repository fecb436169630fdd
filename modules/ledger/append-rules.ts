import { STREAM_OF_TYPE, type A2rlEvent } from './events/catalog.js';
import { validateAndEncode } from './events/envelope.js';
import { accessIdOfStream, campaignIdOfStream, runIdOfStream } from './events/ids.js';
import { NonContiguousAppendError } from './errors.js';
import type { ExpectedRevision } from './event-store.port.js';

/**
 * Checks shared by every adapter before it touches storage: each event is valid, belongs to the
 * stream's run (or campaign, or access log: `runId` holds that id there), is of the stream's kind
 * (campaign events only in campaign streams, access events only in access streams), and the seqs
 * continue exactly from the expected revision. Returns the encoded bytes.
 */
export function prepareAppend(stream: string, events: readonly A2rlEvent[], expected: ExpectedRevision): Buffer[] {
  if (events.length === 0) throw new NonContiguousAppendError('append needs at least one event');
  const kind = streamKind(stream);
  if (kind === null) throw new NonContiguousAppendError(`stream "${stream}" is not a run stream (run-<runId>), a campaign stream (campaign-<campaignId>) or the access stream (access-log)`);
  const first = expected === 'no_stream' ? 0 : Number(expected) + 1;
  return events.map((event, i) => {
    const bytes = validateAndEncode(event);
    if (event.runId !== kind.id) throw new NonContiguousAppendError(`event seq ${event.seq} belongs to ${kind.name} ${event.runId}, not ${kind.id}`);
    const belongs = STREAM_OF_TYPE[event.type];
    if (belongs !== kind.name) throw new NonContiguousAppendError(`${event.type} belongs to ${belongs === 'access' ? 'an' : 'a'} ${belongs} stream, not ${stream}`);
    if (event.seq !== first + i) {
      throw new NonContiguousAppendError(`event seq ${event.seq} does not follow expected revision ${String(expected)} (wanted seq ${first + i})`);
    }
    return bytes;
  });
}

function streamKind(stream: string): { name: 'run' | 'campaign' | 'access'; id: string } | null {
  const run = runIdOfStream(stream);
  if (run !== null) return { name: 'run', id: run };
  const campaign = campaignIdOfStream(stream);
  if (campaign !== null) return { name: 'campaign', id: campaign };
  const access = accessIdOfStream(stream);
  return access === null ? null : { name: 'access', id: access };
}

/** Revision of the first event an append with this expectation writes. */
export function firstRevision(expected: ExpectedRevision): bigint {
  return expected === 'no_stream' ? 0n : expected + 1n;
}

/** Revision of the last event an append with this expectation writes. */
export function lastRevision(expected: ExpectedRevision, count: number): bigint {
  return firstRevision(expected) + BigInt(count - 1);
}

/**
 * The retry rule every adapter applies when the stream is not at the expected revision: the append
 * already happened (deduplicate) exactly when the stored events at those revisions have the same
 * ids and the same canonical bytes; anything else is a conflict.
 */
export function isStoredAlready(
  stored: ReadonlyArray<{ id: string; data: Uint8Array }>,
  events: readonly A2rlEvent[],
  bytes: readonly Buffer[],
): boolean {
  return stored.length === events.length && stored.every((row, i) => row.id === events[i].id && bytes[i].equals(row.data));
}
