import { describe, expect, it } from '@jest/globals';
import { isRunSort, sortRuns, type SortableRun } from './run-listing.js';

const run = (runId: string, scheduledAt: string | null, best: number | null = null, improvement: number | null = null, durationS: number | null = null): SortableRun => ({ runId, scheduledAt, best, improvement, durationS });

const RUNS = [
  run('a', '2026-01-01T10:00:00.000Z', 50, 10, 30),
  run('b', '2026-01-02T10:00:00.000Z', null, null, null),
  run('c', '2026-01-01T10:00:00.000Z', 80, -5, 120),
  run('d', null, 80, 20, 5),
];
const ids = (runs: SortableRun[]) => runs.map((r) => r.runId);

describe('run listing order', () => {
  it('lists newest first by default, same-time runs by id descending, unscheduled runs last', () => {
    expect(ids(sortRuns(RUNS))).toEqual(['b', 'c', 'a', 'd']);
  });

  it('sorts by best, improvement or duration, largest first, runs without a value last', () => {
    expect(ids(sortRuns(RUNS, 'best'))).toEqual(['c', 'd', 'a', 'b']);
    expect(ids(sortRuns(RUNS, 'improvement'))).toEqual(['d', 'a', 'c', 'b']);
    expect(ids(sortRuns(RUNS, 'duration'))).toEqual(['c', 'a', 'd', 'b']);
    expect(ids(sortRuns(RUNS, 'id'))).toEqual(['a', 'b', 'c', 'd']);
  });

  it('does not change its input and knows its keys', () => {
    const before = ids(RUNS);
    sortRuns(RUNS, 'best');
    expect(ids(RUNS)).toEqual(before);
    expect(isRunSort('started')).toBe(true);
    expect(isRunSort('score')).toBe(false);
  });
});
