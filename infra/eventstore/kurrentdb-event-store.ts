import { randomUUID } from 'node:crypto';
import {
  BACKWARDS,
  binaryEvent,
  END,
  FORWARDS,
  KurrentDBClient,
  START,
  StreamNotFoundError,
  streamNameFilter,
  WrongExpectedVersionError,
  type Position,
  type ResolvedEvent,
} from '@kurrent/kurrentdb-client';
import { firstRevision, isStoredAlready, lastRevision, prepareAppend } from '../../modules/ledger/append-rules.js';
import { EventStoreUnavailableError, WrongExpectedRevisionError } from '../../modules/ledger/errors.js';
import type {
  AppendResult,
  EventStore,
  ExpectedRevision,
  ReadAllOptions,
  ReadStreamOptions,
  RecordedEvent,
  Subscription,
} from '../../modules/ledger/event-store.port.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { decodeEvent } from '../../modules/ledger/events/envelope.js';
import { CAMPAIGN_STREAM_PREFIX, RUN_STREAM_PREFIX } from '../../modules/ledger/events/ids.js';

const BACKEND = 'kurrentdb';
/** The one stream that is neither a run's nor a campaign's: the ledger's identity (see `identity`). */
const IDENTITY_STREAM = 'a2rl-ledger-identity';
/** Server-side filter: $all also carries system streams and other applications' streams. */
const RUN_STREAMS = () => streamNameFilter({ prefixes: [RUN_STREAM_PREFIX] });
const CAMPAIGN_STREAMS = () => streamNameFilter({ prefixes: [CAMPAIGN_STREAM_PREFIX] });

/**
 * EventStore on KurrentDB/EventStoreDB through the official gRPC client. One KurrentDB stream per
 * run or campaign; events are stored as `application/octet-stream` holding the canonical JSON bytes,
 * so what is read back is byte-identical to what was hashed. Catch-up subscriptions only: projections and
 * persistent subscriptions are deliberately not used (not replayable, not ordered).
 */
export class KurrentDbEventStore implements EventStore {
  readonly backend = 'kurrentdb' as const;

  private constructor(private readonly client: KurrentDBClient) {}

  /** `esdb://` and `kurrentdb://` (and their `+discover` forms) are accepted. */
  static async open(url: string): Promise<KurrentDbEventStore> {
    // The client still parses esdb:// but warns on every connect; the schemes mean the same thing.
    const normalized = url.replace(/^esdb(\+discover)?:\/\//, 'kurrentdb$1://');
    const store = new KurrentDbEventStore(KurrentDBClient.connectionString(normalized));
    try {
      // Fail at open, with a clear error, rather than on the first append.
      await store.streamRevision(`${RUN_STREAM_PREFIX}connection-check`);
    } catch (err) {
      await store.close();
      throw err;
    }
    return store;
  }

  async append(stream: string, events: readonly A2rlEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    const bytes = prepareAppend(stream, events, expected);
    // KurrentDB acknowledges an idempotent re-append exactly like a fresh write, so the only way
    // to report `deduplicated` (and to notice same ids with different bytes) is to look first.
    const current = await this.streamRevision(stream);
    if (current !== (expected === 'no_stream' ? null : expected)) return this.settle(stream, events, bytes, expected, current);

    let written;
    try {
      written = await this.client.appendToStream(
        stream,
        events.map((e, i) => binaryEvent({ id: e.id, type: e.type, data: bytes[i] })),
        { streamState: expected },
      );
    } catch (err) {
      if (!(err instanceof WrongExpectedVersionError)) throw unavailable(err, `appending to ${stream}`);
      return this.settle(stream, events, bytes, expected, await this.streamRevision(stream));
    }
    const last = lastRevision(expected, events.length);
    // A single-event write reports that event's position; for a batch the reported position is
    // the transaction's, so read the last event's own position (what subscribers will see).
    const position =
      events.length === 1 && written.position ? written.position : (await this.raw(stream, last, 1)).at(-1)?.event?.position;
    return { nextExpectedRevision: last, position: encodePosition(position, stream), deduplicated: false };
  }

  /** The stream is not where the writer expected: either this exact batch is already there, or a conflict. */
  private async settle(
    stream: string,
    events: readonly A2rlEvent[],
    bytes: Buffer[],
    expected: ExpectedRevision,
    current: bigint | null,
  ): Promise<AppendResult> {
    const first = firstRevision(expected);
    const stored = current === null || current < first ? [] : await this.raw(stream, first, events.length);
    const rows = stored.map((s) => ({ id: s.event?.id ?? '', data: (s.event?.data ?? new Uint8Array()) as Uint8Array }));
    if (!isStoredAlready(rows, events, bytes)) throw new WrongExpectedRevisionError(stream, expected, current);
    const last = stored.at(-1)!.event!;
    return { nextExpectedRevision: last.revision, position: encodePosition(last.position, stream), deduplicated: true };
  }

  /** Raw client events of a stream from a revision; an unknown stream reads as empty. */
  private async raw(stream: string, fromRevision: bigint, maxCount: number): Promise<ResolvedEvent[]> {
    const out: ResolvedEvent[] = [];
    for await (const e of this.stream(stream, { fromRevision, maxCount })) out.push(e);
    return out;
  }

  private async *stream(
    stream: string,
    options: { fromRevision: bigint | typeof START | typeof END; maxCount?: number; backwards?: boolean },
  ): AsyncGenerator<ResolvedEvent> {
    const events = this.client.readStream(stream, {
      fromRevision: options.fromRevision,
      maxCount: options.maxCount,
      direction: options.backwards ? BACKWARDS : FORWARDS,
    });
    yield* guard(events, `reading ${stream}`, (err) => err instanceof StreamNotFoundError);
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    for await (const e of this.stream(stream, { fromRevision: options.fromRevision ?? START, maxCount: options.maxCount })) {
      yield toRecorded(e);
    }
  }

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    const after = options.after ? decodePosition(options.after) : null;
    const limit = options.maxCount ?? Number.MAX_SAFE_INTEGER;
    // A $all read from a position includes the event at it; the port's `after` excludes it.
    const events = this.client.readAll({
      fromPosition: after ?? START,
      maxCount: after ? Math.min(limit + 1, Number.MAX_SAFE_INTEGER) : limit,
      filter: options.category === 'campaign' ? CAMPAIGN_STREAMS() : RUN_STREAMS(),
    });
    let yielded = 0;
    for await (const e of guard(events, 'reading $all')) {
      if (yielded >= limit) return;
      const p = e.event?.position;
      if (after && p && p.commit === after.commit && p.prepare === after.prepare) continue;
      yielded++;
      yield toRecorded(e);
    }
  }

