import { expect } from '@jest/globals';
import { MemoryEventStore } from '../../infra/eventstore/memory-event-store.js';
import type { A2rlEvent, EventData, EventType } from '../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { campaignStreamName, streamName } from '../../modules/ledger/events/ids.js';
import type { KeyedRow, Projection } from '../../projections/projection.js';
import { at } from './helpers.js';

// given(events).when(command | event).then(events | rows), on the in-memory event store.
//
// The events a spec gives are recorded the way the ledger records them — built into envelopes
// (dense seq from 0, a deterministic id, `at(seq)` as their time), validated, appended with the
// exact expected revision — and read back decoded before anything folds them, so a spec sees what
// production reads, not the literals it wrote. A decider then decides a command on the fold, and
// `then` checks the answer and appends it too (a decision the catalog or the stream would refuse
// fails there). A projection folds the stream, the `when` event included, into its rows.

/** An event as a spec writes it, and as a decider answers: its type and payload. */
export interface FactOf<T extends EventType> {
  type: T;
  data: EventData<T>;
}
export type Fact = { [T in EventType]: FactOf<T> }[EventType];

/** A decider under test: the fold and the decision over one stream. */
export interface DeciderUnderTest<S, C> {
  /** `run` for a run stream, `campaign` for a campaign stream. */
  stream: 'run' | 'campaign';
  /** The run or campaign id (the envelope's `runId`). */
  id: string;
  initial: S;
  evolve(state: S, event: A2rlEvent): S;
  decide(state: S, command: C): readonly Fact[];
}

type ErrorClass = abstract new (...args: never[]) => Error;

async function record(store: MemoryEventStore, stream: string, id: string, from: number, facts: readonly Fact[]): Promise<void> {
  if (facts.length === 0) return;
  const events = facts.map((f, i) => buildEvent(f.type, id, from + i, at(from + i), f.data as EventData<typeof f.type>));
  await store.append(stream, events, from === 0 ? 'no_stream' : BigInt(from - 1));
}

async function readBack(store: MemoryEventStore, stream: string): Promise<A2rlEvent[]> {
  const events: A2rlEvent[] = [];
  for await (const recorded of store.readStream(stream)) events.push(recorded.event);
  return events;
}

/** The scenario kit for a decider: `given(...facts).when(command).then(facts)` or `.thenRefuses(Error, message)`. */
export function decider<S, C>(spec: DeciderUnderTest<S, C>) {
  const stream = spec.stream === 'run' ? streamName(spec.id) : campaignStreamName(spec.id);
  const fold = (events: A2rlEvent[]) => events.reduce(spec.evolve, spec.initial);

  const open = async (facts: readonly Fact[]) => {
    const store = new MemoryEventStore();
    await record(store, stream, spec.id, 0, facts);
    return { store, state: fold(await readBack(store, stream)), next: facts.length };
  };

  const given = (...facts: Fact[]) => ({
    /** The state the given events fold to, read back from the store. */
    state: async (): Promise<S> => (await open(facts)).state,
    when: (command: C) => ({
      /** Expects exactly `expected`, appends it after the given events, and returns the state everything folds to. */
      then: async (expected: readonly Fact[]): Promise<S> => {
        const { store, state, next } = await open(facts);
        const decided = spec.decide(state, command);
        expect(decided).toEqual(expected);
        await record(store, stream, spec.id, next, decided);
        return fold(await readBack(store, stream));
      },
      /** Expects the decider to refuse with an `error` (whose message matches `message`, when given); returns the error. */
      thenRefuses: async <E extends Error>(error: ErrorClass & (abstract new (...args: never[]) => E), message?: string | RegExp): Promise<E> => {
        const { state } = await open(facts);
        let thrown: unknown;
        try {
          spec.decide(state, command);
        } catch (e) {
          thrown = e;
        }
        expect(thrown).toBeInstanceOf(error);
        if (typeof message === 'string') expect((thrown as Error).message).toBe(message);
        else if (message) expect((thrown as Error).message).toMatch(message);
        return thrown as E;
      },
    }),
  });
  return { given };
}

/** A fold under test: an evolve without decisions (a projection's per-run state, say). */
export interface FoldUnderTest<S> {
  /** `run` for a run stream, `campaign` for a campaign stream. */
  stream: 'run' | 'campaign';
  id: string;
  initial: S;
  evolve(state: S, event: A2rlEvent): S;
}

/**
 * The scenario kit for a fold: `given(...facts).when(fact).then(expected)`. The facts are recorded
 * and read back like a decider's; `then` checks each field `expected` names (toEqual) and returns
 * the whole state, so a spec can look further.
 */
export function fold<S>(spec: FoldUnderTest<S>) {
  const stream = spec.stream === 'run' ? streamName(spec.id) : campaignStreamName(spec.id);
  const folded = async (facts: readonly Fact[]): Promise<S> => {
    const store = new MemoryEventStore();
    await record(store, stream, spec.id, 0, facts);
    return (await readBack(store, stream)).reduce(spec.evolve, spec.initial);
  };
  const given = (...facts: Fact[]) => ({
    /** The state the given events fold to. */
    state: () => folded(facts),
    when: (fact: Fact) => ({
      /** Expects the fields of `expected` on the state after the given events and this one; returns that state. */
      then: async (expected: Partial<S>): Promise<S> => {
        const state = await folded([...facts, fact]);
        for (const key of Object.keys(expected) as (keyof S)[]) expect({ [key]: state[key] }).toEqual({ [key]: expected[key] });
        return state;
      },
    }),
  });
  return { given };
}

/**
 * The scenario kit for a keyed-row projection over one run's stream: `given(...facts).when(fact).then(rows)`.
 * Rows come out in key order; like the projection runner, an event is applied to its row only
 * when its seq is above the row's `lastSeq`.
 */
export function projection<Row extends KeyedRow>(p: Projection<Row>, runId = 'r-1') {
  const stream = streamName(runId);
  const rows = async (facts: readonly Fact[]): Promise<Row[]> => {
    const store = new MemoryEventStore();
    await record(store, stream, runId, 0, facts);
    const byKey = new Map<string, Row>();
    for await (const { event } of store.readAll()) {
      const key = p.keyOf(event);
      if (key === null) continue;
      const row = byKey.get(key);
      if (row && event.seq <= row.lastSeq) continue;
      byKey.set(key, p.evolve(row, event));
    }
    return [...byKey.keys()].sort().map((k) => byKey.get(k)!);
  };
  const given = (...facts: Fact[]) => ({
    /** The rows the given events fold to. */
    rows: () => rows(facts),
    when: (fact: Fact) => ({
      /** Expects exactly these rows (in key order) after the given events and this one; returns them. */
      then: async (expected: readonly Row[]): Promise<Row[]> => {
        const found = await rows([...facts, fact]);
        expect(found).toEqual(expected);
        return found;
      },
    }),
  });
  return { given };
}
