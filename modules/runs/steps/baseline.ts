import { repeatBaseline } from '../../grading/baseline-repeats.js';
import { baseModelHash } from '../../grading/cache-key.js';
import { createEvaluationContext } from '../../serving/model-server.js';
import { loadServingConfig } from '../../serving/serving.config.js';
import type { RunDeps, RunSession } from '../run-session.js';
import type { Prepared } from './prepare.js';

/** What `gradeBaseline` produced: the base model's score, and the servers the run's gradings reuse. */
export interface Baselined {
  score: number;
  /** Model serving and environment servers for the baseline grading and the run's environment. */
  evaluation: ReturnType<typeof createEvaluationContext>;
}

/** The base model graded (from the baseline cache unless asked afresh): BaselineEvaluated, and any GradingRepeated. */
export async function gradeBaseline(deps: RunDeps, s: RunSession, prepared: Prepared): Promise<Baselined> {
  const { task, request } = s;
  const { layout, privateDir, dataManifest, cacheKey } = prepared.workspace;
  const evaluation = evaluationContext(prepared);
  const grade = async () => (await task.evaluate(layout.baseModelDir, privateDir, undefined, evaluation)).score;
  const key = { task: task.id, baseModel: task.baseModel, evaluatorVersion: task.evaluatorVersion, baseModelHash: baseModelHash(dataManifest, task.baseModel), taskKey: cacheKey };
  const baseline = request.freshBaseline ? { score: await grade(), cached: false } : await deps.baselines.getOrGrade(key, grade);
  await s.record('BaselineEvaluated', { score: baseline.score, cached: baseline.cached, evaluatorVersion: task.evaluatorVersion });
  await repeatBaseline(request.baselineRepeats ?? 1, task, grade, (data) => s.record('GradingRepeated', data));
  return { score: baseline.score, evaluation };
}

/** Model serving and environment servers for the run's gradings (a resumed run makes them again). */
export function evaluationContext(prepared: Prepared): Baselined['evaluation'] {
  return createEvaluationContext(loadServingConfig(), 'cpu', {}, { baseModelDir: prepared.workspace.layout.baseModelDir });
}
