import { eventTime } from '../ledger/events/event-time.js';
import { callCostUsd, callTokens } from '../../projections/derived-facts.js';
import { revisionsOf } from '../../projections/workspace-revisions/workspace-revisions.projection.js';
import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';
import { resumeRefusal } from '../ledger/run-lifecycle.js';
import { evolveScores, initialRunScores, type RunScores } from '../ledger/run-scores.js';
import { homeFilesOf } from './agent-home.js';
import { applyRevisions, type WorkspaceFile, type WorkspaceState } from '../replay/workspace-state.js';

// What resuming a run needs to know, read from its stored events alone (a pure function of them): may
// it be resumed, under which request, with how much budget left, and what its workspace and the
// agent's home held when the harness was lost. docs/resume.md describes the whole resume.

/** Resuming was refused: one line saying why; nothing was recorded. */
export class ResumeRefusedError extends Error {
  override readonly name = 'ResumeRefusedError';
}

export interface ResumePlan {
  runId: string;
  scheduled: EventData<'RunScheduled'>;
  prepared: EventData<'WorkspacePrepared'>;
  baseline: number;
  /** The run's scores (lifecycle, best, submissions) as stored: the resumed write path continues them. */
  scores: RunScores;
  /** The RunInterrupted this resume ends. */
  interruptedSeq: number;
  /** The last fact recorded before the harness was lost. */
  lastFact: { seq: number; at: string };
  /** Agent time used so far: each segment from AgentStarted to its AgentExited, or to its last recorded fact. */
  agentSecondsUsed: number;
  budgetSecondsLeft: number;
  /** Submissions that were being graded when the harness was lost. */
  pending: string[];
  /** The agent's files as last recorded (data/ and the base model, which are prepared again, left out). */
  files: WorkspaceFile[];
  /** The agent's home as last archived: the last whole archive with the later changed-only ones applied. */
  home: Array<{ path: string; sha256: string; size: number }>;
  /** Whether the agent's home was ever archived. */
  homeArchived: boolean;
  /** The highest `sub-<n>` and `sess-<n>` numbers used, so the grading API continues them. */
  submissionNumber: number;
  /** What the agent's model calls spent so far (tokens, USD by the price table), counted against the gateway's limits. */
  llmSpent: { tokens: number; costUsd: number };
  /** 1 + the number of earlier resumes. */
  segment: number;
  /** The agent's start times, one per segment (ISO). */
  agentStarts: string[];
}


const later = (a: string, b: string | undefined) => (b !== undefined && Date.parse(b) > Date.parse(a) ? b : a);
const seconds = (from: string, to: string) => Math.max(0, (Date.parse(to) - Date.parse(from)) / 1000);

/** Reads a run's stored events (in seq order) into a plan, or throws ResumeRefusedError. */
export function planResume(runId: string, events: readonly A2rlEvent[]): ResumePlan {
  if (events.length === 0) throw new ResumeRefusedError(`run ${runId} is not in this ledger`);
  let scores = initialRunScores;
  let scheduled: EventData<'RunScheduled'> | undefined;
  let prepared: EventData<'WorkspacePrepared'> | undefined;
  let interruptedSeq = -1;
  let lastFact: { seq: number; at: string } | undefined;
  const state: WorkspaceState = new Map();
  const homeArchives: Array<EventData<'AgentHomeArchived'>> = [];
  const llmSpent = { tokens: 0, costUsd: 0 };
  let segment = 1;
  const agentStarts: string[] = [];
  let used = 0;
  let open: { start: string; last: string } | undefined;
  for (const event of events) {
    scores = evolveScores(scores, event);
    const revisions = revisionsOf(event);
    if (revisions) applyRevisions(state, { seq: event.seq, ...revisions });
    switch (event.type) {
      case 'RunScheduled':
        scheduled = event.data;
        break;
      case 'WorkspacePrepared':
        prepared = event.data;
        break;
      case 'AgentHomeArchived':
        homeArchives.push(event.data);
        break;
      case 'AgentStarted':
        open = { start: event.occurredAt, last: event.occurredAt };
        agentStarts.push(event.occurredAt);
        break;
      case 'AgentExited':
        if (open) used += seconds(open.start, eventTime(event));
        open = undefined;
        break;
      case 'RunInterrupted':
        interruptedSeq = event.seq;
        // The agent ran until the harness was lost: its last heartbeat where known, else its last recorded fact.
        if (open) used += seconds(open.start, later(open.last, event.data.lastAliveAt));
        open = undefined;
        break;
      case 'RunResumed':
        segment++;
        break;
      case 'LlmCallRecorded':
        llmSpent.tokens += callTokens(event.data);
        llmSpent.costUsd += callCostUsd(event.data) ?? 0;
        break;
      default:
        break;
    }
    if (event.type !== 'TreeHeadSigned' && event.type !== 'RunInterrupted') {
      lastFact = { seq: event.seq, at: eventTime(event) };
      if (open && Date.parse(lastFact.at) > Date.parse(open.last)) open.last = lastFact.at;
    }
  }
  const refusal = scheduled ? resumeRefusal(scores.lifecycle) : 'it has no RunScheduled';
  if (refusal) throw new ResumeRefusedError(`run ${runId} cannot be resumed: ${refusal}`);
  if (!prepared || scores.baseline === null || !lastFact) throw new ResumeRefusedError(`run ${runId} cannot be resumed: its workspace or baseline was never recorded`);
  const budgetSecondsLeft = Math.max(0, scheduled!.budgetSeconds - used);
  if (budgetSecondsLeft < 1) throw new ResumeRefusedError(`run ${runId} cannot be resumed: its budget of ${scheduled!.budgetSeconds} s was already used`);
  return {
    runId,
    scheduled: scheduled!,
    prepared,
    baseline: scores.baseline,
    scores,
    interruptedSeq,
    lastFact,
    agentSecondsUsed: round3(used),
    budgetSecondsLeft: round3(budgetSecondsLeft),
    pending: [...scores.lifecycle.pending].sort(),
    files: agentFiles(state),
    home: homeFilesOf(homeArchives),
    homeArchived: homeArchives.length > 0,
    submissionNumber: highestNumber(scores.named, 'sub'),
    segment: segment + 1,
    llmSpent,
    agentStarts,
  };
}

/** The workspace's files the agent wrote, sorted by path: what was given to it (data/, models/) is prepared again, not restored. */
function agentFiles(state: WorkspaceState): WorkspaceFile[] {
  return [...state.values()]
    .filter((f) => !/^(data|models)(\/|$)/.test(f.path))
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The highest n of ids `<prefix>-<n>` (0 when none). */
function highestNumber(ids: Iterable<string>, prefix: string): number {
  let max = 0;
  const pattern = new RegExp(`^${prefix}-(\\d{1,9})$`);
  for (const id of ids) {
    const n = Number(pattern.exec(id)?.[1] ?? 0);
    if (n > max) max = n;
  }
  return max;
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;
