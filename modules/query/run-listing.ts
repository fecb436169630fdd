// How run listings are ordered (`a2rl runs --sort`, GET /runs): newest first by default. Every order
// is total (ties broken by run id) and a function of the recorded values only, so a listing is stable.

export const RUN_SORTS = ['started', 'best', 'improvement', 'duration', 'id'] as const;
export type RunSort = (typeof RUN_SORTS)[number];

/** What an order reads of a run: its id, when it was scheduled (ISO UTC), its best, improvement and agent duration. */
export interface SortableRun {
  runId: string;
  scheduledAt: string | null;
  best?: number | null;
  improvement?: number | null;
  durationS?: number | null;
}

/** Larger first, absent values last. */
function desc(a: number | string | null | undefined, b: number | string | null | undefined): number {
  const na = a === null || a === undefined;
  const nb = b === null || b === undefined;
  if (na || nb) return na === nb ? 0 : na ? 1 : -1;
  return a < b ? 1 : a > b ? -1 : 0;
}

const byId = (a: SortableRun, b: SortableRun) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0);

/**
 * The order of `sort`: started (newest scheduled first, runs never scheduled last), best, improvement,
 * duration (largest first, runs without one last), or id (ascending); ties by run id, newest
 * first for started so that runs scheduled in the same second keep their id order reversed.
 */
export function compareRuns(sort: RunSort): (a: SortableRun, b: SortableRun) => number {
  switch (sort) {
    case 'id':
      return byId;
    case 'started':
      return (a, b) => desc(a.scheduledAt, b.scheduledAt) || -byId(a, b);
    case 'best':
      return (a, b) => desc(a.best, b.best) || desc(a.scheduledAt, b.scheduledAt) || -byId(a, b);
    case 'improvement':
      return (a, b) => desc(a.improvement, b.improvement) || desc(a.scheduledAt, b.scheduledAt) || -byId(a, b);
    case 'duration':
      return (a, b) => desc(a.durationS, b.durationS) || desc(a.scheduledAt, b.scheduledAt) || -byId(a, b);
  }
}

/** A copy of `runs` in the order of `sort` (default: newest first). */
export function sortRuns<T extends SortableRun>(runs: readonly T[], sort: RunSort = 'started'): T[] {
  return [...runs].sort(compareRuns(sort));
}

export function isRunSort(value: string): value is RunSort {
  return (RUN_SORTS as readonly string[]).includes(value);
}
