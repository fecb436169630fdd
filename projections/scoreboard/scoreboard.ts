import { isUnfinished } from '../../modules/ledger/run-lifecycle.js';
import type { FailureClass, Route, RunAnalysis } from '../run-analysis/analysis.types.js';
import { failureClassOf } from '../run-analysis/analyze.js';
import { modelKey } from '../run-analysis/llm.js';
import { infraOutcome } from '../run-analysis/outcome-badge.js';

/**
 * The scoreboard, a pure fold of run analyses (the run-analysis projection's rows) into one row per
 * task × agent × driver. Writing runs out as results.csv is modules/reports/results-csv.ts.
 *
 * Per run, the best-of-budget score is the best graded score; a run with no graded submission
 * keeps the base model, so its best-of-budget is its baseline (improvement 0). A run with neither
 * (no baseline either, e.g. an infra error before grading) is left out of the score means and
 * counted in `unscoredRuns`.
 *
 * The 95% interval of the best-of-budget mean is the Student-t interval across runs:
 * mean ± t(0.975, n−1) · s/√n with s the sample standard deviation. t comes from a table for
 * n−1 ≤ 30 and from the Cornish–Fisher expansion of the normal quantile beyond (error < 1e-4).
 * With one scored run there is no interval (null).
 *
 * The driver is the analysis's: the model the upstream answered the agent's calls as, most used
 * (LlmCallRecorded.modelAnswered; a name the agent only asked for never decides it), else the one
 * declared with --driver; so a run is counted under the model that actually drove it, and
 * `driverMismatches` counts the group's runs that were declared with another. Drivers that differ
 * only in case or a `provider/` prefix are one row (and one filter value), shown under the name most
 * of its runs have.
 *
 * Measurement validity: a task's noise floor is what grading the unchanged base model again and
 * again gives. Among the runs in scope (after the filter), every baseline graded afresh for its run
 * (BaselineEvaluated with cached = false; a campaign with regradeBaseline grades one per run) of the
 * same task and base model is a sample, and so is every repeated grading of a run's base model
 * (GradingRepeated, `--baseline-repeats`); with two or more, the floor is their mean and Student-t 95%
 * interval. Beside it, `evaluationNoise` pools the spread of every checkpoint graded repeatedly in
 * the row's runs (base models and, after `a2rl regrade --repeat k`, submissions): the standard
 * deviation one grading of one checkpoint has. A row whose best-of-budget interval overlaps the floor's (or, with one scored run and so
 * no interval, whose mean lies inside it) is not distinguishable from noise.
 *
 * Runs whose agent never got its budget — set-up failed (state setup_failed) or stopped by the
 * operator or a campaign (cancelled) — say nothing about the agent: they are left out unless the
 * filter's `includeUnfinished` asks for them (their fresh baseline gradings still count towards the
 * noise floor). Failure classes are counted for ended runs only.
 */
export interface NoiseFloor {
  /** Fresh baseline gradings of the task's base model among the runs in scope (≥ 2). */
  n: number;
  mean: number;
  ci95: [number, number];
}

/** The pooled sample standard deviation of repeated gradings of the same checkpoints. */
export interface EvaluationNoise {
  /** Checkpoints graded at least twice (one series each). */
  checkpoints: number;
  gradings: number;
  std: number;
}

export interface ScoreboardRow {
  task: string | null;
  agent: string | null;
  driver: string | null;
  runs: number;
  /** Scored runs: the n of `best` (runs − unscoredRuns). */
  n: number;
  /** Runs whose declared driver (--driver) names another model than the one their calls went to. */
  driverMismatches: number;
  unscoredRuns: number;
  baseline: number | null;
  best: { mean: number | null; ci95: [number, number] | null };
  /** The task's noise floor (see the module comment); null with fewer than two fresh baseline gradings, or runs of several base models. */
  noiseFloor: NoiseFloor | null;
  /** false: "not distinguishable from noise" (best overlaps the noise floor); true: clear of it; null: no floor, no scored run, or an interval of zero width (see `caveat`). */
  distinguishable: boolean | null;
  /** Present when an interval has zero width (identical scores): it measures no spread, so no verdict is given; says which and why. */
  caveat?: string;
  /** Null until some checkpoint of the row's runs was graded at least twice. */
  evaluationNoise: EvaluationNoise | null;
  improvement: number | null;
  validSubmissionRate: number | null;
  route: Route | null;
  failureClasses: { class: FailureClass; count: number }[];
  runIds: string[];
}

export interface ScoreboardFilter {
  task?: string;
  agent?: string;
  driver?: string;
  /** Count runs in state setup_failed or cancelled too (left out by default; see the module comment). */
  includeUnfinished?: boolean;
  /** Count LLM-driven runs that tested the infrastructure, not the agent (outcome-badge.ts; left out by default). */
  includeInfra?: boolean;
}

