import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { callRole, isGenerating, usageTotals, type LlmCall } from '../transcript/transcript.js';
import type { LlmAnalysis, LlmModelUsage, LlmStats } from './analysis.types.js';
import { callCostUsd } from '../derived-facts.js';

// The run's model calls (LlmCallRecorded) per model, and the driver they show (docs/analysis.md,
// "LLM usage and the driver"). Pure, like the rest of the analysis.

type CallEvent = Extract<A2rlEvent, { type: 'LlmCallRecorded' }>;

const byText = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);

/** Nearest-rank median: the ⌈n/2⌉-th smallest value (always one that was observed); null for none. */
export function p50(values: number[]): number | null {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(sorted.length / 2) - 1];
}

function stats(calls: readonly CallEvent[]): LlmStats {
  const answered = calls.filter((c) => c.data.outcome === 'ok');
  const errors: Record<string, number> = {};
  for (const c of calls) if (c.data.outcome !== 'ok') errors[c.data.outcome] = (errors[c.data.outcome] ?? 0) + 1;
  return {
    calls: calls.length,
    billableCalls: calls.filter((c) => isGenerating(c.data)).length,
    turns: calls.filter((c) => callRole(c.data) === 'turn').length,
    ...usageTotals(calls.map((c) => ({ usage: c.data.usage, costUsd: callCostUsd(c.data) }))),
    errors,
    latencyP50Ms: p50(answered.map((c) => c.data.latencyMs)),
    ttftP50Ms: p50(answered.flatMap((c) => (c.data.ttftMs === null ? [] : [c.data.ttftMs]))),
  };
}

/**
 * Each requested name as the provider first answered it in this run (`claude-sonnet-4-5` →
 * `claude-sonnet-4-5-20250929`), so a failed call of an alias counts for the model it names.
 */
function answeredAs(calls: readonly CallEvent[]): Map<string, string> {
  const aliases = new Map<string, string>();
  for (const { data } of calls) {
    if (data.modelRequested !== null && data.modelAnswered !== null && !aliases.has(data.modelRequested)) aliases.set(data.modelRequested, data.modelAnswered);
  }
  return aliases;
}

function modelName(call: LlmCall, aliases: Map<string, string>): string {
  return call.modelAnswered ?? (call.modelRequested !== null ? (aliases.get(call.modelRequested) ?? call.modelRequested) : 'unknown');
}

/** Most-used first: turns, then billable calls, then output tokens, then name. */
function byUse(p: LlmModelUsage, q: LlmModelUsage): number {
  return q.turns - p.turns || q.billableCalls - p.billableCalls || q.outputTokens - p.outputTokens || byText(p.model, q.model);
}

export function llmAnalysis(events: readonly A2rlEvent[]): LlmAnalysis | null {
  const calls = events.filter((e): e is CallEvent => e.type === 'LlmCallRecorded');
  const started = events.find((e): e is Extract<A2rlEvent, { type: 'AgentStarted' }> => e.type === 'AgentStarted');
  const gateway = started?.data.gateway;
  if (!calls.length && !gateway) return null;
  const aliases = answeredAs(calls);
  const byModel = new Map<string, CallEvent[]>();
  for (const c of calls) {
    const model = modelName(c.data, aliases);
    byModel.set(model, [...(byModel.get(model) ?? []), c]);
  }
  const models = [...byModel.entries()]
    .map(([model, list]): LlmModelUsage => ({
      model,
      providers: [...new Set(list.map((c) => c.data.provider))].sort(byText),
      ...stats(list),
      evidence: list.map((c) => c.seq),
    }))
    .sort(byUse);
  return {
    gateway: gateway && started ? { providers: [...gateway.providers].sort(byText), url: gateway.url, evidence: [started.seq] } : null,
    models,
    totals: stats(calls),
    priceTables: [...new Set(calls.map((c) => c.data.priceTable))].sort(byText),
    evidence: calls.map((c) => c.seq),
  };
}

/** The names the upstream answered as (`modelAnswered`) in the run's calls. */
export function answeredModels(events: readonly A2rlEvent[]): Set<string> {
  const names = new Set<string>();
  for (const e of events) if (e.type === 'LlmCallRecorded' && e.data.modelAnswered !== null) names.add(e.data.modelAnswered);
  return names;
}

/** A model name without case and `provider/` prefix: the part of `sameModel` that holds both ways. */
export const modelKey = (name: string) => name.trim().toLowerCase().split('/').pop()!;

/**
 * The model the calls show as the driver: among the models the upstream answered as (a name the agent
 * only asked for never decides it), the most-used one by `byUse`, names that differ only in case or a
 * `provider/` prefix counted as one model (shown under its most-used name); null when none made a
 * billable call.
 */
export function usedDriver(llm: LlmAnalysis | null, answered: ReadonlySet<string>): string | null {
  const groups = new Map<string, LlmModelUsage>();
  for (const m of llm?.models ?? []) {
    if (!answered.has(m.model) || m.billableCalls === 0) continue;
    const key = modelKey(m.model);
    const group = groups.get(key);
    // models are most-used first, so a group keeps the name of its most-used member.
    groups.set(key, group ? { ...group, turns: group.turns + m.turns, billableCalls: group.billableCalls + m.billableCalls, outputTokens: group.outputTokens + m.outputTokens } : m);
  }
  return [...groups.values()].sort(byUse)[0]?.model ?? null;
}

/**
 * Whether a declared driver names the model that was used: equal ignoring case and a `provider/`
 * prefix, or the declared name followed in the used one by `-`, `@` or `:` and a version
 * (`claude-sonnet-4-5` → `claude-sonnet-4-5-20250929`); `gpt-4` is not `gpt-4o`.
 */
export function sameModel(declared: string, used: string): boolean {
  const norm = (name: string) => name.trim().toLowerCase().split('/').pop()!;
  const d = norm(declared);
  const u = norm(used);
  return u === d || (d.length > 0 && u.startsWith(d) && '-@:'.includes(u[d.length]));
}

/** The analysis's driver fields: the answered model when the calls show one, else the declared one. */
export function driverAttribution(
  declared: string | null,
  llm: LlmAnalysis | null,
  answered: ReadonlySet<string>,
): { driver: string | null; declaredDriver: string | null; driverMismatch: boolean } {
  const used = usedDriver(llm, answered);
  return { driver: used ?? declared, declaredDriver: declared, driverMismatch: used !== null && declared !== null && !sameModel(declared, used) };
}
