import type { ExpectedRevision } from './event-store.port.js';

// The revision rules of an append, apart from append-rules' validation so that the SQLite writer
// thread loads them without the event catalog.

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
  events: ReadonlyArray<{ id: string }>,
  bytes: readonly Uint8Array[],
): boolean {
  return stored.length === events.length && stored.every((row, i) => row.id === events[i].id && Buffer.compare(bytes[i], row.data) === 0);
}