  subscribeAll(options: { after?: string | null } = {}): Subscription {
    const fromPosition = options.after ? decodePosition(options.after) : START;
    // Catch-up subscriptions start after (exclusive of) `fromPosition`, then go live.
    const sub = this.client.subscribeToAll({ fromPosition, filter: RUN_STREAMS() });
    // The iterator reports errors; this keeps an un-iterated subscription from crashing the process.
    sub.on('error', () => undefined);
    let closed = false;
    const close = async () => {
      if (closed) return;
      closed = true;
      await sub.unsubscribe().catch(() => undefined);
      sub.destroy();
    };
    async function* iterate(): AsyncGenerator<RecordedEvent> {
      try {
        for await (const e of sub as AsyncIterable<ResolvedEvent>) yield toRecorded(e);
      } catch (err) {
        if (!closed) throw unavailable(err, 'subscribing to $all');
      } finally {
        await close();
      }
    }
    const iterator = iterate();
    return { [Symbol.asyncIterator]: () => iterator, close };
  }

  async streamRevision(stream: string): Promise<bigint | null> {
    for await (const e of this.stream(stream, { fromRevision: END, maxCount: 1, backwards: true })) {
      return e.event?.revision ?? null;
    }
    return null;
  }

  /**
   * A random id written once to the stream `a2rl-ledger-identity` (no run or campaign reader sees it:
   * they read by stream prefix); the first writer wins and every later open reads it back. The same
   * for every node and address of the database; another database gets its own.
   */
  async identity(): Promise<string> {
    const stored = async () => {
      const [first] = await this.raw(IDENTITY_STREAM, 0n, 1);
      const id = first?.event ? (JSON.parse(Buffer.from(first.event.data as Uint8Array).toString('utf8')) as { id?: unknown }).id : undefined;
      return typeof id === 'string' ? id : undefined;
    };
    let id = await stored();
    if (id === undefined) {
      const event = binaryEvent({ type: 'LedgerIdentified', data: Buffer.from(JSON.stringify({ id: randomUUID() })) });
      await this.client.appendToStream(IDENTITY_STREAM, [event], { streamState: 'no_stream' }).catch((err: unknown) => {
        if (!(err instanceof WrongExpectedVersionError)) throw unavailable(err, `writing ${IDENTITY_STREAM}`); // another process named it first
      });
      id = await stored();
    }
    if (id === undefined) throw new EventStoreUnavailableError(BACKEND, `${IDENTITY_STREAM} holds no identity`);
    return `kurrentdb:${id}`;
  }

  async close(): Promise<void> {
    await this.client.dispose();
  }
}

/** Passes events through, turning client failures into EventStoreUnavailableError (or ending on `ends`). */
async function* guard<T>(source: AsyncIterable<T>, doing: string, ends: (err: unknown) => boolean = () => false): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  for (;;) {
    let next: IteratorResult<T>;
    try {
      next = await it.next();
    } catch (err) {
      if (ends(err)) return;
      throw unavailable(err, doing);
    }
    if (next.done) return;
    yield next.value;
  }
}

function unavailable(err: unknown, doing: string): EventStoreUnavailableError {
  const detail = err instanceof Error ? err.message : String(err);
  return new EventStoreUnavailableError(BACKEND, `${doing} failed: ${detail}`, { cause: err });
}

function toRecorded(resolved: ResolvedEvent): RecordedEvent {
  const e = resolved.event;
  if (!e) throw new Error('KurrentDB returned a link without its event; run streams never contain links');
  // Events are written as octet-stream; a JSON event in a run stream was written by someone else.
  const data = e.isJson ? JSON.stringify(e.data) : (e.data as Uint8Array);
  return { stream: e.streamId, revision: e.revision, position: encodePosition(e.position, e.streamId), event: decodeEvent(data), bytes: Buffer.from(data), stored: { id: e.id, type: e.type } };
}

/** Opaque to callers: `<commit>:<prepare>`. */
function encodePosition(position: Position | undefined, stream: string): string {
  if (!position) throw new EventStoreUnavailableError(BACKEND, `the server returned no $all position for an event of ${stream}`);
  return `${position.commit}:${position.prepare}`;
}

function decodePosition(position: string): Position {
  const m = /^(\d+):(\d+)$/.exec(position);
  if (!m) throw new RangeError(`"${position}" is not a KurrentDB position returned by this adapter (expected <commit>:<prepare>)`);
  return { commit: BigInt(m[1]), prepare: BigInt(m[2]) };
}