/** t(0.975, df) for df = 1..30. */
const T975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101,
  2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

export function tQuantile975(df: number): number {
  if (!Number.isInteger(df) || df < 1) throw new RangeError(`degrees of freedom must be a positive integer, got ${df}`);
  if (df <= T975.length) return T975[df - 1];
  const z = 1.959964;
  const z3 = z ** 3;
  const z5 = z ** 5;
  return z + (z3 + z) / (4 * df) + (5 * z5 + 16 * z3 + 3 * z) / (96 * df ** 2);
}

const mean = (xs: number[]): number | null => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);

export function meanCi95(xs: number[]): { mean: number | null; ci95: [number, number] | null } {
  const m = mean(xs);
  if (m === null || xs.length < 2) return { mean: m, ci95: null };
  const s = Math.sqrt(xs.reduce((acc, x) => acc + (x - m) ** 2, 0) / (xs.length - 1));
  const half = (tQuantile975(xs.length - 1) * s) / Math.sqrt(xs.length);
  return { mean: m, ci95: [m - half, m + half] };
}

/** Best-of-budget score of one run (see the module comment), or null when unscored. */
export function bestOfBudget(a: RunAnalysis): number | null {
  return a.best ?? a.baseline;
}

const key = (s: string | null) => s ?? '';
const byText = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);

function mostFrequent<T extends string>(values: T[]): T | null {
  const counts = new Map<T, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts.entries()].sort((p, q) => q[1] - p[1] || byText(p[0], q[0]))[0]?.[0] ?? null;
}

/** The runs matching every given field of the filter (exact match). */
export function filterRuns<T extends RunAnalysis>(runs: readonly T[], filter: ScoreboardFilter): T[] {
  return runs.filter(
    (a) =>
      (filter.task === undefined || a.task === filter.task) &&
      (filter.agent === undefined || a.agent === filter.agent) &&
      (filter.driver === undefined || (a.driver !== null && modelKey(a.driver) === modelKey(filter.driver))),
  );
}

/** The runs the scoreboard counts: those matching the filter, without set-up failures, cancelled runs and infrastructure outcomes unless included. */
export function scoreboardRuns<T extends RunAnalysis>(runs: readonly T[], filter: ScoreboardFilter): T[] {
  return filterRuns(runs, filter).filter((a) => (filter.includeUnfinished === true || !isUnfinished(a.state)) && (filter.includeInfra === true || infraOutcome(a) === null));
}

/** Slack for comparing scores that went through sums (a floor of identical scores has a zero-width interval). */
const EPSILON = 1e-9;

/** Noise floors by task × base model, from the baselines graded afresh among `runs`. */
export function noiseFloors(runs: readonly RunAnalysis[]): Map<string, NoiseFloor> {
  const samples = new Map<string, number[]>();
  for (const a of runs) {
    // `=== false`: an analysis stored before baselineCached existed reads as unknown, not fresh.
    if (a.task === null || a.baseModel === null) continue;
    const fresh = a.baselineCached === false && a.baseline !== null ? [a.baseline] : [];
    // A baseline series already counts the fresh BaselineEvaluated it repeats (grading-repeats.ts).
    const repeated = (a.gradingRepeats ?? []).filter((s) => s.subject === 'baseline');
    const scores = repeated.length ? repeated.flatMap((s) => s.scores) : fresh;
    if (!scores.length) continue;
    const k = floorKey(a.task, a.baseModel);
    samples.set(k, [...(samples.get(k) ?? []), ...scores]);
  }
  const floors = new Map<string, NoiseFloor>();
  for (const [k, scores] of samples) {
    const { mean: m, ci95 } = meanCi95(scores);
    if (m !== null && ci95 !== null) floors.set(k, { n: scores.length, mean: m, ci95 });
  }
  return floors;
}

const floorKey = (task: string, baseModel: string) => JSON.stringify([task, baseModel]);

/** The floor of the row's task and base model; null when its runs have no single base model. */
function floorOf(runs: readonly RunAnalysis[], floors: Map<string, NoiseFloor>): NoiseFloor | null {
  const models = new Set(runs.map((a) => a.baseModel));
  const [model] = models;
  if (models.size !== 1 || model === null || runs[0].task === null) return null;
  return floors.get(floorKey(runs[0].task, model)) ?? null;
}

/** Pooled over every series of two or more scores: sqrt(Σ(nᵢ−1)·sᵢ² / Σ(nᵢ−1)). */
export function evaluationNoise(runs: readonly RunAnalysis[]): EvaluationNoise | null {
  let checkpoints = 0;
  let gradings = 0;
  let squares = 0;
  let df = 0;
  for (const series of runs.flatMap((a) => a.gradingRepeats ?? [])) {
    const xs = series.scores;
    if (xs.length < 2) continue;
    const m = xs.reduce((p, q) => p + q, 0) / xs.length;
    squares += xs.reduce((acc, x) => acc + (x - m) ** 2, 0);
    df += xs.length - 1;
    checkpoints += 1;
    gradings += xs.length;
  }
  return df ? { checkpoints, gradings, std: Math.sqrt(squares / df) } : null;
}

