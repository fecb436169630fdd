import { describe, expect, it } from '@jest/globals';
import type { FailureClass, Route } from '../run-analysis/analysis.types.js';
import { analysisFixture } from '../run-analysis/testing/run-fixture.js';
import { meanCi95, scoreboard, tQuantile975 } from './scoreboard.js';

const run = (runId: string, best: number | null, extra: { cls?: FailureClass; route?: Route; vsr?: number | null; task?: string; driver?: string } = {}) =>
  analysisFixture({
    runId,
    task: extra.task ?? 'ref-arith',
    driver: extra.driver ?? 'none',
    baseline: 10,
    best,
    improvement: best === null ? null : best - 10,
    failure: { class: extra.cls ?? (best !== null && best > 10 ? 'success' : 'no_improvement'), rule: 'r', evidence: [] },
    route: { best: extra.route ?? 'sft', declared: 'sft', evidence: [] },
    metrics: { ...analysisFixture().metrics, valid_submission_rate: extra.vsr ?? null },
  });

describe('scoreboard', () => {
  it('computes the best-of-budget mean with a Student-t 95% interval (checked by hand for n = 3)', () => {
    // bests 40, 55, 70: mean 55, s = 15, t(0.975, 2) = 4.303, half width = 4.303 · 15 / √3 = 37.26507
    const [row] = scoreboard([run('r3', 70), run('r1', 40), run('r2', 55)]);
    expect(row.runs).toBe(3);
    expect(row.best.mean).toBe(55);
    expect(row.best.ci95![0]).toBeCloseTo(55 - 37.26507, 4);
    expect(row.best.ci95![1]).toBeCloseTo(55 + 37.26507, 4);
    expect(row.baseline).toBe(10);
    expect(row.improvement).toBe(45);
    expect(row.runIds).toEqual(['r1', 'r2', 'r3']);
  });

  it('gives no interval for a single run and counts a run without a graded submission at its baseline', () => {
    expect(meanCi95([42])).toEqual({ mean: 42, ci95: null });
    const [row] = scoreboard([run('a', 30), run('b', null, { cls: 'timeout_no_submission' })]);
    expect(row.best.mean).toBe(20); // (30 + baseline 10) / 2
    expect(row.improvement).toBe(10);
    expect(row.unscoredRuns).toBe(0);
  });

  it('uses the t table for small df and the Cornish–Fisher expansion beyond 30', () => {
    expect(tQuantile975(1)).toBe(12.706);
    expect(tQuantile975(30)).toBe(2.042);
    expect(tQuantile975(60)).toBeCloseTo(2.0003, 3);
    expect(tQuantile975(120)).toBeCloseTo(1.9799, 3);
    expect(() => tQuantile975(0)).toThrow(RangeError);
  });

  it('averages the valid-submission rate over runs that submitted, picks the most frequent route (ties alphabetical), sorts failure classes', () => {
    const [row] = scoreboard([
      run('a', 50, { route: 'sft', vsr: 1 }),
      run('b', 5, { route: 'grpo', vsr: 0.5, cls: 'no_improvement' }),
      run('c', null, { route: 'none', cls: 'agent_crash' }),
      run('d', null, { route: 'none', cls: 'agent_crash' }),
      run('e', 60, { route: 'grpo', vsr: 0 }),
      run('f', 70, { route: 'sft', cls: 'no_improvement' }),
    ]);
    expect(row.validSubmissionRate).toBe(0.5);
    expect(row.route).toBe('grpo'); // grpo, none and sft twice each
    expect(row.failureClasses).toEqual([ // all tied at 2: alphabetical
      { class: 'agent_crash', count: 2 },
      { class: 'no_improvement', count: 2 },
      { class: 'success', count: 2 },
    ]);
  });

  it('groups by task × agent × driver in a deterministic order and applies filters', () => {
    const runs = [run('1', 20, { task: 'ref-judge' }), run('2', 20, { driver: 'gpt-5' }), run('3', 20), run('4', 20, { task: 'ref-judge' })];
    expect(scoreboard(runs).map((r) => [r.task, r.driver, r.runs])).toEqual([
      ['ref-arith', 'gpt-5', 1],
      ['ref-arith', 'none', 1],
      ['ref-judge', 'none', 2],
    ]);
    expect(scoreboard([...runs].reverse())).toEqual(scoreboard(runs));
    expect(scoreboard(runs, { task: 'ref-arith', driver: 'none' }).map((r) => r.runIds)).toEqual([['3']]);
  });

  it('counts a run under the driver its model calls show, and counts the runs declared with another', () => {
    const used = (runId: string, declared: string | null) =>
      analysisFixture({ runId, driver: 'claude-sonnet-4-5-20250929', declaredDriver: declared, driverMismatch: declared === 'gpt-5' });
    const rows = scoreboard([used('a', 'gpt-5'), used('b', 'claude-sonnet-4-5'), used('c', null), run('d', 20, { driver: 'gpt-5' })]);
    expect(rows.map((r) => [r.driver, r.runs, r.driverMismatches])).toEqual([
      ['claude-sonnet-4-5-20250929', 3, 1],
      ['gpt-5', 1, 0],
    ]);
  });
});
