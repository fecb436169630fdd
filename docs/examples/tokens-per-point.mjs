// A user projection (docs/analysis.md "User projections"): output tokens the agent's model spent per
// point of improvement over the baseline, per driver. Register it with
//   a2rl projections add docs/examples/tokens-per-point.mjs
// and read it with
//   a2rl query "SELECT * FROM tokens_per_point ORDER BY driver"

export const name = 'tokens_per_point';
export const version = 1;
export const columns = {
  driver: 'VARCHAR',
  runs: 'INTEGER',
  output_tokens: 'BIGINT',
  improvement_points: 'DOUBLE',
  tokens_per_point: 'DOUBLE',
};

// Per run: its declared driver (RunScheduled), the model that answered its calls, tokens, baseline, best score.
export const initialState = { runs: {} };

export function evolve(state, event) {
  const run = (state.runs[event.runId] ??= { driver: null, answered: null, tokens: 0, baseline: null, best: null });
  const d = event.data;
  switch (event.type) {
    case 'RunScheduled':
      run.driver = d.driver ?? null;
      break;
    case 'LlmCallRecorded':
      run.answered ??= d.modelAnswered ?? null;
      run.tokens += d.usage?.outputTokens ?? 0;
      break;
    case 'BaselineEvaluated':
      run.baseline = d.score;
      break;
    case 'SubmissionGraded':
      run.best = run.best === null ? d.score : Math.max(run.best, d.score);
      break;
  }
  return state;
}

export function rows(state) {
  const byDriver = new Map();
  for (const id of Object.keys(state.runs).sort()) {
    const r = state.runs[id];
    const driver = r.answered ?? r.driver ?? 'none';
    const row = byDriver.get(driver) ?? { driver, runs: 0, output_tokens: 0, improvement_points: 0 };
    row.runs += 1;
    row.output_tokens += r.tokens;
    if (r.baseline !== null && r.best !== null) row.improvement_points += Math.max(0, r.best - r.baseline);
    byDriver.set(driver, row);
  }
  return [...byDriver.values()]
    .sort((a, b) => (a.driver < b.driver ? -1 : a.driver > b.driver ? 1 : 0))
    .map((r) => ({ ...r, improvement_points: Math.round(r.improvement_points * 1e6) / 1e6, tokens_per_point: r.improvement_points > 0 ? r.output_tokens / r.improvement_points : null }));
}
