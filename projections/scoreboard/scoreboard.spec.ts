import { describe, expect, it } from '@jest/globals';
import { NOT_DISTINGUISHABLE, scoreboardTable } from '../../src/commands/analysis.commands.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { analyzeRun } from '../run-analysis/analyze.js';
import type { FailureClass, Route, RunAnalysis } from '../run-analysis/analysis.types.js';
import { analysisFixture, sampleRun } from '../run-analysis/testing/run-fixture.js';
import { distinguishable, meanCi95, noiseFloors, scoreboard, scoreboardRuns, tQuantile975, zeroWidthCaveat } from './scoreboard.js';

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

describe('scoreboard: drivers as one model', () => {
  it('files runs whose drivers differ only in case or a provider/ prefix under one row, named as most of them are', () => {
    const runs = [run('1', 20, { driver: 'claude-y' }), run('2', 30, { driver: 'vendor/claude-y' }), run('3', 40, { driver: 'Claude-Y' }), run('4', 50, { driver: 'claude-y' }), run('5', 60, { driver: 'claude-y-2' })];
    expect(scoreboard(runs).map((r) => [r.driver, r.runIds])).toEqual([
      ['claude-y', ['1', '2', '3', '4']],
      ['claude-y-2', ['5']],
    ]);
    expect(scoreboard(runs, { driver: 'VENDOR/claude-y' }).map((r) => r.runs)).toEqual([4]);
  });
});

