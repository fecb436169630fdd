/**
 * The paper harness's DeepSearchQA judge (RD-Agent deepsearchqa/eval.py `_judge_answer`), as
 * tasks/deepsearchqa/protocol.json states it: ONE judge call per question, set answers included (the
 * prompt tells the judge that a set answer must contain every gold item); the verdict is the reply's
 * first line, stripped of surrounding punctuation, lower-cased, equal to "correct". When the judge
 * call fails, the harness falls back to string matching: a single answer is correct when the gold and
 * the prediction (lower-cased, trimmed) contain one another, a set answer when every comma-separated
 * gold item occurs in the prediction.
 */
import { OpenAiClient } from '../../modules/serving/openai-client.js';
import { fillTemplate, ProtocolError } from '../paper-common/protocol.js';
import type { OpenAiEndpoint } from '../task-pack.js';
import type { DsqaItem } from './dataset.js';
import { PROTOCOL } from './react.js';

interface JudgeSettings {
  system: string;
  userTemplate: string;
  correctWord: string;
  stripChars: string;
  temperature: number;
  maxTokens: number;
}

const JUDGE: JudgeSettings = (() => {
  const j = PROTOCOL.settings.judge as Partial<JudgeSettings> | undefined;
  const strings = ['system', 'userTemplate', 'correctWord', 'stripChars'] as const;
  if (!j || !strings.every((k) => typeof j[k] === 'string') || typeof j.temperature !== 'number' || typeof j.maxTokens !== 'number') {
    throw new ProtocolError('tasks/deepsearchqa/protocol.json: settings.judge needs system, userTemplate, correctWord, stripChars, temperature, maxTokens');
  }
  return j as JudgeSettings;
})();

export function judgeMessages(item: Pick<DsqaItem, 'answer' | 'answer_type'>, predicted: string): { role: 'system' | 'user'; content: string }[] {
  return [
    { role: 'system', content: JUDGE.system },
    { role: 'user', content: fillTemplate(JUDGE.userTemplate, { answer_type: item.answer_type, gold: item.answer, predicted }) },
  ];
}

/**
 * The harness's reading of a judge reply: first line, punctuation and blanks stripped at both ends,
 * equals "correct". An empty reply has no first line: null (the harness's indexing fails there and it
 * falls back to string matching).
 */
export function parseVerdict(reply: string): boolean | null {
  const text = reply.trim().toLowerCase();
  if (text === '') return null;
  const first = text.split(/\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/)[0]!;
  return stripChars(first.trim(), JUDGE.stripChars) === JUDGE.correctWord;
}

function stripChars(s: string, chars: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && chars.includes(s[a]!)) a++;
  while (b > a && chars.includes(s[b - 1]!)) b--;
  return s.slice(a, b);
}

/** The harness's fallback when the judge cannot be reached. */
export function stringMatch(predicted: string, gold: string, answerType: string): boolean {
  const pred = predicted.trim().toLowerCase();
  const g = gold.trim().toLowerCase();
  if (answerType === 'Single Answer') return g.includes(pred) || pred.includes(g);
  return g.split(',').map((x) => x.trim()).every((item) => pred.includes(item));
}

export interface Judgement {
  correct: boolean;
  /** True when the judge call failed and string matching decided. */
  fallback: boolean;
}

export async function judgeAnswer(judge: OpenAiEndpoint, item: DsqaItem, predicted: string, signal?: AbortSignal): Promise<Judgement> {
  try {
    const reply = await new OpenAiClient(judge, 120_000).chat(judgeMessages(item, predicted), { maxTokens: JUDGE.maxTokens, temperature: JUDGE.temperature, signal });
    const verdict = parseVerdict(reply.text);
    if (verdict !== null) return { correct: verdict, fallback: false };
  } catch (err) {
    if (signal?.aborted) throw err;
  }
  return { correct: stringMatch(predicted, item.answer, item.answer_type), fallback: true };
}
