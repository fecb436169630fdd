import { describe, expect, it } from '@jest/globals';
import type { ScoreboardRow } from '../../projections/scoreboard/scoreboard.js';
import { NOT_DISTINGUISHABLE, scoreboardTable } from './analysis.commands.js';

const row = (over: Partial<ScoreboardRow>): ScoreboardRow => ({
  task: 'ref-arith', agent: 'reference', driver: null, runs: 2, n: 2, driverMismatches: 0, unscoredRuns: 0, baseline: 10,
  best: { mean: 30, ci95: [30, 30] }, noiseFloor: { n: 2, mean: 10, ci95: [10, 10] }, distinguishable: null, evaluationNoise: null,
  improvement: 20, validSubmissionRate: 1, route: null, failureClasses: [], ...over,
}) as ScoreboardRow;

describe('a2rl scoreboard table', () => {
  it('says why a zero-width interval gets no noise verdict, under the table, and marks no row clear of noise', () => {
    const text = scoreboardTable([row({ caveat: 'both intervals have zero width (n = 2, identical scores): they measure no spread' })]);
    expect(text).toContain('ref-arith × reference × -: no noise verdict: both intervals have zero width (n = 2, identical scores): they measure no spread');
    expect(text).not.toContain(NOT_DISTINGUISHABLE);
  });

  it('has no caveat line when every row has a verdict', () => {
    const text = scoreboardTable([row({ distinguishable: false, best: { mean: 11, ci95: [9, 13] } })]);
    expect(text).not.toContain('no noise verdict');
    expect(text).toContain(NOT_DISTINGUISHABLE);
  });
});
