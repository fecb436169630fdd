import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { defineRunProjection } from '../run-projection.js';
import { analyzeRun, failureClassOf } from './analyze.js';
import type { RunAnalysis } from './analysis.types.js';
import { RunAnalysisRow } from './run-analysis.entity.js';

/** The post-hoc analysis of every run (docs/analysis.md), recomputed from the run's stream. */
export const runAnalysisProjection = defineRunProjection<RunAnalysisRow>({
  name: 'run-analysis',
  // 2: analysis carries the workspace path. 3: code changes' line counts from the one line diff (line-diff.ts) over blobs, not from the events.
  // 3 also: process kinds computed here from the facts (process-kind.ts), not read from ProcessStarted.
  // 4: times are observation times (eventTime: a fact's observedAt, else occurredAt).
  // 5: LLM usage from LlmCallRecorded (analysis.llm); `driver` is the model the agent used, `declaredDriver` RunScheduled's;
  //    infrastructure classes infra_setup, infra_llm_limit, infra_model_unreachable.
  // 6: baselineCached (BaselineEvaluated.cached: the scoreboard's noise floor counts fresh baseline gradings).
  // 7: states setup_failed and cancelled, failure class cancelled (RunInterrupted.cause, AgentExited.stoppedBy).
  // 8: failureClass null until the run has ended (failureClassOf), not the provisional class of a run in progress.
  // 9: the driver is the most-used model the upstream answered as (a name only requested never decides it).
  // 10: interruptions by a lost harness (a resumed run is one run); durationS is agent time, the harness's downtime left out.
  version: 10,
  entity: RunAnalysisRow,
  async analyze(events, blobs) {
    return analysisRow(await analyzeRun(events, blobs));
  },
});

/** The stored row of a run's analysis (`a2rl verify` builds it from AnalysisEvents, the runner from every event). */
export function analysisRow(a: RunAnalysis): RunAnalysisRow {
  return {
    runId: a.runId,
    task: a.task,
    agent: a.agent,
    driver: a.driver,
    baseModel: a.baseModel,
    state: a.state,
    baseline: a.baseline,
    best: a.best,
    improvement: a.improvement,
    failureClass: failureClassOf(a),
    routeBest: a.route.best,
    validSubmissionRate: a.metrics.valid_submission_rate,
    submissions: a.submissions.length,
    scheduledAt: a.scheduledAt,
    lastSeq: a.lastSeq,
    analysis: canonicalJson(a),
  };
}
