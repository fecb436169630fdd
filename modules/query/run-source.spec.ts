import { afterEach, describe, expect, it } from '@jest/globals';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import type { EventStore, ReadStreamOptions, RecordedEvent } from '../ledger/event-store.port.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { streamName } from '../ledger/events/ids.js';
import { readEventPage, runEventsFrom } from './run-source.js';

// Pages of a run's events are read from the store by stream revision: what a page costs must not
// depend on the run's length. A store wrapper counts the events the store hands out.

const RUN = 'pages-1';
const EVENTS = 5000;

class CountingStore {
  read = 0;
  constructor(private readonly store: EventStore) {}

  readStream(stream: string, options?: ReadStreamOptions): AsyncIterable<RecordedEvent> {
    const inner = this.store.readStream(stream, options);
    const self = this;
    return (async function* () {
      for await (const recorded of inner) {
        self.read += 1;
        yield recorded;
      }
    })();
  }

  streamRevision(stream: string): Promise<bigint | null> {
    return this.store.streamRevision(stream);
  }
}

let store: MemoryEventStore;
afterEach(async () => {
  await store?.close();
});

async function run(): Promise<CountingStore> {
  store = new MemoryEventStore();
  const events = Array.from({ length: EVENTS }, (_, seq) =>
    seq % 10 === 9
      ? buildEvent('ProcessExited', RUN, seq, new Date(Date.UTC(2026, 0, 1, 0, 0, seq)), { pid: seq, exitCode: 0, durationMs: 1, cpuMs: 1, peakRssKb: 1, observedAt: '2026-01-01T00:00:00.000Z' })
      : buildEvent('RunResumed', RUN, seq, new Date(Date.UTC(2026, 0, 1, 0, 0, seq)), {}),
  );
  await store.append(streamName(RUN), events, 'no_stream');
  return new CountingStore(store);
}

describe('paging a run from the store', () => {
  it('reads a page of 50 events wherever it starts, and nothing past it', async () => {
    const counting = await run();
    for (const afterSeq of [-1, EVENTS / 2, EVENTS - 20]) {
      counting.read = 0;
      const page = (await readEventPage(counting as unknown as EventStore, RUN, { afterSeq, limit: 50 }))!;
      const expected = Math.min(50, EVENTS - afterSeq - 1);
      expect(page.map((e) => e.seq)).toEqual(Array.from({ length: expected }, (_, i) => afterSeq + 1 + i));
      expect(counting.read).toBe(expected);
    }
  });

  it('filters by type while reading in bounded steps, and stops at the limit', async () => {
    const counting = await run();
    const seen: number[] = [];
    for await (const e of runEventsFrom(counting as unknown as EventStore, RUN, { afterSeq: 100, limit: 3, types: new Set(['ProcessExited']) })) seen.push(e.seq);
    expect(seen).toEqual([109, 119, 129]);
    expect(counting.read).toBeLessThanOrEqual(1000);
  });

  it('returns an empty page past the end, and null for an unknown run', async () => {
    const counting = await run();
    expect(await readEventPage(counting as unknown as EventStore, RUN, { afterSeq: EVENTS - 1, limit: 50 })).toEqual([]);
    expect(await readEventPage(counting as unknown as EventStore, 'nope', { afterSeq: -1, limit: 50 })).toBeNull();
  });
});
