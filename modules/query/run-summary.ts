import { failureClassOf } from '../../projections/run-analysis/analyze.js';
import { infraOutcome } from '../../projections/run-analysis/outcome-badge.js';
import type { ResultsRun } from '../reports/results-csv.js';
import type { LiveRun } from '../runs/run-liveness.js';

/**
 * What GET /runs lists per run (the full analysis is GET /runs/:id), and what the dashboard's
 * GET /live pushes when a run changes. No failure class until the run has ended in the ledger (an
 * open run shown interrupted because its harness is gone has none yet).
 */
export function runSummary(r: LiveRun<ResultsRun>) {
  return {
    runId: r.runId, task: r.task, agent: r.agent, driver: r.driver, declaredDriver: r.declaredDriver ?? null, driverMismatch: r.driverMismatch ?? false, baseModel: r.baseModel, state: r.state, scheduledAt: r.scheduledAt, durationS: r.durationS,
    ...(r.harnessGone ? { harnessGone: true } : {}),
    baseline: r.baseline, best: r.best, improvement: r.improvement, submissions: r.submissions.length,
    failureClass: r.harnessGone ? null : failureClassOf(r), outcome: r.harnessGone ? null : infraOutcome(r), route: r.route.best, lastSeq: r.lastSeq,
  };
}

export type RunSummaryItem = ReturnType<typeof runSummary>;
