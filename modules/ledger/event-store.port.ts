import type { A2rlEvent } from './events/catalog.js';

/**
 * The EventStore port. One stream per run (`run-<runId>`) and one per campaign
 * (`campaign-<campaignId>`); a stream's revision equals the event's `seq`. Appends carry the exact
 * expected revision (`'no_stream'` before seq 0), so a retry either deduplicates (same ids at the
 * same revisions) or conflicts; it never duplicates.
 *
 * Positions in the all-stream are opaque strings owned by the adapter: pass back only what the
 * adapter returned. `after` is exclusive; `null`/absent means "from the beginning".
 */
export type ExpectedRevision = 'no_stream' | bigint;

export interface RecordedEvent {
  stream: string;
  revision: bigint;
  /** Opaque all-stream position (checkpoint value for subscribers). */
  position: string;
  /** The event, upcast to the current schema version (what projections and reports read). */
  event: A2rlEvent;
  /** The event exactly as stored: canonical JSON at the schema version it was written with (what tree heads hash). */
  bytes: Buffer;
  /**
   * What the store keeps beside the bytes (its id and type columns, or the server's event metadata),
   * as read back from readStream, where the adapter has it. Nothing trusts it: `a2rl verify` checks
   * it against the bytes, since a query that filters on a column would believe a changed one.
   */
  stored?: { id: string; type: string };
}

/** An event as the store keeps it, not decoded: its bytes and what the store files beside them. */
export type StoredEvent = Pick<RecordedEvent, 'stream' | 'revision' | 'bytes' | 'stored'>;

export interface AppendResult {
  /** Revision of the last event now in the stream (the expected revision for the next append). */
  nextExpectedRevision: bigint;
  /** All-stream position of the last appended event (of the original write when deduplicated). */
  position: string;
  /** True when every event was already stored by an earlier attempt and nothing was written. */
  deduplicated: boolean;
}

export interface ReadStreamOptions {
  fromRevision?: bigint;
  maxCount?: number;
}

/** Which streams an all-stream read covers: run streams (`run-…`) or campaign streams (`campaign-…`). */
export type StreamCategory = 'run' | 'campaign';

export interface ReadAllOptions {
  after?: string | null;
  /** Counts events of the category only. */
  maxCount?: number;
  /** Default 'run'. Positions of both categories are of the one all-stream, in commit order. */
  category?: StreamCategory;
}

/** Catch-up then live: yields everything after the checkpoint in commit order, then new events. */
export interface Subscription extends AsyncIterable<RecordedEvent> {
  close(): Promise<void>;
}

export interface EventStore {
  readonly backend: 'sqlite' | 'postgres' | 'kurrentdb' | 'memory';
  append(stream: string, events: readonly A2rlEvent[], expected: ExpectedRevision): Promise<AppendResult>;
  /** A stream's events in revision order; an unknown stream yields nothing. */
  readStream(stream: string, options?: ReadStreamOptions): AsyncIterable<RecordedEvent>;
  /**
   * readStream without decoding (`a2rl verify` checks the bytes and columns itself, and decoding is
   * most of a read's cost). Adapters that decode cheaply need not have it: see `storedEvents`.
   */
  readStreamStored?(stream: string, options?: ReadStreamOptions): AsyncIterable<StoredEvent>;
  /**
   * Events of all run streams (or, with `category: 'campaign'`, of all campaign streams) in commit
   * order (gap-free: no later reader sees an earlier position appear). No other stream appears.
   */
  readAll(options?: ReadAllOptions): AsyncIterable<RecordedEvent>;
  /**
   * readAll's events a page at a time, in the same order: one promise per page, not per event (a
   * rebuild reads the whole ledger, and the per-event turns of an async iterator were a tenth of
   * its read). Adapters that read event by event need not have it: see `allPages`.
   */
  readAllPages?(options?: ReadAllOptions): AsyncIterable<RecordedEvent[]>;
  /** Run streams only, like readAll's default category. */
  subscribeAll(options?: { after?: string | null }): Subscription;
  /** Revision of the stream's last event, or null when the stream does not exist. */
  streamRevision(stream: string): Promise<bigint | null>;
  /**
   * A name for this ledger that every process opening it gets, however it addresses the server, and
   * that no other ledger has (another database or schema): what a shared campaign queue is namespaced by.
   */
  identity(): Promise<string>;
  close(): Promise<void>;
}

/** readAll in pages: the adapter's own where it has them, else its events gathered as they come. */
export async function* allPages(store: EventStore, options?: ReadAllOptions, gather = 500): AsyncIterable<RecordedEvent[]> {
  if (store.readAllPages) {
    yield* store.readAllPages(options);
    return;
  }
  let page: RecordedEvent[] = [];
  for await (const recorded of store.readAll(options)) {
    page.push(recorded);
    if (page.length >= gather) {
      yield page;
      page = [];
    }
  }
  if (page.length) yield page;
}

/** A stream's stored events, undecoded where the adapter can skip decoding. */
export function storedEvents(store: EventStore, stream: string, options?: ReadStreamOptions): AsyncIterable<StoredEvent> {
  return store.readStreamStored ? store.readStreamStored(stream, options) : store.readStream(stream, options);
}
