import type { A2rlEvent } from '../ledger/events/catalog.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { buildTranscript, type TranscriptEntry } from '../../projections/transcript/transcript.js';
import { improvementsOf } from '../../projections/derived-facts.js';

// A run as an ATIF v1.7 trajectory (Harbor's Agent Trajectory Interchange Format; docs/analysis.md
// "Exports"): one agent step per recorded model call (the answer's text and tool calls, the
// gateway's usage as the step's metrics), the tool results the agent sent back paired to the calls
// that asked for them (by tool call id) as that step's observation, the new user text of a call as a
// user step before it, and under `extra` the ledger's seq, event id and sha256 of each step's event,
// the grading API's submissions and scores, and the run's verdicts.

export const ATIF_VERSION = 'ATIF-v1.7';

export interface AtifRun {
  analysis: RunAnalysis;
  /** The run's events in seq order. */
  events: A2rlEvent[];
  /** sha256 of each event's stored bytes, by seq (what the signed tree heads cover), where known. */
  hashes?: ReadonlyMap<number, string>;
}

type Json = Record<string, unknown>;

function callId(c: { id?: string }, seq: number, i: number): string {
  return c.id ?? `a2rl-call-${seq}-${i}`;
}

function args(input: string): { value: Json; parsed: boolean } {
  try {
    const v = JSON.parse(input) as unknown;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return { value: v as Json, parsed: true };
  } catch {
    // recorded inputs are cut at 2000 characters: not always JSON
  }
  return { value: { input }, parsed: false };
}

export function atifTrajectory(run: AtifRun, producer = 'a2rl'): Json {
  const a = run.analysis;
  const transcript = buildTranscript(run.events);
  const bySeq = new Map(run.events.map((e) => [e.seq, e]));
  const ledger = (seq: number) => ({ seq, eventId: bySeq.get(seq)?.id ?? null, sha256: run.hashes?.get(seq) ?? null });

  // Tool results, by the id of the call they answer: the first later request that sends each back.
  const results = new Map<string, { output: string; isError: boolean; seq: number }>();
  for (const t of transcript.entries) for (const r of t.request.toolResults) if (r.id && !results.has(r.id)) results.set(r.id, { output: r.output, isError: r.isError === true, seq: t.seq });

  const scheduled = run.events.find((e): e is Extract<A2rlEvent, { type: 'RunScheduled' }> => e.type === 'RunScheduled');
  const steps: Json[] = [{
    step_id: 1,
    timestamp: run.events[0]?.occurredAt,
    source: 'system',
    message: `a2rl run ${a.runId}: task ${a.task ?? '-'} (base model ${a.baseModel ?? '-'}), agent ${a.agent ?? '-'}, budget ${a.budgetSeconds ?? '-'} s, mode ${a.mode ?? '-'}, seed ${scheduled?.data.seed ?? '-'}`,
    extra: { a2rl: ledger(0) },
  }];
  const add = (step: Json) => steps.push({ step_id: steps.length + 1, ...step });

  for (const t of transcript.entries) {
    if (t.request.userText !== null) add({ timestamp: t.startedAt, source: 'user', message: t.request.userText, extra: { a2rl: { ...ledger(t.seq), part: 'request' } } });
    const calls = t.answer.toolCalls.map((c, i) => {
      const parsed = args(c.input);
      return { tool_call_id: callId(c, t.seq, i), function_name: c.name, arguments: parsed.value, ...(parsed.parsed ? {} : { extra: { a2rl: { inputNotJson: true } } }) };
    });
    const observed = calls.flatMap((c) => {
      const r = results.get(c.tool_call_id);
      return r ? [{ source_call_id: c.tool_call_id, content: r.output, extra: { a2rl: { ...ledger(r.seq), isError: r.isError } } }] : [];
    });
    add({
      timestamp: t.startedAt,
      source: 'agent',
      ...(t.model ? { model_name: t.model } : {}),
      message: t.answer.text ?? (t.outcome === 'ok' ? '' : `(no answer: ${t.outcome}${t.error ? `: ${t.error}` : ''})`),
      ...(calls.length ? { tool_calls: calls } : {}),
      ...(observed.length ? { observation: { results: observed } } : {}),
      metrics: metricsOf(t),
      llm_call_count: 1,
      extra: { a2rl: { ...ledger(t.seq), callId: t.callId, provider: t.provider, api: t.api, outcome: t.outcome, role: t.role, turn: t.turn, latencyMs: t.latencyMs, ttftMs: t.ttftMs, stopReason: t.answer.stopReason } },
    });
  }

  const improvements = improvementsOf(run.events);
  const submissions = run.events.flatMap((e): Json[] => {
    if (e.type === 'SubmissionReceived') return [{ event: 'received', submissionId: e.data.submissionId, modelPath: e.data.modelPath, ...ledger(e.seq), occurredAt: e.occurredAt }];
    if (e.type === 'SubmissionGraded') return [{ event: 'graded', submissionId: e.data.submissionId, score: e.data.score, improvement: improvements.get(e.seq) ?? null, ...ledger(e.seq), occurredAt: e.occurredAt }];
    if (e.type === 'SubmissionRejected') return [{ event: 'rejected', submissionId: e.data.submissionId, reason: e.data.reasonClass, message: e.data.message, ...ledger(e.seq), occurredAt: e.occurredAt }];
    return [];
  });
  const tot = transcript.totals;
  return {
    schema_version: ATIF_VERSION,
    session_id: a.runId,
    trajectory_id: a.runId,
    agent: { name: a.agent ?? 'unknown', version: 'unknown', ...(a.driver ? { model_name: a.driver } : {}), extra: { a2rl: { producer, declaredDriver: a.declaredDriver } } },
    steps,
    notes: 'Exported by a2rl from its ledger: every step cites the event it comes from (extra.a2rl: seq, eventId, sha256 of the stored event); tool calls and results are as the LLM gateway recorded them (inputs and outputs cut at 2000 characters).',
    final_metrics: {
      total_prompt_tokens: tot.inputTokens,
      total_completion_tokens: tot.outputTokens,
      total_cached_tokens: tot.cacheReadTokens,
      ...(tot.costUsd !== null ? { total_cost_usd: tot.costUsd } : {}),
      total_steps: steps.length,
      extra: { a2rl: { calls: tot.calls, turns: tot.turns, failedCalls: tot.failedCalls, callsWithoutCost: tot.callsWithoutCost } },
    },
    extra: {
      a2rl: {
        runId: a.runId, task: a.task, agent: a.agent, driver: a.driver, baseModel: a.baseModel, seed: scheduled?.data.seed ?? null, campaign: scheduled?.data.campaign ?? null,
        state: a.state, baseline: a.baseline, best: a.best, improvement: a.improvement,
        failure: a.failure, route: a.route, submissions,
        ledger: { stream: `run-${a.runId}`, events: run.events.length, lastSeq: run.events.at(-1)?.seq ?? null },
      },
    },
  };
}

function metricsOf(t: TranscriptEntry): Json {
  const u = t.usage;
  return {
    ...(u.inputTokens !== null ? { prompt_tokens: u.inputTokens } : {}),
    ...(u.outputTokens !== null ? { completion_tokens: u.outputTokens } : {}),
    ...(u.cacheReadTokens !== null ? { cached_tokens: u.cacheReadTokens } : {}),
    ...(t.costUsd !== null ? { cost_usd: t.costUsd } : {}),
    ...(u.cacheWriteTokens !== null ? { extra: { cache_write_tokens: u.cacheWriteTokens } } : {}),
  };
}
