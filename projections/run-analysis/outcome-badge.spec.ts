import { describe, expect, it } from '@jest/globals';
import { scoreboard } from '../scoreboard/scoreboard.js';
import type { RunAnalysis } from './analysis.types.js';
import { infraOutcome } from './outcome-badge.js';
import { analysisFixture } from './testing/run-fixture.js';

// An LLM-driven run that ended `completed` although its agent never reached its model (or the
// infrastructure failed) is badged by its failure class, and stays off the scoreboard unless asked.

const llm = {} as NonNullable<RunAnalysis['llm']>; // present: the run is LLM-driven (the rule reads nothing else of it)
const run = (runId: string, over: Partial<RunAnalysis>) => analysisFixture({ runId, baseline: 10, best: null, ...over });
const classed = (cls: RunAnalysis['failure']['class']): RunAnalysis => ({ ...unreachable, failure: { class: cls, rule: 'r', evidence: [] } });
const unreachable = run('llm-unreachable', { llm, failure: { class: 'infra_model_unreachable', rule: 'model_never_called', evidence: [3, 9] } });

describe('the outcome badge of an LLM-driven run', () => {
  it('is the failure class for a completed LLM run that tested the infrastructure, else none', () => {
    expect(infraOutcome(unreachable)).toBe('infra_model_unreachable');
    expect(infraOutcome(classed('infra_error'))).toBe('infra_error');
    // Not LLM-driven, not completed, or a class about the agent (or the operator's own limit): its state.
    expect(infraOutcome({ ...unreachable, llm: null })).toBeNull();
    expect(infraOutcome({ ...unreachable, state: 'running' })).toBeNull();
    expect(infraOutcome(classed('no_improvement'))).toBeNull();
    expect(infraOutcome(classed('infra_llm_limit'))).toBeNull();
  });

  it('keeps such runs off the scoreboard unless includeInfra asks for them', () => {
    const honest = run('llm-ok', { llm, best: 30, failure: { class: 'success', rule: 'best_above_baseline', evidence: [] } });
    expect(scoreboard([unreachable, honest]).flatMap((r) => r.runIds)).toEqual(['llm-ok']);
    expect(scoreboard([unreachable, honest], { includeInfra: true }).flatMap((r) => r.runIds)).toEqual(['llm-ok', 'llm-unreachable']);
  });
});
