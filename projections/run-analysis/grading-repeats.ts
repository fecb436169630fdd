import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';

/** One checkpoint graded again and again (GradingRepeated of one series and submission): its scores in seq order. */
export interface RepeatSeries {
  subject: 'baseline' | 'submission';
  /** Null for the baseline. */
  submissionId: string | null;
  series: string;
  scores: number[];
  /** Gradings of the series that failed (recorded with an error). */
  failed: number;
}

/**
 * The run's repeated gradings (docs/analysis.md, evaluation noise), one entry per series and
 * checkpoint, in order of first appearance. A baseline series also counts the BaselineEvaluated it repeats when that was
 * graded afresh (grading 1 of the series); null when the run has none, so older analyses are unchanged.
 */
export function gradingRepeats(events: readonly A2rlEvent[]): RepeatSeries[] | null {
  const bySeries = new Map<string, RepeatSeries>();
  let freshBaseline: number | null = null;
  for (const e of events) {
    if (e.type === 'BaselineEvaluated') freshBaseline = e.data.cached ? null : e.data.score;
    if (e.type !== 'GradingRepeated') continue;
    const d = e.data;
    const key = JSON.stringify([d.series, d.subject === 'submission' ? (d.submissionId ?? null) : null]);
    let s = bySeries.get(key);
    if (!s) {
      const first = d.subject === 'baseline' && freshBaseline !== null ? [freshBaseline] : [];
      s = { subject: d.subject, submissionId: d.subject === 'submission' ? (d.submissionId ?? null) : null, series: d.series, scores: first, failed: 0 };
      bySeries.set(key, s);
    }
    if (d.score !== undefined) s.scores.push(d.score);
    else s.failed += 1;
  }
  return bySeries.size ? [...bySeries.values()] : null;
}

/** `{gradingRepeats}` for the analysis, or nothing: a run without repeats keeps its analysis byte for byte. */
export function optionalRepeats(events: readonly A2rlEvent[]): { gradingRepeats?: RepeatSeries[] } {
  const repeats = gradingRepeats(events);
  return repeats ? { gradingRepeats: repeats } : {};
}
