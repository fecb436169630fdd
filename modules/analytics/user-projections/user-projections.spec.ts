import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MemoryEventStore } from '../../../infra/eventstore/memory-event-store.js';
import { streamName } from '../../ledger/events/ids.js';
import { sampleRun } from '../../../projections/run-analysis/testing/run-fixture.js';
import { UserProjections } from './user-projections.js';

// User projections (docs/analysis.md "User projections"): built in a worker thread from the ledger,
// byte-identical when rebuilt, refused without side effects when malformed, stopped at their time
// limit, and kept apart from one another.

let scratch: string;
const store = new MemoryEventStore();
const example = path.resolve('docs/examples/tokens-per-point.mjs');

const moduleFile = (name: string, body: string) => {
  const file = path.join(scratch, `${name}.mjs`);
  writeFileSync(file, body);
  return file;
};

/** Counts events per type; `hangOn` makes evolve loop forever on that event type. */
const counter = (name: string, hangOn = '') => `
export const name = ${JSON.stringify(name)};
export const version = 1;
export const columns = { type: 'VARCHAR', n: 'BIGINT' };
export const initialState = () => ({});
export function evolve(state, event) {
  if (event.type === ${JSON.stringify(hangOn)}) for (;;) {}
  return { ...state, [event.type]: (state[event.type] ?? 0) + 1 };
}
export const rows = (state) => Object.keys(state).sort().map((type) => ({ type, n: state[type] }));
`;

async function append(runId: string) {
  const { events } = sampleRun(runId);
  await store.append(streamName(runId), events, 'no_stream');
}

const listing = (dir: string) => (existsSync(dir) ? readdirSync(dir).sort() : null);

