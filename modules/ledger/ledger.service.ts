import { Inject, Injectable } from '@nestjs/common';
import type { A2rlEvent, EventData, EventType } from './events/catalog.js';
import { buildEvent } from './events/envelope.js';
import { KeyedMutex } from './keyed-mutex.js';
import { streamName } from './events/ids.js';
import type { EventStore, RecordedEvent } from './event-store.port.js';
import { CLOCK, type Clock, EVENT_STORE } from './tokens.js';

/**
 * The harness's single writer: turns "this happened in run X" into the next event of run X's
 * stream (dense seq, deterministic id, occurredAt read once from the harness clock) and appends it
 * with the exact expected revision. Appends to one run are serialised; different runs go in parallel.
 */
@Injectable()
export class LedgerService {
  private readonly heads = new Map<string, number>();
  private readonly runs = new KeyedMutex();

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  get backend(): EventStore['backend'] {
    return this.store.backend;
  }

  /** Validates and appends one event; resolves once the store has made it durable. */
  record<T extends EventType>(runId: string, type: T, data: EventData<T>): Promise<A2rlEvent> {
    return this.runs.run(runId, async () => {
      const [event] = await this.appendNext(runId, [[type, data]]);
      return event;
    });
  }

  /** Appends several events of one run atomically (all or none). */
  recordMany(runId: string, items: Array<[EventType, EventData<EventType>]>): Promise<A2rlEvent[]> {
    return this.runs.run(runId, () => this.appendNext(runId, items));
  }

  /** A run's events in seq order. */
  async *events(runId: string): AsyncIterable<A2rlEvent> {
    for await (const recorded of this.store.readStream(streamName(runId))) yield recorded.event;
  }

  /** A run's events in seq order with their stored bytes (for hashing: tree heads, bundles). */
  stored(runId: string): AsyncIterable<RecordedEvent> {
    return this.store.readStream(streamName(runId));
  }

  readAll(after?: string | null): AsyncIterable<RecordedEvent> {
    return this.store.readAll({ after });
  }

  private async appendNext(runId: string, items: Array<[EventType, EventData<EventType>]>): Promise<A2rlEvent[]> {
    const stream = streamName(runId);
    let head = this.heads.get(runId);
    if (head === undefined) {
      const revision = await this.store.streamRevision(stream);
      head = revision === null ? -1 : Number(revision);
    }
    const occurredAt = this.clock();
    const events = items.map(([type, data], i) => buildEvent(type, runId, head! + 1 + i, occurredAt, data));
    try {
      await this.store.append(stream, events, head < 0 ? 'no_stream' : BigInt(head));
    } catch (err) {
      this.heads.delete(runId); // re-read the head next time rather than trust a stale one
      throw err;
    }
    this.heads.set(runId, head + events.length);
    return events;
  }
}
