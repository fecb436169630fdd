// The badge a run is shown with (runs list, run page): its lifecycle state, except where the state
// alone would mislead. An LLM-driven run that ended `completed` although its agent never got an
// answer from its model, or its infrastructure failed, did not test the agent (a limit the operator set, infra_llm_limit, did: it keeps its state): it is shown by its
// failure class (amber, never a green "completed"), and left off scoreboards unless asked
// (--include-infra). Derived from the projection's failure class, not a lifecycle state: a better rule
// is applied to every old run by a rebuild. No imports: the dashboard's page bundles this file too.

/** What the rule reads of a RunAnalysis (structural, so the page's own RunAnalysis type fits). */
export interface OutcomeInput {
  state: string | null;
  failure: { class: string };
  llm?: unknown;
}

/** Failure classes that say the run tested the infrastructure, not the agent (FailureClass values). */
const INFRA: ReadonlySet<string> = new Set<string>(['infra_error', 'infra_setup', 'infra_model_unreachable']);

/**
 * The failure class to badge an ended, LLM-driven run with instead of `completed`, or null (shown by
 * its state). Runs that are not LLM-driven keep their state badge: their failure class is on the
 * page beside it, as before.
 */
export function infraOutcome(a: OutcomeInput): string | null {
  if (a.state !== 'completed' || !a.llm) return null;
  return INFRA.has(a.failure.class) ? a.failure.class : null;
}