beforeAll(async () => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'a2rl-userproj-'));
  await append('up-a');
  await append('up-b');
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('user projections', () => {
  it('builds a table from the ledger, and rebuilds it byte for byte, incrementally or from zero', async () => {
    const one = new UserProjections(path.join(scratch, 'one'), store);
    const added = await one.add(moduleFile('counts', counter('event_counts')));
    expect(added).toMatchObject({ name: 'event_counts', ok: true, events: store.ledger.size, replaced: false });
    const first = readFileSync(one.tablePath('event_counts'));
    const [table] = one.tables();
    expect(table.spec).toEqual({ name: 'event_counts', columns: [{ name: 'type', type: 'VARCHAR' }, { name: 'n', type: 'BIGINT' }] });
    expect(table.rows).toContainEqual(['RunScheduled', 2]);

    expect(await one.catchUp({ rebuild: true })).toEqual([{ name: 'event_counts', ok: true, rows: table.rows.length, events: store.ledger.size }]);
    expect(readFileSync(one.tablePath('event_counts')).equals(first)).toBe(true);
    // Another registration of the same module elsewhere: the same bytes.
    const two = new UserProjections(path.join(scratch, 'two'), store);
    await two.add(moduleFile('counts', counter('event_counts')));
    expect(readFileSync(two.tablePath('event_counts')).equals(first)).toBe(true);

    // New events: the incremental catch-up (from the saved state) equals a rebuild from zero.
    await append('up-c');
    await one.catchUp();
    await two.catchUp({ rebuild: true });
    const after = readFileSync(one.tablePath('event_counts'));
    expect(after.equals(first)).toBe(false);
    expect(after.equals(readFileSync(two.tablePath('event_counts')))).toBe(true);
    expect(one.tables()[0].rows).toContainEqual(['RunScheduled', 3]);
  }, 60_000);

  it('the documented example (tokens per improvement point per driver) builds', async () => {
    const up = new UserProjections(path.join(scratch, 'example'), store);
    await up.add(example);
    const [t] = up.tables();
    expect(t.spec.name).toBe('tokens_per_point');
    // sampleRun: driver none, no model calls, baseline 10, best graded score 55 → 45 points per run, three runs.
    expect(t.rows).toEqual([['none', 3, 0, 135, 0]]);
  }, 60_000);

  it.each([
    ['a syntax error', 'export const name = ', /cannot load the projection/],
    ['a built-in table name', counter('runs'), /"runs" is a built-in table/],
    ['a bad column type', counter('x').replace("'BIGINT'", "'TEXT'"), /column n: type must be one of/],
    ['evolve that throws', counter('x').replace('return {', 'if (event.type === "SubmissionGraded") throw new Error("boom"); return {'), /evolve threw at run up-a seq \d+: boom/],
    ['a row of the wrong type', counter('x').replace('n: state[type]', "n: 'many'"), /rows\(\)\[0\]\.n is not of type BIGINT/],
    ['a row with an undeclared column', counter('x').replace('n: state[type]', 'n: 1, extra: 2'), /undeclared|does not declare/],
    ['a state that is not JSON', counter('x').replace('return { ...state,', 'return { ...state, big: 1n,').replace('Object.keys(state).sort()', "Object.keys(state).filter((k) => k !== 'big').sort()"), /the state is not JSON/],
    ['a row value that is not JSON', counter('x').replace('n: state[type]', 'n: 2n'), /rows\(\)\[0\]\.n is not of type BIGINT: bigint/],
  ])('refuses %s in one line, writing nothing', async (_what, body, why) => {
    const dir = path.join(scratch, 'refused');
    const up = new UserProjections(dir, store);
    await up.add(moduleFile('good', counter('kept')));
    const before = { listing: listing(dir), registry: readFileSync(path.join(dir, 'registry.json'), 'utf8'), table: readFileSync(up.tablePath('kept')) };
    const err = await up.add(moduleFile('bad', body)).then(() => null, (e: Error) => e);
    expect(err?.message).toMatch(why);
    expect(err!.message.split('\n')).toHaveLength(1);
    expect({ listing: listing(dir), registry: readFileSync(path.join(dir, 'registry.json'), 'utf8'), table: readFileSync(up.tablePath('kept')) }).toEqual(before);
    expect(listing(path.join(scratch, 'never'))).toBeNull();
    await expect(new UserProjections(path.join(scratch, 'never'), store).add(moduleFile('bad', body))).rejects.toThrow(why);
    expect(listing(path.join(scratch, 'never'))).toBeNull();
  }, 60_000);

  it('stops a runaway projection at its time limit, in one line; a registered one that hangs later keeps its last table and leaves the others alone', async () => {
    const dir = path.join(scratch, 'runaway');
    // The limit stops the runaways; the others must finish well inside it even on a loaded machine
    // (at 2 s, a well-behaved projection's worker was once stopped too under four spinning processes).
    const up = new UserProjections(dir, store, 8000);
    await expect(up.add(moduleFile('loop', counter('loop_now', 'RunScheduled')))).rejects.toThrow(/^projection loop\.mjs: stopped after 8 s \(its time limit\); nothing of it was written$/);
    expect(listing(dir)).toBeNull();

    // Hangs only on an event type the ledger does not hold yet (RunInterrupted).
    await up.add(moduleFile('later', counter('loop_later', 'RunInterrupted')));
    await up.add(moduleFile('fine', counter('fine')));
    const kept = readFileSync(up.tablePath('loop_later'));
    const { events } = sampleRun('up-d');
    const cut = events.findIndex((e) => e.type === 'RunCompleted');
    const interrupted = events.slice(0, cut);
    const { buildEvent } = await import('../../ledger/events/envelope.js');
    interrupted.push(buildEvent('RunInterrupted', 'up-d', cut, events[cut].occurredAt, { reason: 'harness died', cause: 'harness_gone' } as never));
    await store.append(streamName('up-d'), interrupted, 'no_stream');
    const outcomes = await up.catchUp();
    expect(outcomes.find((o) => o.name === 'loop_later')).toEqual({ name: 'loop_later', ok: false, rows: 0, events: 0, error: 'projection loop_later: stopped after 8 s (its time limit); nothing of it was written' });
    expect(outcomes.find((o) => o.name === 'fine')).toMatchObject({ ok: true, events: store.ledger.size });
    expect(readFileSync(up.tablePath('loop_later')).equals(kept)).toBe(true);
    expect(up.tables().map((t) => t.spec.name)).toEqual(['fine', 'loop_later']);
  }, 60_000);
});
