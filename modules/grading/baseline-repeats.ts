import { randomUUID } from 'node:crypto';
import type { EventData } from '../ledger/events/catalog.js';
import type { TaskPack } from '../../tasks/task-pack.js';

/** Most gradings of one checkpoint one request may ask for (`--repeat`, `--baseline-repeats`). */
export const MAX_REPEATS = 100;

/** A repeat count from the command line or an API body: an integer in 1..MAX_REPEATS. */
export function parseRepeats(value: unknown, what: string): number {
  const n = typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_REPEATS) throw new Error(`${what} must be an integer from 1 to ${MAX_REPEATS}, got ${JSON.stringify(value)}`);
  return n;
}

/** A fresh id tying one request's gradings together (GradingRepeated.series). */
export const newSeries = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

/** An evaluator failure as one line for the ledger. */
export const failureLine = (err: unknown) => String((err as Error)?.message ?? err).replace(/\s+/g, ' ').trim().slice(0, 1000);

/** A score the ledger accepts (0–100), or a throw saying what came back. */
export function checkedScore(score: unknown): number {
  if (typeof score !== 'number' || !Number.isFinite(score) || score < 0 || score > 100) throw new Error(`the evaluator returned ${String(score)}, not a score in 0–100`);
  return score;
}

/**
 * Grades the base model `total − 1` more times after its BaselineEvaluated (grading 1 of the series),
 * recording each as GradingRepeated; a failed grading is recorded with its error and does not stop the rest.
 */
export async function repeatBaseline(total: number, task: TaskPack, grade: () => Promise<number>, record: (data: EventData<'GradingRepeated'>) => Promise<unknown>): Promise<void> {
  if (total <= 1) return;
  const series = newSeries('baseline');
  for (let repeat = 2; repeat <= total; repeat++) {
    let outcome: { score: number } | { error: string };
    try {
      outcome = { score: checkedScore(await grade()) };
    } catch (err) {
      outcome = { error: failureLine(err) };
    }
    await record({ subject: 'baseline', series, repeat, of: total, evaluatorVersion: task.evaluatorVersion, ...outcome });
  }
}
