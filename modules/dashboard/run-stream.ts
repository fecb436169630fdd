import { Inject, Injectable } from '@nestjs/common';
import { Observable } from 'rxjs';
import type { EventStore } from '../ledger/event-store.port.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { EVENT_STORE } from '../ledger/tokens.js';
import { runEventsFrom } from '../query/run-source.js';
import { LedgerFeed } from './ledger-feed.js';
import { RunStatusFold } from './run-status.js';

/** What an SSE handler returns: Nest writes `type` as the event name and JSON-encodes `data`. */
export interface SseMessage {
  type: string;
  data: unknown;
  id?: string;
}

/** Events read per store read. */
const READ_CHUNK = 500;
/** How long a closed run may go without its final tree head before the stream ends anyway. */
const SEAL_WAIT_MS = 5000;

/**
 * GET /runs/:id/live: the run's events with seq > afterSeq (those recorded, then new ones as the
 * ledger feed reports them), a `status` after each batch, and `end` once the run is sealed.
 */
@Injectable()
export class RunStream {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    private readonly feed: LedgerFeed,
  ) {}

  events(runId: string, afterSeq: number): Observable<SseMessage> {
    return new Observable<SseMessage>((subscriber) => {
      const fold = new RunStatusFold();
      let last = afterSeq;
      let stopped = false;
      let reading: Promise<void> | null = null;
      let again = false;
      let sealTimer: NodeJS.Timeout | undefined;
      let unwatch: (() => void) | undefined;

      const end = () => {
        if (stopped) return;
        subscriber.next({ type: 'end', id: String(last), data: { lastSeq: last } });
        subscriber.complete();
      };
      let first = true;
      const readNew = async () => {
        for (;;) {
          const batch: A2rlEvent[] = [];
          for await (const event of runEventsFrom(this.store, runId, { afterSeq: last, limit: READ_CHUNK })) batch.push(event);
          if (stopped) return;
          for (const event of batch) {
            fold.add(event);
            subscriber.next({ type: 'event', id: String(event.seq), data: event });
          }
          if (batch.length) last = batch[batch.length - 1].seq;
          // A status after each batch, and one at the start even when nothing is new.
          // Its id is the last seq sent too (Nest numbers messages without one, and an EventSource
          // sends the last id it saw when it reconnects: Last-Event-ID must stay a seq).
          if (batch.length || first) subscriber.next({ type: 'status', id: String(last), data: fold.status(Date.now()) });
          if (fold.sealed) return end();
          if (fold.closed && (batch.length || first)) {
            clearTimeout(sealTimer);
            sealTimer = setTimeout(end, SEAL_WAIT_MS);
          }
          first = false;
          if (batch.length < READ_CHUNK) return;
        }
      };
      // One reader at a time; a wake-up during a read makes it read once more.
      const pull = (): void => {
        if (stopped) return;
        if (reading) {
          again = true;
          return;
        }
        reading = readNew()
          .catch((error: unknown) => subscriber.error(error))
          .finally(() => {
            reading = null;
            if (again) {
              again = false;
              pull();
            }
          });
      };
      const start = async () => {
        unwatch = await this.feed.watch({ changed: (id) => id === runId && pull(), failed: (error) => subscriber.error(error), closed: () => subscriber.complete() });
        if (stopped) return unwatch();
        // The status covers the events before afterSeq too: folded, not sent.
        for await (const event of runEventsFrom(this.store, runId, { afterSeq: -1, limit: afterSeq + 1 })) {
          if (stopped) return;
          fold.add(event);
        }
        pull();
      };
      start().catch((error: unknown) => subscriber.error(error));
      return () => {
        stopped = true;
        clearTimeout(sealTimer);
        unwatch?.();
      };
    });
  }
}
