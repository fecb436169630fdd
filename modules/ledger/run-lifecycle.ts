import { STREAM_OF_TYPE, type EventData, type EventType } from './events/catalog.js';

// The run lifecycle as a pure decider: `evolve(state, event)` folds a run's events into the little
// it takes to judge the next one, and `decide(state, command)` answers "may this event be recorded
// now?" with the events to append, or an IllegalTransitionError. No I/O. The run recorder's guard
// (runGuard) decides each event as it is queued and evolves at once, since its queue order is the
// append order; projections fold the same evolve() over stored events.

/**
 * A run's lifecycle state as every projection shows it. `setup_failed` and `cancelled` are ended
 * runs that say nothing about the agent: its set-up failed (RunInterrupted with cause setup_failed),
 * or the operator or a campaign stopped its agent (AgentExited with stoppedBy operator | campaign).
 */
export type RunState = 'scheduled' | 'running' | 'completed' | 'interrupted' | 'setup_failed' | 'cancelled';

/** Every RunState, in lifecycle order. */
export const RUN_STATES = ['scheduled', 'running', 'completed', 'interrupted', 'setup_failed', 'cancelled'] as const satisfies readonly RunState[];

/** States of a run that has ended: the ledger holds its RunCompleted or RunInterrupted (a cancelled one may still be closing). */
const ENDED: ReadonlySet<RunState | null> = new Set<RunState>(['completed', 'interrupted', 'setup_failed', 'cancelled']);
export const hasEnded = (state: RunState | null): boolean => ENDED.has(state);

/** States the scoreboard leaves out unless asked: runs whose agent never got its budget (set-up failed, cancelled). */
const UNFINISHED: ReadonlySet<RunState | null> = new Set<RunState>(['setup_failed', 'cancelled']);
export const isUnfinished = (state: RunState | null): boolean => UNFINISHED.has(state);

/**
 * Where a run stands, in the order the run service moves through it. `ready` is "baseline graded,
 * grading API open, agent not launched yet". A run can jump from any open phase to `interrupted`,
 * and from `ready` straight to `agent-exited` when the launch itself failed.
 */
export type RunPhase = 'unscheduled' | 'scheduled' | 'prepared' | 'ready' | 'agent-running' | 'agent-exited' | 'completed' | 'interrupted';

const ORDER: readonly RunPhase[] = ['unscheduled', 'scheduled', 'prepared', 'ready', 'agent-running', 'agent-exited', 'completed', 'interrupted'];
const rank = (phase: RunPhase) => ORDER.indexOf(phase);

export interface RunLifecycleState {
  /**
   * What projections show: set by the last lifecycle event whatever came before it (RunScheduled →
   * scheduled; WorkspacePrepared, AgentStarted, RunResumed → running; RunCompleted → completed;
   * RunInterrupted → interrupted), null before any. Kept exactly so, even over a ledger that broke
   * the rules, so read models rebuilt with it stay byte-identical. Recorded causes refine it (see
   * statusAfter): RunInterrupted with cause setup_failed → setup_failed; AgentExited stopped by the
   * operator or a campaign → cancelled, which the RunCompleted that follows keeps. Events without
   * those optional fields (every run recorded before them) read as before.
   */
  readonly status: RunState | null;
  readonly phase: RunPhase;
  /** The phase the run was in when interrupted (what RunResumed returns to); null otherwise. */
  readonly interruptedIn: RunPhase | null;
  readonly agentStarted: boolean;
  /** Submissions received and not yet graded or rejected: gradings in flight. */
  readonly pending: ReadonlySet<string>;
  /** Submissions with an outcome (graded, or rejected — received or refused outright). */
  readonly resolved: ReadonlySet<string>;
}

/** A fact to record: an event's type and payload (an A2rlEvent is one too). */
export type RunCommand = { [T in EventType]: { type: T; data: EventData<T> } }[EventType];

export const initialRunState: RunLifecycleState = Object.freeze({
  status: null,
  phase: 'unscheduled',
  interruptedIn: null,
  agentStarted: false,
  pending: new Set<string>(),
  resolved: new Set<string>(),
});

