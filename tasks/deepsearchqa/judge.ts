import { OpenAiClient } from '../../modules/serving/openai-client.js';
import { EvaluatorError, type OpenAiEndpoint } from '../task-pack.js';
import { goldItems, isSetAnswer, type DsqaItem } from './dataset.js';

export type Verdict = 'correct' | 'incorrect' | 'error';

const JUDGE_MAX_TOKENS = 16;

/**
 * One judge question. `setItem` marks one gold item of a set answer: the judge decides only
 * whether the response includes it (extra items in the response do not matter).
 */
export function judgePrompt(problem: string, gold: string, response: string, setItem: boolean): string {
  return (
    'You grade a response to a research question against the gold answer.\n' +
    (setItem
      ? 'The gold answer below is ONE item of a set the response must list; decide only whether the response includes this item (other items in the response do not matter).\n'
      : 'Decide whether the response gives the gold answer.\n') +
    'Equivalent wording, spelling variants, units and formatting are fine; a missing, vague or contradictory answer is not.\n' +
    'Reply with exactly one word: CORRECT or INCORRECT.\n\n' +
    `Question: ${problem}\n` +
    `Gold answer: ${gold}\n` +
    `Response: ${response}`
  );
}

/** CORRECT or INCORRECT as a whole word, exactly one of the two; anything else is unparseable. */
export function parseVerdict(reply: string): Verdict {
  const found = new Set([...reply.toUpperCase().matchAll(/\b(CORRECT|INCORRECT)\b/g)].map((m) => m[1]));
  if (found.size !== 1) return 'error';
  return found.has('CORRECT') ? 'correct' : 'incorrect';
}

export interface Judgement {
  verdict: Verdict;
  /** Judge calls made and how many replies could not be parsed. */
  calls: number;
  errors: number;
}

/**
 * A single answer is one judge call. A set answer is one call per gold item and is correct only
 * when every item is judged present. Any unparseable reply makes the question an `error`
 * (scored wrong and counted), never a win.
 */
export async function judgeAnswer(judge: OpenAiEndpoint, item: DsqaItem, response: string, signal?: AbortSignal): Promise<Judgement> {
  const client = new OpenAiClient(judge, 120_000);
  const set = isSetAnswer(item);
  const golds = set ? goldItems(item.answer) : [item.answer.trim()];
  if (golds.length === 0 || golds.some((g) => g === '')) throw new EvaluatorError(`deepsearchqa item has an empty gold answer: ${item.problem.slice(0, 80)}`);
  const verdicts: Verdict[] = [];
  for (const gold of golds) {
    const reply = await client.chat([{ role: 'user', content: judgePrompt(item.problem, gold, response, set) }], { maxTokens: JUDGE_MAX_TOKENS, signal });
    verdicts.push(parseVerdict(reply.text));
  }
  const errors = verdicts.filter((v) => v === 'error').length;
  const verdict: Verdict = errors > 0 ? 'error' : verdicts.every((v) => v === 'correct') ? 'correct' : 'incorrect';
  return { verdict, calls: golds.length, errors };
}