describe('scoreboard: n and the noise floor', () => {
  /** A run whose baseline was graded afresh (`cached: false`) unless `cached` says otherwise. */
  const graded = (runId: string, baseline: number | null, best: number | null, extra: Partial<RunAnalysis> = {}) =>
    analysisFixture({ runId, agent: 'a', baseline, baselineCached: baseline === null ? null : false, best, improvement: null, ...extra });
  const cached = (runId: string, best: number | null, extra: Partial<RunAnalysis> = {}) => graded(runId, 10, best, { baselineCached: true, agent: 'b', ...extra });
  // Fresh baselines 10, 12, 14: mean 12, s = 2, half width t(0.975, 2) · 2 / √3 = 4.303 · 1.154701 = 4.968677.
  const FLOOR_LOW = 12 - 4.968677;
  const FLOOR_HIGH = 12 + 4.968677;
  const regraded = [graded('a1', 10, 40), graded('a2', 12, 55), graded('a3', 14, 70)];

  it('counts the scored runs as n', () => {
    const [row] = scoreboard([graded('x', 10, 30), graded('y', null, null), graded('z', 10, null)]);
    expect([row.runs, row.n, row.unscoredRuns]).toEqual([3, 2, 1]);
    expect(row.best.mean).toBe(20);
  });

  it("computes the task's noise floor from the baselines graded afresh (mean, Student-t interval, n)", () => {
    const rows = scoreboard([...regraded, cached('b1', 14), cached('b2', 16)]);
    for (const row of rows) {
      expect(row.noiseFloor!.n).toBe(3);
      expect(row.noiseFloor!.mean).toBe(12);
      expect(row.noiseFloor!.ci95[0]).toBeCloseTo(FLOOR_LOW, 4);
      expect(row.noiseFloor!.ci95[1]).toBeCloseTo(FLOOR_HIGH, 4);
    }
  });

  it('marks a row whose best-of-budget interval overlaps the noise floor as not distinguishable, and one clear of it as distinguishable', () => {
    const [a, b] = scoreboard([...regraded, cached('b1', 14), cached('b2', 16)]);
    expect([a.agent, a.best.ci95![0] > FLOOR_HIGH, a.distinguishable]).toEqual(['a', true, true]); // [17.7, 92.3]
    expect([b.agent, b.best.ci95![0] < FLOOR_HIGH, b.distinguishable]).toEqual(['b', true, false]); // 15 ± 12.706
  });

  it("judges a row with one scored run (no interval) by whether its mean lies inside the floor's interval", () => {
    const rows = scoreboard([...regraded, cached('b1', 15), cached('c1', 30, { agent: 'c' }), cached('d1', 1, { agent: 'd' })]);
    expect(rows.map((r) => [r.agent, r.n, r.distinguishable])).toEqual([
      ['a', 3, true],
      ['b', 1, false],
      ['c', 1, true],
      ['d', 1, true],
    ]);
  });

  it('has no floor (and no mark) with fewer than two fresh gradings, counting neither cached baselines nor analyses stored before the flag', () => {
    const old = { ...graded('o1', 11, 20), baselineCached: undefined } as unknown as RunAnalysis;
    const rows = scoreboard([graded('a1', 10, 40), cached('b1', 14), cached('b2', 16), old]);
    expect(rows.map((r) => [r.noiseFloor, r.distinguishable])).toEqual([
      [null, null],
      [null, null],
    ]);
    expect(noiseFloors([graded('a1', 10, 40), old]).size).toBe(0);
  });

  it('keeps floors apart per task and per base model, and gives none to a row whose runs used several base models', () => {
    const other = (runId: string, baseline: number) => graded(runId, baseline, 50, { baseModel: 'other-base', agent: 'o' });
    const judge = (runId: string, baseline: number) => graded(runId, baseline, 50, { task: 'ref-judge' });
    const floors = noiseFloors([...regraded, other('o1', 30), other('o2', 32), judge('j1', 1), judge('j2', 3), judge('j3', 5)]);
    expect([...floors.entries()].map(([k, f]) => [k, f.n, f.mean])).toEqual([
      ['["ref-arith","arith-base"]', 3, 12],
      ['["ref-arith","other-base"]', 2, 31],
      ['["ref-judge","arith-base"]', 3, 3],
    ]);
    const rows = scoreboard([...regraded, other('o1', 30), other('o2', 32), graded('m1', 30, 50, { agent: 'o', baselineCached: true })]);
    expect(rows.map((r) => [r.agent, r.noiseFloor?.mean ?? null])).toEqual([
      ['a', 12],
      ['o', null], // arith-base and other-base in one row
    ]);
  });

  it("takes the floor from the runs in scope: the filter's runs, as the query API (which filters first) does", () => {
    const runs = [...regraded, graded('b1', 100, 20, { agent: 'b' }), graded('b2', 200, 30, { agent: 'b' })];
    const [b] = scoreboard(runs, { agent: 'b' });
    expect(b.noiseFloor).toMatchObject({ n: 2, mean: 150 });
    expect(scoreboard(runs, { agent: 'b' })).toEqual(scoreboard(runs.filter((r) => r.agent === 'b')));
    expect(scoreboard(runs).map((r) => r.noiseFloor!.n)).toEqual([5, 5]);
  });

  it('compares intervals edge-inclusively, with a zero-width floor of identical scores', () => {
    const floor = { n: 3, mean: 10, ci95: [10, 10] as [number, number] };
    expect(distinguishable({ mean: 10, ci95: null }, floor)).toBe(false);
    expect(distinguishable({ mean: 20, ci95: [10, 30] }, floor)).toBe(false);
    // Clear of a zero-width floor is not claimed: identical baselines measured no spread.
    expect(distinguishable({ mean: 20, ci95: [10.5, 30] }, floor)).toBeNull();
    expect(zeroWidthCaveat({ mean: 20, ci95: [10.5, 30] }, floor)).toMatch(/^the noise floor's 3 baseline gradings are all identical: a zero-width interval measures no spread/);
    expect(distinguishable({ mean: 5, ci95: [0, 9.9] }, { n: 3, mean: 10, ci95: [9.95, 10.05] })).toBe(true);
    expect(zeroWidthCaveat({ mean: 5, ci95: [0, 9.9] }, { n: 3, mean: 10, ci95: [9.95, 10.05] })).toBeUndefined();
    // Nor clear of a floor by two identical best scores (n = 2).
    expect(distinguishable({ mean: 40, ci95: [40, 40] }, { n: 3, mean: 10, ci95: [9, 11] })).toBeNull();
    expect(distinguishable({ mean: null, ci95: null }, floor)).toBeNull();
    expect(distinguishable({ mean: 20, ci95: null }, null)).toBeNull();
    const tenths = noiseFloors([0.1, 0.1, 0.1].map((b, i) => graded(`t${i}`, b, null))).values().next().value!;
    expect(distinguishable({ mean: 0.1, ci95: null }, tenths)).toBe(false); // 0.1 + 0.1 + 0.1 ≠ 0.3 in binary
  });

  it("reads BaselineEvaluated.cached into the run analysis as baselineCached", async () => {
    const { events, blobs } = sampleRun('fx-cached');
    expect((await analyzeRun(events, blobs)).baselineCached).toBe(false);
    const reused = events.map((e) => (e.type === 'BaselineEvaluated' ? buildEvent('BaselineEvaluated', e.runId, e.seq, e.occurredAt, { score: 10, cached: true }) : e));
    expect((await analyzeRun(reused, blobs)).baselineCached).toBe(true);
    expect((await analyzeRun(events.filter((e) => e.type !== 'BaselineEvaluated'), blobs)).baselineCached).toBeNull();
  });

  it('shows N, the noise floor and the mark in the CLI table, with the footnote only when a row is marked', () => {
    const rows = scoreboard([...regraded, cached('b1', 14), cached('b2', 16)]);
    const lines = scoreboardTable(rows).split('\n');
    expect(lines[0]).toMatch(/^TASK +AGENT +DRIVER +RUNS +N +BASELINE +BEST \(95% CI\) +NOISE FLOOR \(95% CI, N\) +IMPROVEMENT/);
    expect(lines[1]).toMatch(/ 3 +3 +12\.0 +55\.0 \[17\.7, 92\.3\] +12\.0 \[7\.0, 17\.0\], 3 /);
    expect(lines[2]).toMatch(/ 2 +2 +10\.0 +15\.0 \[2\.3, 27\.7\] \* +12\.0 \[7\.0, 17\.0\], 3 /);
    expect(lines[3]).toBe(NOT_DISTINGUISHABLE);
    expect(NOT_DISTINGUISHABLE).toMatch(/^\* not distinguishable from noise/);
    const clear = scoreboardTable(scoreboard(regraded)).split('\n');
    expect(clear).toHaveLength(2);
    expect(scoreboardTable(scoreboard([cached('b1', 14)]))).toMatch(/ 1 +1 +10\.0 +14\.0 +- +/);
  });
});

describe('scoreboard: runs that say nothing about the agent', () => {
  const setupFailed = (runId: string) => run(runId, null, { cls: 'infra_setup' });
  const withState = <T extends RunAnalysis>(a: T, state: RunAnalysis['state']): T => ({ ...a, state });

  it('leaves out set-up failures and cancelled runs by default, and counts them with includeUnfinished', () => {
    const runs = [run('ok', 40), withState({ ...setupFailed('sf'), baseline: null }, 'setup_failed'), withState(run('cx', 70, { cls: 'cancelled' }), 'cancelled')];
    const [row] = scoreboard(runs);
    expect([row.runIds, row.runs, row.best.mean, row.failureClasses]).toEqual([['ok'], 1, 40, [{ class: 'success', count: 1 }]]);
    const [all] = scoreboard(runs, { includeUnfinished: true });
    expect([all.runIds, all.runs, all.unscoredRuns]).toEqual([['cx', 'ok', 'sf'], 3, 1]);
    expect(all.failureClasses).toEqual([{ class: 'cancelled', count: 1 }, { class: 'infra_setup', count: 1 }, { class: 'success', count: 1 }]);
    expect(scoreboardRuns(runs, {}).map((a) => a.runId)).toEqual(['ok']);
    expect(scoreboard([runs[1]])).toEqual([]);
  });

  it('keeps interrupted runs (the harness failed them) and counts no failure class for a run still going', () => {
    const [row] = scoreboard([withState(run('int', null, { cls: 'infra_error' }), 'interrupted'), withState(run('live', null), 'running')]);
    expect([row.runIds, row.failureClasses]).toEqual([['int', 'live'], [{ class: 'infra_error', count: 1 }]]);
  });

  it("still counts a cancelled run's fresh baseline grading towards the noise floor", () => {
    const fresh = (runId: string, baseline: number, state: RunAnalysis['state'] = 'completed') => withState(analysisFixture({ runId, baseline, baselineCached: false }), state);
    const [row] = scoreboard([fresh('a', 10), fresh('b', 12, 'cancelled')]);
    expect([row.runIds, row.noiseFloor?.n]).toEqual([['a'], 2]);
  });
});