/**
 * Why no verdict on noise is given although there is a floor and a score: an interval of zero width
 * (every score the same, as two gradings at n = 2 often are) measures no spread, so "clear of noise"
 * would claim a certainty nothing measured. Undefined when both intervals have some width.
 */
export function zeroWidthCaveat(best: ScoreboardRow['best'], floor: NoiseFloor | null): string | undefined {
  if (floor === null || best.mean === null) return undefined;
  const zero = (ci: [number, number] | null) => ci !== null && ci[1] - ci[0] <= EPSILON;
  const which = [zero(best.ci95) ? 'the best scores' : null, zero(floor.ci95) ? `the noise floor's ${floor.n} baseline gradings` : null].filter((w): w is string => w !== null);
  if (!which.length) return undefined;
  return `${which.join(' and ')} ${which.length > 1 ? 'are' : 'are all'} identical: a zero-width interval measures no spread, not certainty; grade more runs or repeat gradings (--baseline-repeats) before calling it clear of noise`;
}

/**
 * Whether the best-of-budget estimate is clear of the noise floor (see the module comment). Overlap is
 * "not distinguishable" whatever the widths; "clear" is never claimed from an interval of zero width
 * (null, and the row says why: zeroWidthCaveat).
 */
export function distinguishable(best: ScoreboardRow['best'], floor: NoiseFloor | null): boolean | null {
  if (floor === null || best.mean === null) return null;
  const [low, high] = best.ci95 ?? [best.mean, best.mean];
  const clear = low > floor.ci95[1] + EPSILON || high < floor.ci95[0] - EPSILON;
  return clear && zeroWidthCaveat(best, floor) !== undefined ? null : clear;
}

/** One row per task × agent × driver, ordered by task, agent, driver (nulls first). */
export function scoreboard(analyses: readonly RunAnalysis[], filter: ScoreboardFilter = {}): ScoreboardRow[] {
  const inScope = scoreboardRuns(analyses, filter);
  // A baseline graded afresh measures the grader, whatever became of the run: cancelled runs' count too.
  const floors = noiseFloors(filterRuns(analyses, filter));
  const groups = new Map<string, RunAnalysis[]>();
  for (const a of inScope) {
    const k = JSON.stringify([key(a.task), key(a.agent), a.driver === null ? null : modelKey(a.driver)]);
    groups.set(k, [...(groups.get(k) ?? []), a]);
  }
  const rows = [...groups.values()].map((runs): ScoreboardRow => {
    const sorted = [...runs].sort((p, q) => byText(p.runId, q.runId));
    const scored = sorted.filter((a) => bestOfBudget(a) !== null);
    const improvements = scored.filter((a) => a.baseline !== null).map((a) => bestOfBudget(a)! - a.baseline!);
    const failures = new Map<FailureClass, number>();
    for (const cls of sorted.map(failureClassOf)) if (cls !== null) failures.set(cls, (failures.get(cls) ?? 0) + 1);
    const best = meanCi95(scored.map((a) => bestOfBudget(a)!));
    const noiseFloor = floorOf(sorted, floors);
    const verdict = distinguishable(best, noiseFloor);
    // The caveat explains a verdict withheld (an overlap needs none).
    const caveat = verdict === null ? zeroWidthCaveat(best, noiseFloor) : undefined;
    return {
      task: sorted[0].task,
      agent: sorted[0].agent,
      driver: sorted[0].driver === null ? null : mostFrequent(sorted.map((a) => a.driver!)),
      runs: sorted.length,
      n: scored.length,
      driverMismatches: sorted.filter((a) => a.driverMismatch === true).length,
      unscoredRuns: sorted.length - scored.length,
      baseline: mean(sorted.flatMap((a) => (a.baseline === null ? [] : [a.baseline]))),
      best,
      noiseFloor,
      distinguishable: verdict,
      ...(caveat ? { caveat } : {}),
      evaluationNoise: evaluationNoise(sorted),
      improvement: mean(improvements),
      validSubmissionRate: mean(sorted.flatMap((a) => (a.metrics.valid_submission_rate === null ? [] : [a.metrics.valid_submission_rate]))),
      route: mostFrequent(sorted.map((a) => a.route.best)),
      failureClasses: [...failures.entries()].map(([c, count]) => ({ class: c, count })).sort((p, q) => q.count - p.count || byText(p.class, q.class)),
      runIds: sorted.map((a) => a.runId),
    };
  });
  return rows.sort((p, q) => byText(key(p.task), key(q.task)) || byText(key(p.agent), key(q.agent)) || byText(key(p.driver), key(q.driver)));
}
