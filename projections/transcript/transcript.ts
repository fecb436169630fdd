import type { A2rlEvent, EventData, LLM_CALL_OUTCOMES } from '../../modules/ledger/events/catalog.js';
import { callCostUsd } from '../derived-facts.js';

// The transcript of a run: its model calls (LlmCallRecorded, nothing else) as turns of the agent's
// tool loop, in seq order. A pure fold: the same events give the same transcript, whatever reads it
// (the CLI, the query API, the run report; docs/reports.md, "Transcript"). It is not stored as a
// read model: every reader has the run's events at hand, and a stored copy would duplicate in the
// read-model database the texts the ledger already holds. What people filter and sort on (calls,
// tokens, cost, driver) is in the run_analysis row (analysis.llm).

export type LlmCall = EventData<'LlmCallRecorded'>;
export type LlmOutcome = (typeof LLM_CALL_OUTCOMES)[number];

/** APIs where the model generates an answer; token counts and model listings do not. */
const NON_GENERATING_APIS = new Set(['count_tokens', 'countTokens', 'models']);

/** A call to an API where the model generates (what the gateway bills: not a token count or a listing). */
export function isGenerating(call: Pick<LlmCall, 'api'>): boolean {
  return !NON_GENERATING_APIS.has(call.api);
}

/**
 * A call's place in the transcript:
 * - `turn`: an answered step of the agent's tool loop — a generating call whose request sends tool
 *   results or whose answer asks for tool calls;
 * - `side`: answered, but outside the loop — a token count or listing, or a text-only exchange
 *   (titles, summaries, quota or next-speaker checks that CLIs make on the side);
 * - `failed`: the model's answer never reached the agent (any outcome but `ok`); a retry of the
 *   same step is a call of its own, so failed calls get no turn number.
 */
export type CallRole = 'turn' | 'side' | 'failed';

export function callRole(call: Pick<LlmCall, 'api' | 'outcome' | 'toolResults' | 'toolCalls'>): CallRole {
  if (call.outcome !== 'ok') return 'failed';
  if (!isGenerating(call)) return 'side';
  return call.toolResults.length > 0 || call.toolCalls.length > 0 ? 'turn' : 'side';
}

/** The model a call is attributed to: the one that answered, else the one asked for. */
export function modelOf(call: Pick<LlmCall, 'modelAnswered' | 'modelRequested'>): string | null {
  return call.modelAnswered ?? call.modelRequested ?? null;
}

export interface TranscriptEntry {
  seq: number;
  callId: string;
  role: CallRole;
  /** 1-based number among the run's turns; null for side and failed calls. */
  turn: number | null;
  provider: LlmCall['provider'];
  api: string;
  /** modelAnswered, else modelRequested. */
  model: string | null;
  modelRequested: string | null;
  stream: boolean;
  startedAt: string;
  latencyMs: number;
  ttftMs: number | null;
  status: number;
  outcome: LlmOutcome;
  error: string | null;
  /** What the request added to the conversation: the new user text and the tool results. */
  request: { messages: number; userText: string | null; toolResults: LlmCall['toolResults'] };
  answer: { text: string | null; toolCalls: LlmCall['toolCalls']; stopReason: string | null };
  usage: LlmCall['usage'];
  costUsd: number | null;
  /** The run's segment (2 on) for a call made after a resume (docs/resume.md); absent in the first. */
  segment?: number;
}

export interface TranscriptTotals extends UsageTotals {
  calls: number;
  turns: number;
  sideCalls: number;
  failedCalls: number;
  toolCalls: number;
  toolResults: number;
  /** Calls per outcome (only outcomes that occurred). */
  outcomes: Partial<Record<LlmOutcome, number>>;
}

export interface Transcript {
  runId: string | null;
  entries: TranscriptEntry[];
  totals: TranscriptTotals;
  /** Seq of the last call folded in; -1 before any. */
  lastSeq: number;
}

/** Costs are summed in seq order and rounded to 1e-8 USD, so the sum is the same on every rebuild. */
export const roundUsd = (x: number) => Math.round(x * 1e8) / 1e8;