/** Refused: recording this event now would break the run lifecycle. Nothing was appended. */
export class IllegalTransitionError extends Error {
  override readonly name = 'IllegalTransitionError';
  constructor(
    readonly phase: RunPhase,
    readonly eventType: EventType,
    readonly reason: string,
  ) {
    super(`cannot record ${eventType} in run phase "${phase}": ${reason}`);
  }
}

const INSTRUMENTATION = new Set<EventType>([
  'FileChanged', 'ProcessStarted', 'ProcessExited', 'AgentOutput', 'RolloutBatchRecorded', 'ObservationGap',
  'EgressConnection', 'LimitReached', 'WorkspaceIntegrityChecked', 'LlmCallRecorded', 'AgentHomeArchived',
  'TransientFileRecorded',
]);

/** The status (RunState) a lifecycle event sets; other events keep it (but see statusAfter). */
const STATUS_AFTER: Partial<Record<EventType, RunState>> = {
  RunScheduled: 'scheduled',
  WorkspacePrepared: 'running',
  AgentStarted: 'running',
  RunResumed: 'running',
  RunCompleted: 'completed',
  RunInterrupted: 'interrupted',
};

/** Who stopping the agent cancels the run: someone outside it, not the run's own limits. */
const CANCELLING = new Set(['operator', 'campaign']);

/**
 * The status after `event`: STATUS_AFTER, refined by the recorded cause. A function of the status
 * before and the event alone, so projections that keep only the status (run-list) derive it too.
 */
function statusAfter(status: RunState | null, event: RunCommand): RunState | null {
  switch (event.type) {
    case 'RunInterrupted':
      return event.data.cause === 'setup_failed' ? 'setup_failed' : 'interrupted';
    case 'AgentExited':
      return event.data.stoppedBy !== undefined && CANCELLING.has(event.data.stoppedBy) && !hasEnded(status) ? 'cancelled' : status;
    case 'RunCompleted':
      return status === 'cancelled' ? 'cancelled' : 'completed';
    default:
      return STATUS_AFTER[event.type] ?? status;
  }
}

/** The event types `evolve` changes the state on (its cases); every other one leaves it as it is. */
const LIFECYCLE_TYPES: ReadonlySet<string> = new Set([
  'RunScheduled', 'WorkspacePrepared', 'BaselineEvaluated', 'AgentStarted', 'AgentExited', 'RunCompleted', 'RunInterrupted', 'RunResumed', 'SubmissionReceived', 'SubmissionGraded', 'SubmissionRejected',
]);

/**
 * Folds one recorded event into the state. Total: it never throws, so projections can fold any
 * ledger, including old ones recorded before these rules. Events that change nothing
 * (instrumentation, tree heads) return the same state object, so folding a long run stays cheap.
 */
export function evolve(state: RunLifecycleState, event: RunCommand): RunLifecycleState {
  if (!LIFECYCLE_TYPES.has(event.type)) return state; // most of a run's events: no state to compute
  const status = statusAfter(state.status, event);
  const open = state.phase !== 'completed' && state.phase !== 'interrupted';
  /** Moves an open run forward to `to` (never back: a stray event in an old ledger cannot rewind it). */
  const advance = (to: RunPhase): RunPhase => (open && rank(state.phase) < rank(to) ? to : state.phase);
  switch (event.type) {
    case 'RunScheduled':
      return { ...state, status, phase: advance('scheduled') };
    case 'WorkspacePrepared':
      return { ...state, status, phase: advance('prepared') };
    case 'BaselineEvaluated':
      return { ...state, status, phase: advance('ready') };
    case 'AgentStarted':
      return { ...state, status, phase: advance('agent-running'), agentStarted: true };
    case 'AgentExited':
      return { ...state, status, phase: advance('agent-exited') };
    case 'RunCompleted':
      return { ...state, status, phase: 'completed', interruptedIn: null };
    case 'RunInterrupted':
      return open ? { ...state, status, phase: 'interrupted', interruptedIn: state.phase } : { ...state, status };
    case 'RunResumed':
      // The agent is started again: the run is back where its baseline was graded and no agent runs.
      return state.phase === 'interrupted' ? { ...state, status, phase: 'ready', interruptedIn: null, agentStarted: false } : { ...state, status };
    case 'SubmissionReceived':
      return { ...state, pending: withId(state.pending, event.data.submissionId) };
    case 'SubmissionGraded':
    case 'SubmissionRejected': {
      const id = event.data.submissionId;
      return { ...state, pending: withoutId(state.pending, id), resolved: withId(state.resolved, id) };
    }
    default:
      return state; // instrumentation, tree heads and (stray) campaign events change nothing here (and set no status)
  }
}

