import { describe, expect, it } from '@jest/globals';
import type { FailureClass, Route } from '../../projections/run-analysis/analysis.types.js';
import { sampleRun } from '../../projections/run-analysis/testing/run-fixture.js';
import { renderAnalysis } from './analysis-render.js';
import { analysisTables, type AnalysisReport, type Cell, type TableRun } from './analysis-tables.js';

// `a2rl analysis tables` over a 2-task × 2-seed campaign (one agent, two drivers: 8 runs), every
// value worked out by hand below from the runs' baselines and best scores.

interface Spec {
  task: 'ref-arith' | 'ref-judge';
  driver: 'm1' | 'm2';
  seed: number;
  baseline: number;
  best: number | null;
  route: Route;
  declared?: Route;
  cls: FailureClass;
  repeats?: number[];
}

const SPECS: Spec[] = [
  { task: 'ref-arith', driver: 'm1', seed: 0, baseline: 10, best: 30, route: 'sft', cls: 'success', repeats: [30, 32] },
  { task: 'ref-arith', driver: 'm1', seed: 1, baseline: 12, best: 40, route: 'grpo', declared: 'sft', cls: 'success' },
  { task: 'ref-arith', driver: 'm2', seed: 0, baseline: 10, best: null, route: 'none', cls: 'no_improvement' },
  { task: 'ref-arith', driver: 'm2', seed: 1, baseline: 12, best: 16, route: 'sft', cls: 'success' },
  { task: 'ref-judge', driver: 'm1', seed: 0, baseline: 50, best: 80, route: 'sft', cls: 'success' },
  { task: 'ref-judge', driver: 'm1', seed: 1, baseline: 54, best: 82, route: 'sft', cls: 'success' },
  { task: 'ref-judge', driver: 'm2', seed: 0, baseline: 50, best: 50, route: 'copy_model', declared: 'none', cls: 'copy_model_fallback' },
  { task: 'ref-judge', driver: 'm2', seed: 1, baseline: 54, best: 58, route: 'dpo', cls: 'success' },
];

const runId = (s: Spec) => `${s.task}-${s.driver}-s${s.seed}`;

function runs(): TableRun[] {
  return SPECS.map((s) => {
    const a = sampleRun(runId(s)).analysis;
    return {
      ...a,
      runId: runId(s), task: s.task, agent: 'ag', driver: s.driver, declaredDriver: s.driver, baseModel: `${s.task}-base`, state: 'completed',
      baseline: s.baseline, baselineCached: false, best: s.best, improvement: s.best === null ? null : s.best - s.baseline,
      failure: { class: s.cls, rule: 'r', evidence: [] }, route: { best: s.route, declared: s.declared ?? s.route, evidence: [] },
      ...(s.repeats ? { gradingRepeats: [{ subject: 'submission' as const, submissionId: 'sub-1', series: 'x', scores: s.repeats, failed: 0 }] } : {}),
      seed: s.seed, level: s.task === 'ref-arith' ? 'L1' : 'L2',
    };
  });
}

const report: AnalysisReport = analysisTables('cmp-hand', runs());
const table = (id: string) => report.tables.find((t) => t.id === id)!;
const values = (id: string) => table(id).rows.map((r) => r.map((c) => c.value));
const cites = (id: string) => table(id).rows.map((r) => r.map((c) => c.runs));
const ids = (...keys: string[]) => keys.sort();
const close = (got: unknown[][], want: unknown[][]) => {
  expect(got.length).toBe(want.length);
  got.forEach((row, i) => row.forEach((v, j) => (typeof want[i][j] === 'number' ? expect(v).toBeCloseTo(want[i][j] as number, 6) : expect(v).toEqual(want[i][j]))));
};

// Student-t 97.5% quantiles: df 1 → 12.706, df 3 → 3.182.
const T1 = 12.706;
const T3 = 3.182;