/** Token and cost totals over model calls, as the transcript and the run analysis both show them. */
export interface UsageTotals {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Sum of the known costs; null when calls were made and none has a known cost. A lower bound when callsWithoutCost > 0. */
  costUsd: number | null;
  callsWithoutCost: number;
}

export function usageTotals(calls: readonly { usage: LlmCall['usage']; costUsd: number | null }[]): UsageTotals {
  const sum = (f: (u: LlmCall['usage']) => number | null) => calls.reduce((n, c) => n + (f(c.usage) ?? 0), 0);
  const priced = calls.filter((c) => c.costUsd !== null);
  return {
    inputTokens: sum((u) => u.inputTokens),
    outputTokens: sum((u) => u.outputTokens),
    cacheReadTokens: sum((u) => u.cacheReadTokens),
    cacheWriteTokens: sum((u) => u.cacheWriteTokens),
    costUsd: calls.length && !priced.length ? null : roundUsd(priced.reduce((n, c) => n + c.costUsd!, 0)),
    callsWithoutCost: calls.length - priced.length,
  };
}

/**
 * The fold: `add` takes the run's events in seq order (other types are ignored) and returns the
 * entry a call made, so a follower prints each one as it comes; `result` is the transcript so far.
 */
export class TranscriptBuilder {
  private readonly entries: TranscriptEntry[] = [];
  private runId: string | null = null;
  private lastSeq = -1;
  private turns = 0;

  add(event: A2rlEvent): TranscriptEntry | null {
    if (event.type !== 'LlmCallRecorded' || event.seq <= this.lastSeq) return null;
    const d = event.data;
    const role = callRole(d);
    const entry: TranscriptEntry = {
      seq: event.seq,
      callId: d.callId,
      role,
      turn: role === 'turn' ? ++this.turns : null,
      provider: d.provider,
      api: d.api,
      model: modelOf(d),
      modelRequested: d.modelRequested,
      stream: d.stream,
      startedAt: d.startedAt,
      latencyMs: d.latencyMs,
      ttftMs: d.ttftMs,
      status: d.status,
      outcome: d.outcome,
      error: d.error ?? null,
      request: { messages: d.messages, userText: d.userText ?? null, toolResults: d.toolResults.map((r) => ({ ...r })) },
      answer: { text: d.outputText, toolCalls: d.toolCalls.map((c) => ({ ...c })), stopReason: d.stopReason },
      usage: { ...d.usage },
      costUsd: callCostUsd(d),
      ...(d.segment ? { segment: d.segment } : {}),
    };
    this.runId ??= event.runId;
    this.lastSeq = event.seq;
    this.entries.push(entry);
    return entry;
  }

  result(): Transcript {
    return { runId: this.runId, entries: [...this.entries], totals: totalsOf(this.entries), lastSeq: this.lastSeq };
  }
}

/** The transcript of a run's events (any order in, seq order out). */
export function buildTranscript(events: readonly A2rlEvent[]): Transcript {
  const builder = new TranscriptBuilder();
  for (const e of [...events].sort((a, b) => a.seq - b.seq)) builder.add(e);
  return builder.result();
}

export function totalsOf(entries: readonly TranscriptEntry[]): TranscriptTotals {
  const outcomes: Partial<Record<LlmOutcome, number>> = {};
  const sum = (f: (e: TranscriptEntry) => number) => entries.reduce((n, e) => n + f(e), 0);
  for (const e of entries) outcomes[e.outcome] = (outcomes[e.outcome] ?? 0) + 1;
  return {
    calls: entries.length,
    turns: entries.filter((e) => e.role === 'turn').length,
    sideCalls: entries.filter((e) => e.role === 'side').length,
    failedCalls: entries.filter((e) => e.role === 'failed').length,
    toolCalls: sum((e) => e.answer.toolCalls.length),
    toolResults: sum((e) => e.request.toolResults.length),
    ...usageTotals(entries),
    outcomes,
  };
}