/** Folds a run's events from the start. */
export function foldRunLifecycle(events: Iterable<RunCommand>): RunLifecycleState {
  let state = initialRunState;
  for (const event of events) state = evolve(state, event);
  return state;
}

/**
 * Decides whether `command` may be recorded now. Returns the events to append (the command's own
 * event: the recorder records facts, it does not derive others), or throws IllegalTransitionError.
 * Cheap: a few comparisons and set lookups, no allocation beyond the result.
 */
export function decide(state: RunLifecycleState, command: RunCommand): RunCommand[] {
  const reason = refusal(state, command);
  if (reason !== null) throw new IllegalTransitionError(state.phase, command.type, reason);
  return [command];
}

/** A stateful check for one run's recorder: decides each event as it is queued, then evolves. */
export interface RunGuard {
  /** Throws IllegalTransitionError (and changes nothing) when the event may not be recorded now. */
  (type: EventType, data: EventData<EventType>): void;
  /** The state after every event accepted so far. */
  readonly state: RunLifecycleState;
}

/**
 * The recorder's guard. It evolves when an event is accepted, not when it is durable: the recorder
 * appends in the order events are queued, so the next check must already see every queued event
 * (two AgentStarted queued back to back must not both pass). Start from `foldRunLifecycle(stored)`
 * to guard a run that already has events.
 */
export function runGuard(from: RunLifecycleState = initialRunState): RunGuard {
  let state = from;
  const guard = (type: EventType, data: EventData<EventType>): void => {
    const command = { type, data } as RunCommand;
    decide(state, command);
    state = evolve(state, command);
  };
  return Object.defineProperty(guard, 'state', { get: () => state, enumerable: true }) as RunGuard;
}

/** Why `command` may not be recorded now, or null when it may. */
export function refusal(state: RunLifecycleState, command: RunCommand): string | null {
  const { phase } = state;
  // A run's stream records the run; the scheduling around it (RunRequested, RunFinished, …) is the campaign's.
  if (STREAM_OF_TYPE[command.type] === 'campaign') return 'campaign events belong to a campaign stream';
  if (STREAM_OF_TYPE[command.type] === 'access') return 'access events belong to the access stream';
  if (command.type === 'RunScheduled') return phase === 'unscheduled' ? null : 'the run is already scheduled (RunScheduled is its first event, recorded once)';
  if (phase === 'unscheduled') return 'RunScheduled must be the first event of a run';
  if (command.type === 'TreeHeadSigned') return null; // heads are signed at intervals and when the run is sealed, closed or not
  // Repeated gradings measure the evaluator, not the agent: also after the run closed (`a2rl regrade`).
  if (command.type === 'GradingRepeated') return repeatRefusal(state, command.data);

  if (phase === 'completed' || phase === 'interrupted') {
    if (command.type === 'RunResumed') return phase === 'interrupted' ? resumeRefusal(state) : 'a completed run cannot be resumed (only an interrupted one)';
    return `the run is closed (${phase === 'completed' ? 'RunCompleted' : 'RunInterrupted'} was recorded); only TreeHeadSigned may follow`;
  }
  const at = rank(phase);

  switch (command.type) {
    case 'RunResumed':
      return 'only an interrupted run can be resumed, and this one is open';
    case 'RunInterrupted':
      return null; // any open run can be cut short: setup failure, or a harness that died (recovery)
    case 'WorkspacePrepared':
      return phase === 'scheduled' ? null : 'the workspace is already prepared';
    case 'BaselineEvaluated':
      if (phase === 'scheduled') return 'the baseline is graded in the workspace, which is not prepared yet (WorkspacePrepared first)';
      return phase === 'prepared' ? null : 'the baseline is already evaluated';
    case 'AgentStarted':
      if (state.agentStarted) return 'the agent has already started (one agent per run)';
      if (phase === 'agent-exited') return 'the agent has already exited (its launch failed)';
      if (at < rank('ready')) return `the agent starts only after ${phase === 'scheduled' ? 'WorkspacePrepared and BaselineEvaluated' : 'BaselineEvaluated'}`;
      return null;
    case 'AgentExited':
      if (phase === 'agent-exited') return 'the agent has already exited';
      if (at < rank('ready')) return 'no agent was launched yet (a failure before the launch is RunInterrupted)';
      return null; // from `ready` too: the launch itself failed, recorded as a crash without AgentStarted
    case 'RunCompleted':
      if (phase !== 'agent-exited') {
        return state.agentStarted
          ? 'the agent is still running (AgentExited first)'
          : 'no agent ran to completion (AgentExited first; a run that failed before its agent is RunInterrupted)';
      }
      if (state.pending.size) return `submission(s) ${[...state.pending].join(', ')} are still being graded; the run closes after its gradings`;
      return null;
    case 'SubmissionReceived': {
      const id = command.data.submissionId;
      if (at < rank('ready')) return `submissions open once the baseline is evaluated; ${id} came before`;
      if (phase === 'agent-exited') return `the agent has exited: no new submission (${id}) is accepted`;
      if (state.pending.has(id) || state.resolved.has(id)) return `submission id ${id} was already used`;
      return null;
    }
    case 'SubmissionGraded':
    case 'SubmissionRejected': {
      const id = command.data.submissionId;
      if (state.pending.has(id)) return null; // a grading in flight finishes, even after the agent exited
      if (state.resolved.has(id)) return `submission ${id} already has an outcome`;
      if (command.type === 'SubmissionGraded') return `submission ${id} was never received (SubmissionReceived first)`;
      // A submission refused before it was received (bad path, budget exhausted, archive failure).
      if (at < rank('ready')) return `submissions open once the baseline is evaluated; ${id} came before`;
      if (phase === 'agent-exited') return `the agent has exited: no new submission (${id}) is accepted`;
      return null;
    }
    default:
      if (INSTRUMENTATION.has(command.type)) {
        // Observers run from the prepared workspace until the run closes; their flush after the agent exits is legal.
        return at < rank('prepared') ? 'instrumentation starts once the workspace is prepared (WorkspacePrepared first)' : null;
      }
      return null;
  }
}

