/**
 * GSM8K answer extraction. A number is an optional minus sign, an optional `$`, digits with optional
 * thousands commas and an optional decimal part. The predicted answer is the first number after the
 * last `####` in the reply; without `####` (or with no number after it), the last number in the
 * reply; without any number, null (a wrong answer).
 */
const NUMBER = /-?\$?\d(?:[\d,]*\d)?(?:\.\d+)?/g;

/** `"$1,234.50"` → `"1234.5"`, `"-7.0"` → `"-7"`: drops `$`, commas and a zero fractional part. */
export function normaliseNumber(raw: string): string {
  let n = raw.replace(/[$,]/g, '');
  if (n.includes('.')) n = n.replace(/0+$/, '').replace(/\.$/, '');
  if (/^-0*$/.test(n)) n = '0';
  return n;
}

export function extractAnswer(reply: string): string | null {
  const marker = reply.lastIndexOf('####');
  if (marker >= 0) {
    const after = reply.slice(marker + 4).match(NUMBER);
    if (after) return normaliseNumber(after[0]);
  }
  const all = reply.match(NUMBER);
  return all ? normaliseNumber(all[all.length - 1]!) : null;
}

/** The gold answer of a GSM8K row: the number after `####` at the end of `answer`. */
export function goldAnswer(answer: string): string {
  const marker = answer.lastIndexOf('####');
  const match = marker >= 0 ? answer.slice(marker + 4).match(NUMBER) : null;
  if (!match) throw new Error(`GSM8K answer has no "#### <number>": ${JSON.stringify(answer.slice(-80))}`);
  return normaliseNumber(match[0]);
}

/** Exact numeric match of normalised numbers (so `"3.50"` equals `"3.5"`). */
export function isCorrect(predicted: string | null, gold: string): boolean {
  return predicted !== null && Number(predicted) === Number(gold);
}
