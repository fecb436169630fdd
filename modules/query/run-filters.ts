import type { FailureClass } from '../../projections/run-analysis/analysis.types.js';
import { RUN_STATES } from '../ledger/run-lifecycle.js';

// The values the run filters accept (GET /runs' query and `a2rl runs`), without the DTOs' decorators
// (query.dto.ts), so the CLI names them in its help without loading the HTTP side.

const FAILURE_CLASS_SET: Record<FailureClass, true> = {
  success: true, timeout_no_submission: true, copy_model_fallback: true, code_error_runtime: true, rollout_logic_wrong: true,
  training_diverged: true, invalid_checkpoint: true, no_improvement: true, agent_crash: true, infra_error: true,
  infra_setup: true, infra_llm_limit: true, infra_model_unreachable: true, cancelled: true,
};
export const FAILURE_CLASSES = Object.keys(FAILURE_CLASS_SET) as FailureClass[];
export { RUN_STATES };
