import type { FailureClass, Route, RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { failureClassOf } from '../../projections/run-analysis/analyze.js';
import { bestOfBudget, evaluationNoise, meanCi95, noiseFloors, scoreboard, scoreboardRuns } from '../../projections/scoreboard/scoreboard.js';
import { FAILURE_CLASSES } from '../query/run-filters.js';

// The paper's analysis tables from one campaign's runs (docs/analysis.md "The paper's tables"): a
// pure function of the run analyses, each cell carrying the runs it was computed from.

/** A run as the tables see it: its analysis, plus RunScheduled's seed and its task's level. */
export interface TableRun extends RunAnalysis {
  seed: number | null;
  level: string | null;
}

export interface Cell {
  /** The value (null: no value, shown as '-'). */
  value: number | string | boolean | null;
  /** The runs the value was computed from, by run id (empty for a row's key cells). */
  runs: string[];
}

export interface AnalysisTable {
  id: 'improvement' | 'routes' | 'failures' | 'driver_effect' | 'by_level' | 'noise';
  title: string;
  /** The key columns come first; the others hold values. */
  keys: number;
  columns: string[];
  rows: Cell[][];
}

export interface AnalysisReport {
  campaignId: string;
  /** Every run counted somewhere, with the reference (R1, R2, …) text outputs cite it by. */
  runs: { ref: string; runId: string; task: string | null; agent: string | null; driver: string | null; seed: number | null; level: string | null; state: string | null }[];
  tables: AnalysisTable[];
}

const ROUTES: Route[] = ['sft', 'dpo', 'grpo', 'ppo', 'online_rl_other', 'copy_model', 'none'];
const byText = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
const key = (c: string | null) => ({ value: c, runs: [] }) satisfies Cell;
const ids = (runs: readonly RunAnalysis[]) => runs.map((r) => r.runId).sort(byText);
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
/** Sums and means round off at 1e-9 so that printed and JSON values do not carry float noise (0.1 + 0.2). */
const round = (x: number | null) => (x === null ? null : Math.round(x * 1e9) / 1e9);

/** best-of-budget − baseline of one run (the scoreboard's per-run improvement); null without a baseline or score. */
export function runImprovement(a: RunAnalysis): number | null {
  const best = bestOfBudget(a);
  return best === null || a.baseline === null ? null : best - a.baseline;
}

function groupBy<T>(xs: readonly T[], keyOf: (x: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const x of xs) out.set(keyOf(x), [...(out.get(keyOf(x)) ?? []), x]);
  return new Map([...out.entries()].sort((a, b) => byText(a[0], b[0])));
}

/**
 * The six tables. Runs in scope are the scoreboard's (set-up failures, cancelled runs and
 * infrastructure outcomes left out) for every table but the failure taxonomy, which counts every
 * ended run, infrastructure classes included.
 */
export function analysisTables(campaignId: string, all: readonly TableRun[]): AnalysisReport {
  const runs = scoreboardRuns(all, {});
  const tables: AnalysisTable[] = [];

  // 1. Improvement per task × agent × driver, with intervals and the noise floor (the scoreboard's rows).
  const rows = scoreboard(all, {});
  tables.push({
    id: 'improvement',
    title: 'Improvement per task × agent × driver',
    keys: 3,
    columns: ['task', 'agent', 'driver', 'n', 'baseline', 'best (mean)', 'best 95% CI low', 'best 95% CI high', 'improvement', 'noise floor', 'floor 95% CI low', 'floor 95% CI high', 'distinguishable'],
    rows: rows.map((r) => {
      const cite = [...r.runIds].sort(byText);
      const c = (value: Cell['value']): Cell => ({ value, runs: cite });
      return [key(r.task), key(r.agent), key(r.driver), c(r.n), c(round(r.baseline)), c(round(r.best.mean)), c(round(r.best.ci95?.[0] ?? null)), c(round(r.best.ci95?.[1] ?? null)),
        c(round(r.improvement)), c(round(r.noiseFloor?.mean ?? null)), c(round(r.noiseFloor?.ci95[0] ?? null)), c(round(r.noiseFloor?.ci95[1] ?? null)), c(r.distinguishable)];
    }),
  });

  // 2. Executed routes per task: the route of each run's best submission (route.best), and how often it differs from what the code declared.
  tables.push({
    id: 'routes',
    title: 'Executed routes per task (runs)',
    keys: 1,
    columns: ['task', ...ROUTES, 'declared ≠ executed'],
    rows: [...groupBy(runs, (a) => a.task ?? '').values()].map((group) => [
      key(group[0].task),
      ...ROUTES.map((route) => {
        const hit = group.filter((a) => a.route.best === route);
        return { value: hit.length, runs: ids(hit) };
      }),
      (() => {
        const differ = group.filter((a) => a.route.declared !== a.route.best);
        return { value: differ.length, runs: ids(differ) };
      })(),
    ]),
  });

  // 3. Failure taxonomy per agent × driver: every ended run, one class each.
  const ended = all.filter((a) => failureClassOf(a) !== null);
  const classes = FAILURE_CLASSES.filter((f) => ended.some((a) => a.failure.class === f));
  tables.push({
    id: 'failures',
    title: 'Failure classes per agent × driver (ended runs)',
    keys: 2,
    columns: ['agent', 'driver', 'runs', ...classes],
    rows: [...groupBy(ended, (a) => JSON.stringify([a.agent, a.driver])).values()].map((group) => [
      key(group[0].agent),
      key(group[0].driver),
      { value: group.length, runs: ids(group) },
      ...classes.map((f: FailureClass) => {
        const hit = group.filter((a) => a.failure.class === f);
        return { value: hit.length, runs: ids(hit) };
      }),
    ]),
  });

  // 4. Driver effect within a scaffold: per agent × task, each driver's mean improvement, and their spread.
  const drivers = [...new Set(runs.map((a) => a.driver ?? '-'))].sort(byText);
  const effectRows: Cell[][] = [];
  for (const group of groupBy(runs, (a) => JSON.stringify([a.agent, a.task])).values()) {
    const means = drivers.map((d) => {
      const hit = group.filter((a) => (a.driver ?? '-') === d && runImprovement(a) !== null);
      return { value: round(mean(hit.map((a) => runImprovement(a)!))), runs: ids(hit) } as Cell;
    });
    const known = means.filter((m) => m.value !== null);
    if (known.length < 2) continue; // one driver: no effect to show
    const values = known.map((m) => m.value as number);
    effectRows.push([key(group[0].agent), key(group[0].task), ...means, { value: round(Math.max(...values) - Math.min(...values)), runs: [...new Set(known.flatMap((m) => m.runs))].sort(byText) }]);
  }
  tables.push({ id: 'driver_effect', title: 'Driver effect within a scaffold: mean improvement per driver', keys: 2, columns: ['agent', 'task', ...drivers, 'spread (max − min)'], rows: effectRows });

  // 5. Improvement by level.
  tables.push({
    id: 'by_level',
    title: 'Improvement by level',
    keys: 1,
    columns: ['level', 'tasks', 'runs', 'mean improvement', '95% CI low', '95% CI high', 'runs improved', 'share improved'],
    rows: [...groupBy(runs, (a) => (a as TableRun).level ?? '-').values()].map((group) => {
      const scored = group.filter((a) => runImprovement(a) !== null);
      const ci = meanCi95(scored.map((a) => runImprovement(a)!));
      const improved = group.filter((a) => a.failure.class === 'success');
      const c = (value: Cell['value'], from: readonly RunAnalysis[] = scored): Cell => ({ value, runs: ids(from) });
      return [key((group[0] as TableRun).level ?? '-'), c(new Set(group.map((a) => a.task)).size, group), c(group.length, group), c(round(ci.mean)), c(round(ci.ci95?.[0] ?? null)), c(round(ci.ci95?.[1] ?? null)),
        c(improved.length, improved), c(round(group.length ? improved.length / group.length : null), group)];
    }),
  });

  // 6. Noise: per task, the noise floor (fresh baseline gradings), the grading SD, and how many rows of table 1 it swallows.
  const floors = noiseFloors(all.filter((a) => a.state !== null));
  tables.push({
    id: 'noise',
    title: 'Evaluation noise per task',
    keys: 1,
    columns: ['task', 'baseline gradings', 'noise floor', 'floor 95% CI low', 'floor 95% CI high', 'grading SD', 'rows within noise', 'rows with a verdict'],
    rows: [...groupBy(runs, (a) => a.task ?? '').values()].map((group) => {
      const models = [...new Set(group.map((a) => a.baseModel))];
      const floor = models.length === 1 && models[0] !== null ? floors.get(JSON.stringify([group[0].task, models[0]])) ?? null : null;
      const fresh = group.filter((a) => a.baselineCached === false || (a.gradingRepeats ?? []).some((s) => s.subject === 'baseline'));
      const sd = evaluationNoise(group);
      const taskRows = rows.filter((r) => r.task === group[0].task && r.distinguishable !== null);
      const within = taskRows.filter((r) => r.distinguishable === false);
      const c = (value: Cell['value'], from: readonly string[]): Cell => ({ value, runs: [...from].sort(byText) });
      return [key(group[0].task), c(floor?.n ?? 0, ids(fresh)), c(round(floor?.mean ?? null), ids(fresh)), c(round(floor?.ci95[0] ?? null), ids(fresh)), c(round(floor?.ci95[1] ?? null), ids(fresh)),
        c(round(sd?.std ?? null), ids(group)), c(within.length, within.flatMap((r) => r.runIds)), c(taskRows.length, taskRows.flatMap((r) => r.runIds))];
    }),
  });

  const cited = new Set(tables.flatMap((t) => t.rows.flatMap((r) => r.flatMap((c) => c.runs))));
  const listed = [...all].filter((a) => cited.has(a.runId)).sort((a, b) => byText(a.task ?? '', b.task ?? '') || byText(a.agent ?? '', b.agent ?? '') || byText(a.driver ?? '', b.driver ?? '') || (a.seed ?? 0) - (b.seed ?? 0) || byText(a.runId, b.runId));
  return {
    campaignId,
    runs: listed.map((a, i) => ({ ref: `R${i + 1}`, runId: a.runId, task: a.task, agent: a.agent, driver: a.driver, seed: a.seed, level: a.level, state: a.state })),
    tables,
  };
}
