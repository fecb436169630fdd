import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { failureClassOf } from '../../projections/run-analysis/analyze.js';
import type { RunListRow } from '../../projections/run-list/run-list.entity.js';
import { liveRun, type LiveRun } from '../runs/run-liveness.js';
import { sortRuns, type RunSort } from './run-listing.js';

// `a2rl runs`: the run-list rows with what each run's analysis adds, filtered and ordered as GET /runs does.

/** What `a2rl runs` filters on (values already checked by the CLI's parsers). */
export interface RunFilter {
  task?: string;
  agent?: string;
  driver?: string;
  state?: string;
  failureClass?: string;
  sort: RunSort;
  limit: number;
  offset: number;
}

/** Whether the filter keeps fewer than every run (for the "no runs match" / "no runs recorded yet" line). */
export const filters = (f: RunFilter): boolean =>
  [f.task, f.agent, f.driver, f.state, f.failureClass].some((v) => v !== undefined) || f.limit !== Infinity || f.offset > 0;

/** One run as `a2rl runs` lists it: its run-list row with what its analysis adds (the attributed driver, scores, duration). */
export interface ListedRun {
  runId: string;
  task: string | null;
  agent: string | null;
  /** The model the agent called most, else the declared one (as on the scoreboard). */
  driver: string | null;
  declaredDriver: string | null;
  baseModel: string | null;
  state: RunListRow['state'];
  baseline: number | null;
  best: number | null;
  improvement: number | null;
  submissions: number;
  scheduledAt: string | null;
  durationS: number | null;
  eventCount: number;
  lastSeq: number;
  lastEventAt: string;
}

function listed(row: RunListRow, a: RunAnalysis | undefined): ListedRun {
  return {
    runId: row.runId, task: row.task, agent: row.agent, driver: a ? a.driver : row.driver, declaredDriver: row.driver, baseModel: row.baseModel, state: row.state,
    baseline: a?.baseline ?? null, best: a?.best ?? null, improvement: a?.improvement ?? null, submissions: a?.submissions.length ?? 0,
    scheduledAt: row.scheduledAt, durationS: a?.durationS ?? null, eventCount: row.eventCount, lastSeq: row.lastSeq, lastEventAt: row.lastEventAt,
  };
}

/**
 * The runs the filter keeps, in the order asked for: the run-list rows with their analyses (driver
 * and failure class as GET /runs reads them; no failure class before a run has ended). An open run
 * whose harness is `gone` is listed interrupted (run-liveness.ts).
 */
export function matchingRuns(rows: RunListRow[], analyses: RunAnalysis[], f: RunFilter, gone: ReadonlySet<string>): LiveRun<ListedRun>[] {
  const byRun = new Map(analyses.map((a) => [a.runId, a]));
  const runs = rows.map((r) => liveRun(listed(r, byRun.get(r.runId)), gone));
  const analysed = (r: LiveRun<ListedRun>) => {
    if (f.driver === undefined && f.failureClass === undefined) return true;
    const a = byRun.get(r.runId);
    return !!a && (f.driver === undefined || a.driver === f.driver) && (f.failureClass === undefined || (!r.harnessGone && failureClassOf(a) === f.failureClass));
  };
  const kept = runs.filter((r) => (f.task === undefined || r.task === f.task) && (f.agent === undefined || r.agent === f.agent) && (f.state === undefined || r.state === f.state) && analysed(r));
  return sortRuns(kept, f.sort).slice(f.offset, f.offset + f.limit);
}
