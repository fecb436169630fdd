/**
 * GSM8K scoring as OpenCompass does it for `gsm8k_gen_1d7fe4` (the paper harness's config), written
 * from its rules (opencompass/datasets/gsm8k.py, utils/text_postprocessors.py):
 * 1. the model-level `extract-non-reasoning-content` step drops `<think>…</think>` reasoning;
 * 2. `gsm8k_postprocess`: the reply is cut at its first `Question:` (a few-shot model may go on with
 *    a new question), and the prediction is the last number in what is left (`-?\d+\.\d+|-?\d+`;
 *    commas split numbers, so `1,200` reads as `200`), or `NULL` when there is none;
 * 3. `gsm8k_dataset_postprocess`: the reference is the text after the dataset answer's first `#### `
 *    with commas removed;
 * 4. `Gsm8kEvaluator.is_equal`: equal strings, or |float(prediction) − int(reference)| < 1e-6.
 * Numbers are ASCII digits here (Python's `\d` also matches other Unicode digits).
 */
import { stripReasoning } from '../paper-common/reasoning.js';

export const NO_PREDICTION = 'NULL';

/** `gsm8k_postprocess` after the reasoning step: the last number before the first `cutAt`, else `NULL`. */
export function extractAnswer(reply: string, cutAt = 'Question:'): string {
  const text = stripReasoning(reply).split(cutAt)[0]!;
  const numbers = text.match(/-?\d+\.\d+|-?\d+/g);
  return numbers ? numbers.at(-1)! : NO_PREDICTION;
}

/** `gsm8k_dataset_postprocess`: the text after the first `#### ` of the dataset answer, commas removed. */
export function goldAnswer(answer: string): string {
  const parts = answer.split('#### ');
  if (parts.length < 2) throw new Error(`GSM8K answer has no "#### ": ${JSON.stringify(answer.slice(-80))}`);
  return parts[1]!.replace(/,/g, '');
}

/** `Gsm8kEvaluator.is_equal`: a reference that is not an integer only matches the identical string. */
export function isCorrect(predicted: string, gold: string): boolean {
  if (predicted === gold) return true;
  const reference = pythonInt(gold);
  const prediction = pythonFloat(predicted);
  return reference !== null && prediction !== null && Math.abs(prediction - reference) < 1e-6;
}

/** Python's int() on a decimal string (surrounding whitespace allowed), else null. */
function pythonInt(s: string): number | null {
  const t = s.trim();
  return /^[+-]?\d+(?:_\d+)*$/.test(t) ? Number(t.replace(/_/g, '')) : null;
}

/** Python's float() on the strings a prediction can be (`NULL` is not a number). */
function pythonFloat(s: string): number | null {
  const t = s.trim();
  return /^[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$/i.test(t) ? Number(t) : null;
}