describe('analysis tables of a 2-task × 2-seed campaign, by hand', () => {
  it('improvement per task × agent × driver: best-of-budget mean and 95% interval, improvement, the noise floor, the verdict', () => {
    // arith floor: fresh baselines 10, 12, 10, 12 → mean 11, s = √(4/3); judge: 50, 54, 50, 54 → 52, s = √(16/3).
    const arithFloor = [11, 11 - (T3 * Math.sqrt(4 / 3)) / 2, 11 + (T3 * Math.sqrt(4 / 3)) / 2];
    const judgeFloor = [52, 52 - (T3 * Math.sqrt(16 / 3)) / 2, 52 + (T3 * Math.sqrt(16 / 3)) / 2];
    close(values('improvement'), [
      // m1: best 30, 40 → 35 ± 12.706·5 (s = √50, /√2); improvements 20, 28 → 24.
      ['ref-arith', 'ag', 'm1', 2, 11, 35, 35 - T1 * 5, 35 + T1 * 5, 24, ...arithFloor, false],
      // m2: no graded submission keeps the baseline (10), then 16 → 13 ± 12.706·3; improvements 0, 4 → 2.
      ['ref-arith', 'ag', 'm2', 2, 11, 13, 13 - T1 * 3, 13 + T1 * 3, 2, ...arithFloor, false],
      // m1: 80, 82 → 81 ± 12.706·1, clear of [48.33, 55.67]: distinguishable.
      ['ref-judge', 'ag', 'm1', 2, 52, 81, 81 - T1, 81 + T1, 29, ...judgeFloor, true],
      ['ref-judge', 'ag', 'm2', 2, 52, 54, 54 - T1 * 4, 54 + T1 * 4, 2, ...judgeFloor, false],
    ]);
    expect(cites('improvement')[0][8]).toEqual(ids('ref-arith-m1-s0', 'ref-arith-m1-s1'));
  });

  it('executed routes per task, and how often the declared route differs', () => {
    expect(table('routes').columns).toEqual(['task', 'sft', 'dpo', 'grpo', 'ppo', 'online_rl_other', 'copy_model', 'none', 'declared ≠ executed']);
    expect(values('routes')).toEqual([
      ['ref-arith', 2, 0, 1, 0, 0, 0, 1, 1],
      ['ref-judge', 2, 1, 0, 0, 0, 1, 0, 1],
    ]);
    expect(cites('routes')[0][1]).toEqual(ids('ref-arith-m1-s0', 'ref-arith-m2-s1'));
    expect(cites('routes')[0][8]).toEqual(['ref-arith-m1-s1']);
    expect(cites('routes')[1][8]).toEqual(['ref-judge-m2-s0']);
  });

  it('failure classes per agent × driver', () => {
    expect(table('failures').columns).toEqual(['agent', 'driver', 'runs', 'success', 'copy_model_fallback', 'no_improvement']);
    expect(values('failures')).toEqual([
      ['ag', 'm1', 4, 4, 0, 0],
      ['ag', 'm2', 4, 2, 1, 1],
    ]);
    expect(cites('failures')[1][4]).toEqual(['ref-judge-m2-s0']);
  });

  it('driver effect within the scaffold: each driver mean improvement per task and their spread', () => {
    expect(table('driver_effect').columns).toEqual(['agent', 'task', 'm1', 'm2', 'spread (max − min)']);
    close(values('driver_effect'), [
      ['ag', 'ref-arith', 24, 2, 22],
      ['ag', 'ref-judge', 29, 2, 27],
    ]);
    expect(cites('driver_effect')[1][4]).toEqual(ids('ref-judge-m1-s0', 'ref-judge-m1-s1', 'ref-judge-m2-s0', 'ref-judge-m2-s1'));
  });

  it('improvement by level: mean with its interval, and the share of runs that improved', () => {
    // L1: 20, 28, 0, 4 → 13, Σ(x−m)² = 49 + 225 + 169 + 81 = 524; L2: 30, 28, 0, 4 → 15.5, Σ = 210.25 + 156.25 + 240.25 + 132.25 = 739.
    const ci = (m: number, ss: number) => [m - (T3 * Math.sqrt(ss / 3)) / 2, m + (T3 * Math.sqrt(ss / 3)) / 2];
    close(values('by_level'), [
      ['L1', 1, 4, 13, ...ci(13, 524), 3, 0.75],
      ['L2', 1, 4, 15.5, ...ci(15.5, 739), 3, 0.75],
    ]);
  });

  it('noise per task: the floor, the pooled grading SD, and the rows it swallows', () => {
    close(values('noise'), [
      // arith: one checkpoint graded twice (30, 32): SD √2; both rows overlap the floor.
      ['ref-arith', 4, 11, 11 - (T3 * Math.sqrt(4 / 3)) / 2, 11 + (T3 * Math.sqrt(4 / 3)) / 2, Math.SQRT2, 2, 2],
      ['ref-judge', 4, 52, 52 - (T3 * Math.sqrt(16 / 3)) / 2, 52 + (T3 * Math.sqrt(16 / 3)) / 2, null, 1, 2],
    ]);
    expect(cites('noise')[1][6]).toEqual(ids('ref-judge-m2-s0', 'ref-judge-m2-s1'));
  });

  it('lists every cited run once with its seed and level, and every text output cites runs by that list', () => {
    expect(report.runs.map((r) => [r.ref, r.runId, r.seed, r.level])).toEqual([
      ['R1', 'ref-arith-m1-s0', 0, 'L1'], ['R2', 'ref-arith-m1-s1', 1, 'L1'], ['R3', 'ref-arith-m2-s0', 0, 'L1'], ['R4', 'ref-arith-m2-s1', 1, 'L1'],
      ['R5', 'ref-judge-m1-s0', 0, 'L2'], ['R6', 'ref-judge-m1-s1', 1, 'L2'], ['R7', 'ref-judge-m2-s0', 0, 'L2'], ['R8', 'ref-judge-m2-s1', 1, 'L2'],
    ]);
    const md = renderAnalysis(report, 'md');
    expect(md).toContain('| ref-arith | 2 (R1,R4) | 0 | 1 (R2) | 0 | 0 | 0 | 1 (R3) | 1 (R2) |');
    expect(md).toContain('| ag | ref-judge | 29 (R5–R6) | 2 (R7–R8) | 27 (R5–R8) |');
    const csv = renderAnalysis(report, 'csv').split('\r\n');
    expect(csv).toContain('driver_effect,agent=ag;task=ref-judge,spread (max − min),27,ref-judge-m1-s0;ref-judge-m1-s1;ref-judge-m2-s0;ref-judge-m2-s1');
    expect(JSON.parse(renderAnalysis(report, 'json'))).toEqual(JSON.parse(JSON.stringify(report)));
    const html = renderAnalysis(report, 'html');
    // Three inline SVG figures, no script and no external reference.
    expect(html.match(/<svg /g)).toHaveLength(3);
    expect(html).not.toMatch(/<script|href=|src=/);
  });

  it('shows recorded names inert: markdown syntax escaped, HTML escaped, CSV one line per cell', () => {
    const hostile = runs().map((r) => ({ ...r, agent: '<img src=x>|=cmd(),\n\u001b[2J' }));
    const r = analysisTables('c', hostile);
    const md = renderAnalysis(r, 'md');
    expect(md).toContain('\\<img src=x\\>\\|=cmd(),');
    expect(md).not.toContain('\u001b');
    expect(renderAnalysis(r, 'html')).not.toMatch(/<img|\u001b/);
    // One line per cell: the name's line break and escape are shown, never written raw.
    const lines = renderAnalysis(r, 'csv').split('\r\n').filter(Boolean);
    expect(lines.every((l) => /^(table|improvement|routes|failures|driver_effect|by_level|noise),/.test(l))).toBe(true);
    expect(lines.join('')).not.toContain('\u001b');
  });
});

// Keep the Cell type exercised (runs are cited by id).
const _cell: Cell = { value: 1, runs: [] };
void _cell;
