import type { EventData, EventType } from './events/catalog.js';
import { evolve, initialRunState, type RunCommand, type RunLifecycleState } from './run-lifecycle.js';

// A run's scores as one evolve-style fold: the lifecycle state, the baseline, the best score and the
// submissions, one event at a time. The run's tally, the dashboard's live status, the stored outcome
// of an abandoned run and the analysis all read these from here, so they cannot disagree.

/** What a submission came to: its first outcome (a second one, which the recorder refuses, is ignored). */
export type SubmissionOutcome = { type: 'SubmissionGraded'; score: number } | { type: 'SubmissionRejected' };

export interface RunScores {
  readonly lifecycle: RunLifecycleState;
  /** The last BaselineEvaluated's score (an operator may set the baseline again); null before one. */
  readonly baseline: number | null;
  /** The highest score among the submissions' outcomes (see `submissions`); null before a grading. */
  readonly best: number | null;
  /** Every submission id an event named (received, graded or rejected): what the operator sees counted. */
  readonly named: ReadonlySet<string>;
  /**
   * The submissions, in the order they were first received or refused, each with its first outcome
   * (null while graded). A grading of a submission never received has nothing to attach to and counts
   * for nothing here, nor for `best`.
   */
  readonly submissions: ReadonlyMap<string, SubmissionOutcome | null>;
}

export const initialRunScores: RunScores = Object.freeze({
  lifecycle: initialRunState,
  baseline: null,
  best: null,
  named: new Set<string>(),
  submissions: new Map<string, SubmissionOutcome | null>(),
});

/** Folds one event into a run's scores. Total; an event that changes nothing returns the same object. */
export function evolveScores(state: RunScores, event: RunCommand): RunScores {
  const lifecycle = evolve(state.lifecycle, event);
  const next = lifecycle === state.lifecycle ? state : { ...state, lifecycle };
  switch (event.type) {
    case 'BaselineEvaluated':
      return { ...next, baseline: event.data.score };
    case 'SubmissionReceived':
    case 'SubmissionRejected':
    case 'SubmissionGraded':
      return withSubmissionEvent(next, event);
    default:
      return next;
  }
}

/** Folds a run's events from the start. */
export function foldRunScores(events: Iterable<RunCommand>): RunScores {
  let state = initialRunScores;
  for (const event of events) state = evolveScores(state, event);
  return state;
}

/** The id of the first submission (in submission order) graded with the best score; undefined without one. */
export function bestSubmissionId(state: RunScores): string | undefined {
  if (state.best === null) return undefined;
  for (const [id, outcome] of state.submissions) if (outcome?.type === 'SubmissionGraded' && outcome.score === state.best) return id;
  return undefined;
}

/** The number of submissions with an outcome, graded and rejected. */
export function outcomeCounts(state: RunScores): { graded: number; rejected: number } {
  let graded = 0;
  let rejected = 0;
  for (const outcome of state.submissions.values()) {
    if (outcome?.type === 'SubmissionGraded') graded++;
    else if (outcome) rejected++;
  }
  return { graded, rejected };
}

type SubmissionEvent = { type: 'SubmissionReceived' | 'SubmissionRejected' | 'SubmissionGraded'; data: EventData<'SubmissionReceived' | 'SubmissionRejected' | 'SubmissionGraded'> };

function withSubmissionEvent(state: RunScores, event: SubmissionEvent & { type: EventType }): RunScores {
  const id = event.data.submissionId;
  const named = state.named.has(id) ? state.named : new Set([...state.named, id]);
  const known = state.submissions.has(id);
  const outcome = state.submissions.get(id) ?? null;
  if (event.type === 'SubmissionReceived') {
    return known ? { ...state, named } : { ...state, named, submissions: withEntry(state.submissions, id, null) };
  }
  // A submission refused outright is one too; a grading needs a received submission.
  if (outcome !== null || (!known && event.type === 'SubmissionGraded')) return { ...state, named };
  if (event.type === 'SubmissionRejected') return { ...state, named, submissions: withEntry(state.submissions, id, { type: 'SubmissionRejected' }) };
  const score = (event.data as EventData<'SubmissionGraded'>).score;
  return {
    ...state,
    named,
    submissions: withEntry(state.submissions, id, { type: 'SubmissionGraded', score }),
    best: state.best === null ? score : Math.max(state.best, score),
  };
}

/** A copy of `map` with `id` set to `value`, keeping the order of first insertion. */
function withEntry<V>(map: ReadonlyMap<string, V>, id: string, value: V): ReadonlyMap<string, V> {
  return new Map(map).set(id, value);
}