/**
 * Why an interrupted run cannot be resumed, or null: only a run whose harness was lost after its
 * baseline was graded and before its agent exited continues (its agent starts again); a set-up failure
 * or an agent that had already exited is recorded as it ended.
 */
export function resumeRefusal(state: Pick<RunLifecycleState, 'status' | 'phase' | 'interruptedIn'>): string | null {
  if (state.phase !== 'interrupted') return state.phase === 'completed' ? 'a completed run cannot be resumed (only an interrupted one)' : 'only an interrupted run can be resumed, and this one is open';
  if (state.status === 'setup_failed') return 'its set-up failed before the agent started: start a new run';
  const at = state.interruptedIn;
  if (at === 'agent-exited') return 'its agent had already exited when the harness was lost: the run is recorded as it ended';
  if (at !== 'ready' && at !== 'agent-running') return 'it was interrupted before its baseline was graded: start a new run';
  return null;
}

function repeatRefusal(state: RunLifecycleState, d: EventData<'GradingRepeated'>): string | null {
  // The baseline's repeats follow BaselineEvaluated, before the agent starts (`--baseline-repeats`).
  if (d.subject === 'baseline') return state.phase === 'ready' ? null : 'the baseline is graded again only between BaselineEvaluated and the agent\'s start';
  const id = d.submissionId ?? '';
  // Only once the run is closed (`a2rl regrade`): the seal check counts on it (verify-chain.ts sealRelevant).
  if (state.phase !== 'completed' && state.phase !== 'interrupted') return `submissions are graded again only after the run closed (submission ${id})`;
  return state.resolved.has(id) && !state.pending.has(id) ? null : `submission ${id} has no recorded outcome to grade again`;
}

function withId(set: ReadonlySet<string>, id: string): ReadonlySet<string> {
  return set.has(id) ? set : new Set([...set, id]);
}

function withoutId(set: ReadonlySet<string>, id: string): ReadonlySet<string> {
  if (!set.has(id)) return set;
  const next = new Set(set);
  next.delete(id);
  return next;
}
