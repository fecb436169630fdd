import type { ExpectedRevision } from './event-store.port.js';

export { EventTooLargeError, InvalidEventError } from './events/envelope.js';

/** The stream is not at the revision the writer expected (another writer, or a stale retry). */
export class WrongExpectedRevisionError extends Error {
  override readonly name = 'WrongExpectedRevisionError';
  constructor(
    readonly stream: string,
    readonly expected: ExpectedRevision,
    readonly actual: bigint | null,
  ) {
    super(`stream ${stream}: expected revision ${String(expected)}, but the stream is at ${actual === null ? 'no_stream' : String(actual)}`);
  }
}

/** The backing store cannot be reached or failed; nothing was acknowledged. */
export class EventStoreUnavailableError extends Error {
  override readonly name = 'EventStoreUnavailableError';
  constructor(readonly backend: string, message: string, options?: { cause?: unknown }) {
    super(`${backend} event store unavailable: ${message}`, options);
  }
}

/** Appending a batch whose seqs do not continue the stream, or mix runs. */
export class NonContiguousAppendError extends Error {
  override readonly name = 'NonContiguousAppendError';
}
