import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { defineProjection, type KeyedRow } from '../../projections/projection.js';
import { decider, projection, type Fact } from './given.js';
import { at, sha, until } from './helpers.js';

// The kit checks what it is asked to check, and records through the store (so a decision the
// catalog refuses fails in `then`, not later in production).

type Count = { events: number; last: string | null };
class Refused extends Error {}
const counter = decider<Count, 'touch' | 'refuse' | 'invalid'>({
  stream: 'run',
  id: 'r-kit',
  initial: { events: 0, last: null },
  evolve: (s, e) => ({ events: s.events + 1, last: e.type }),
  decide: (s, command) => {
    if (command === 'refuse') throw new Refused(`refused after ${s.events} events`);
    if (command === 'invalid') return [{ type: 'RunResumed', data: { note: 42 } } as unknown as Fact];
    return [{ type: 'RunResumed', data: {} }];
  },
});
const SCHEDULED: Fact = { type: 'RunScheduled', data: { task: 't', agent: 'a', baseModel: 'm', budgetSeconds: 1, seed: 0, mode: 'free' } };

describe('given/when/then for deciders', () => {
  it('folds the given events read back from the store, and returns the state after the decided ones', async () => {
    expect(await counter.given(SCHEDULED).state()).toEqual({ events: 1, last: 'RunScheduled' });
    expect(await counter.given(SCHEDULED).when('touch').then([{ type: 'RunResumed', data: {} }])).toEqual({ events: 2, last: 'RunResumed' });
  });

  it('fails when the decision differs, when a refusal was expected and none came, or when the store refuses the decided event', async () => {
    await expect(counter.given(SCHEDULED).when('touch').then([])).rejects.toThrow();
    await expect(counter.given(SCHEDULED).when('touch').thenRefuses(Refused)).rejects.toThrow();
    await expect(counter.given(SCHEDULED).when('invalid').then([{ type: 'RunResumed', data: { note: 42 } } as unknown as Fact])).rejects.toThrow();
    expect((await counter.given(SCHEDULED, SCHEDULED).when('refuse').thenRefuses(Refused, 'refused after 2 events')).message).toBe('refused after 2 events');
    await expect(counter.given().when('refuse').thenRefuses(Refused, /after 5/)).rejects.toThrow();
  });
});

describe('given/when/then for projections', () => {
  type Row = KeyedRow & { runId: string; types: string };
  const types = defineProjection<Row>({
    name: 'types', version: 1, entity: class {} as new () => Row,
    keyOf: (e: A2rlEvent) => e.runId,
    evolve: (row, e) => ({ runId: e.runId, lastSeq: e.seq, types: `${row?.types ?? ''}${e.type[0]}` }),
  });
  const kit = projection(types, 'r-kit');

  it('folds the given events and the when event into rows, and fails on other rows', async () => {
    expect(await kit.given(SCHEDULED).when({ type: 'RunResumed', data: {} }).then([{ runId: 'r-kit', lastSeq: 1, types: 'RR' }])).toHaveLength(1);
    await expect(kit.given(SCHEDULED).when({ type: 'RunResumed', data: {} }).then([])).rejects.toThrow();
  });
});

describe('helpers', () => {
  it('sha, at', () => {
    expect(sha('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect([at(0), at(61.5)]).toEqual(['2026-01-01T00:00:00.000Z', '2026-01-01T00:01:01.500Z']);
  });

  it('until returns what the condition found, and gives up past its cap naming what it waited for', async () => {
    let n = 0;
    expect(await until('the third call', () => (++n >= 3 ? n : false))).toBe(3);
    expect(await until('an async value', async () => 'x')).toBe('x');
    await expect(until('something that never comes', () => null, 30)).rejects.toThrow('waiting for something that never comes');
    let state = 'starting';
    const waiting = until(() => `the server (state: ${state})`, () => false, 30);
    state = 'stuck';
    await expect(waiting).rejects.toThrow('waiting for the server (state: stuck)'); // described when it gives up
  });
});
