import type { A2rlEvent, EventData } from '../modules/ledger/events/catalog.js';
import { costOf, priceTable, type PriceTable } from '../modules/llm-gateway/prices.js';

// Values derived from facts, which older events also carry as recorded fields (SubmissionGraded's
// improvement, WorkspaceIntegrityChecked's ok, LlmCallRecorded's costUsd, LimitReached's action).
// Each reader takes the recorded value where an event has one — an old run reads exactly as it did —
// and otherwise computes it here from the facts, the way the emitters used to (docs/event-catalog.md).

/**
 * Each grading's improvement by its seq: as recorded, else its score minus the baseline in force when
 * it was graded (the last BaselineEvaluated before it: an operator may set the baseline again); null
 * without a baseline.
 */
export function improvementsOf(events: Iterable<A2rlEvent>): Map<number, number | null> {
  const improvements = new Map<number, number | null>();
  let baseline: number | null = null;
  for (const e of events) {
    if (e.type === 'BaselineEvaluated') baseline = e.data.score;
    else if (e.type === 'SubmissionGraded') improvements.set(e.seq, improvementOf(e.data, baseline));
  }
  return improvements;
}

/** One grading's improvement: as recorded, else score − baseline (null without a baseline). */
export function improvementOf(d: EventData<'SubmissionGraded'>, baseline: number | null): number | null {
  if (d.improvement !== undefined) return d.improvement;
  return baseline === null ? null : d.score - baseline;
}

/** Whether a check found data/ and models/ as the manifest says: as recorded, else no difference found. */
export function integrityOk(d: EventData<'WorkspaceIntegrityChecked'>): boolean {
  return d.ok ?? (d.differences.length === 0 && (d.moreDifferences ?? 0) === 0);
}

/** The APIs whose calls are billed (the codecs' billable routes); counting tokens and listing models cost nothing. */
const BILLABLE_APIS = new Set(['messages', 'chat.completions', 'responses', 'generateContent', 'streamGenerateContent']);

/**
 * What a model call cost in USD: as recorded, else priced from its usage with the price table it
 * names (modules/llm-gateway/prices.json): the answered model's price, else the requested one's; 0 for
 * a call that is not billed; null when the model has no price, the call reported no usage, or the
 * table it names is not the one this a2rl has (a price is never guessed from another table).
 */
/** Tokens a model call counts against the run's limit (input, output and cache; 0 for calls not billed), as the gateway counts them. */
export function callTokens(d: EventData<'LlmCallRecorded'>): number {
  if (!BILLABLE_APIS.has(d.api)) return 0;
  const u = d.usage;
  return (u.inputTokens ?? 0) + (u.outputTokens ?? 0) + (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0);
}

export function callCostUsd(d: EventData<'LlmCallRecorded'>, table: PriceTable = priceTable()): number | null {
  if (d.costUsd !== undefined) return d.costUsd;
  if (!BILLABLE_APIS.has(d.api)) return 0;
  if (d.priceTable !== table.version) return null;
  return costOf(d.modelAnswered ?? d.modelRequested, d.usage, table);
}

/**
 * What the harness did about a limit: as recorded, else the action the limit always has (the
 * emitters of these limits no longer write the prose). A limit whose action is a decision (disk:
 * the agent stopped, or only recorded) keeps it recorded.
 */
export function limitAction(d: EventData<'LimitReached'>): string {
  if (d.action !== undefined) return d.action;
  switch (d.limit) {
    case 'outputBytesPerStream':
      return `stopped archiving ${d.scope ?? 'the stream'}; later bytes are counted, not stored`;
    case 'checkpointBytes':
      return 'refused the submission';
    case 'fileBytes':
      return 'not archived';
    case 'llmTokens':
    case 'llmCostUsd':
      return 'billable LLM calls answered 429';
    default:
      return 'recorded';
  }
}
