import { createHash } from 'node:crypto';
import type { ChatMessage } from '../paper-common/served-chat.js';
import { lengthControlledWinRate } from '../ref-judge/judge.js';

/** Salt of the per-instruction order draw; changing it changes every grading, so bump the evaluator version with it. */
export const ORDER_SEED = 'a2rl-alpacaeval-order-1';
/** More judge errors than this share of instructions fails the grading (the judge is broken, not the model). */
export const MAX_JUDGE_ERROR_FRACTION = 0.05;

/**
 * Whether the model's output is shown to the judge as "Output (a)" for this instruction: a fair coin
 * drawn from sha256(ORDER_SEED, instruction), so the order is random across instructions (countering the
 * judge's position bias) yet identical on every grading.
 */
export function modelShownFirst(instruction: string): boolean {
  return (createHash('sha256').update(`${ORDER_SEED}\n${instruction}`).digest()[0]! & 1) === 1;
}

const JUDGE_SYSTEM =
  'You are a careful evaluator of AI assistants. Given an instruction and two outputs, choose the output that a ' +
  'thoughtful human would prefer: the one that follows the instruction and is more helpful, accurate and harmless. ' +
  'Neither the order in which the outputs appear nor their length alone should decide.';

/** The pairwise judge prompt; `first`/`second` are already in the drawn order. */
export function judgePrompt(instruction: string, first: string, second: string): ChatMessage[] {
  return [
    { role: 'system', content: JUDGE_SYSTEM },
    {
      role: 'user',
      content:
        `## Instruction\n\n${instruction}\n\n## Output (a)\n\n${first}\n\n## Output (b)\n\n${second}\n\n## Verdict\n\n` +
        'Which output is better? Answer with exactly "Output (a)" or "Output (b)" and nothing else.',
    },
  ];
}

/**
 * The judge's choice, strictly: the whole reply must be one of `Output (a)`, `(a)`, `a` (likewise b),
 * case-insensitive, optionally in backticks/bold and with a final period. Anything else (a hedge, both,
 * an explanation) is null: a judge error, never a guess.
 */
export function parseVerdict(reply: string): 'a' | 'b' | null {
  const core = reply.trim().replace(/^[`*"']+|[`*"']+$/g, '').replace(/\.$/, '').trim();
  const match = /^(?:output\s*)?(?:\(([ab])\)|([ab]))$/i.exec(core);
  const letter = match?.[1] ?? match?.[2];
  return letter ? (letter.toLowerCase() as 'a' | 'b') : null;
}

/** One instruction's judgement: `preference` 1 when the model's output won, 0 when the baseline's did, null on a judge error. */
export interface Judgement {
  preference: 1 | 0 | null;
  /** Characters of the model's output minus the baseline's (AlpacaEval's length measure). */
  lengthDiff: number;
}

export interface WinRates {
  /** Mean preference for the model over judged instructions, 0–1. */
  winRate: number;
  /** Predicted preference at zero length difference, 0–1. */
  lcWinRate: number;
  lengthCoefficient: number;
  judged: number;
  judgeErrors: number;
}

/**
 * Win rate and length-controlled win rate over the instructions the judge answered (errors excluded).
 * The LC fit is tasks/ref-judge's logistic regression of the preference on tanh(Δlen / sd(Δlen)),
 * read off at Δlen = 0 (AlpacaEval 2.0's GLM without its instruction-difficulty term, which needs
 * other models' annotations to estimate).
 */
export function winRates(judgements: readonly Judgement[]): WinRates {
  const judged = judgements.filter((j): j is Judgement & { preference: 0 | 1 } => j.preference !== null);
  const prefs = judged.map((j) => j.preference);
  const { lcWinRate, lengthCoefficient } = lengthControlledWinRate(prefs, judged.map((j) => j.lengthDiff));
  return {
    winRate: prefs.length === 0 ? 0 : prefs.reduce<number>((a, b) => a + b, 0) / prefs.length,
    lcWinRate,
    lengthCoefficient,
    judged: judged.length,
    judgeErrors: judgements.length - judged.length,
  };
}
