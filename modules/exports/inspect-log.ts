import { createHash } from 'node:crypto';
import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { buildTranscript, type TranscriptEntry } from '../../projections/transcript/transcript.js';
import { improvementsOf } from '../../projections/derived-facts.js';

// Runs as Inspect AI eval logs (the JSON log format, version 2, that `inspect view`, its log reader
// `read_eval_log` and its dataframe API read; docs/exports.md). One log per task × agent × driver,
// one sample per run: the grading API's scores, the gateway's model usage, one model event per
// recorded model call, one tool event per process the agent started, one score event per graded
// submission. Each sample and event carries the ledger seq it comes from (metadata.a2rl).

export interface InspectRun {
  analysis: RunAnalysis;
  /** The run's events in seq order. */
  events: A2rlEvent[];
}

type Json = Record<string, unknown>;

const ofType = <T extends A2rlEvent['type']>(events: readonly A2rlEvent[], type: T) => events.filter((e): e is Extract<A2rlEvent, { type: T }> => e.type === type);

/** A stable id from text (Inspect ids are free strings; ours are derived, so exports are byte-identical). */
const stableId = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, 22);

/** Inspect names models `provider/model`; a2rl's drivers are model names (`none` for agents without one). */
export function inspectModel(driver: string | null): string {
  if (!driver) return 'none/none';
  return driver.includes('/') ? driver : `a2rl/${driver}`;
}

function toolCall(c: { id?: string; name: string; input: string }, i: number, seq: number): Json {
  let args: unknown;
  try {
    args = JSON.parse(c.input);
  } catch {
    args = null;
  }
  const ok = args !== null && typeof args === 'object' && !Array.isArray(args);
  return { id: c.id ?? `call-${seq}-${i}`, function: c.name, arguments: ok ? args : { input: c.input }, type: 'function', ...(ok ? {} : { parse_error: 'the recorded input is not a JSON object (or was cut at 2000 characters)' }) };
}

/** What one model call added to the conversation (new user text, tool results) and its answer, as Inspect chat messages. */
function callMessages(e: TranscriptEntry): { input: Json[]; answer: Json | null } {
  const input: Json[] = [];
  for (const r of e.request.toolResults) input.push({ role: 'tool', content: r.output, tool_call_id: r.id ?? null, function: r.name ?? null, ...(r.isError ? { error: { type: 'unknown', message: r.output.slice(0, 200) } } : {}) });
  if (e.request.userText !== null) input.push({ role: 'user', content: e.request.userText });
  const answer = e.outcome === 'ok' ? { role: 'assistant', content: e.answer.text ?? '', tool_calls: e.answer.toolCalls.map((c, i) => toolCall(c, i, e.seq)), model: e.model, source: 'generate' } : null;
  return { input, answer };
}

function usageOf(u: { inputTokens: number | null; outputTokens: number | null; cacheReadTokens: number | null; cacheWriteTokens: number | null }, cost: number | null): Json {
  const input = u.inputTokens ?? 0;
  const output = u.outputTokens ?? 0;
  return {
    input_tokens: input,
    output_tokens: output,
    total_tokens: input + output + (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0),
    ...(u.cacheReadTokens !== null ? { input_tokens_cache_read: u.cacheReadTokens } : {}),
    ...(u.cacheWriteTokens !== null ? { input_tokens_cache_write: u.cacheWriteTokens } : {}),
    ...(cost !== null ? { total_cost: cost } : {}),
  };
}

function sample(run: InspectRun): Json {
  const a = run.analysis;
  const events = run.events;
  const transcript = buildTranscript(events);
  const improvements = improvementsOf(events);
  const messages: Json[] = [];
  const sampleEvents: Json[] = [];
  const scheduled = ofType(events, 'RunScheduled')[0];
  const started = events[0]?.occurredAt ?? null;
  const ended = events.at(-1)?.occurredAt ?? null;

  // The timeline, in seq order: model calls, processes (with their exits), graded submissions.
  const exits = new Map<number, Extract<A2rlEvent, { type: 'ProcessExited' }>>();
  const open = new Map<number, number>(); // pid → seq of its ProcessStarted
  for (const e of events) {
    if (e.type === 'ProcessStarted') open.set(e.data.pid, e.seq);
    else if (e.type === 'ProcessExited' && open.has(e.data.pid)) {
      exits.set(open.get(e.data.pid)!, e);
      open.delete(e.data.pid);
    }
  }
  const calls = new Map(transcript.entries.map((t) => [t.seq, t]));
  for (const e of events) {
    if (e.type === 'LlmCallRecorded') {
      const t = calls.get(e.seq);
      if (!t) continue;
      const { input, answer } = callMessages(t);
      messages.push(...input);
      if (answer) messages.push(answer);
      const done = new Date(Date.parse(t.startedAt) + t.latencyMs).toISOString();
      sampleEvents.push({
        event: 'model', timestamp: t.startedAt, completed: done, working_start: 0, model: t.model ?? 'unknown', ...(t.modelRequested ? { requested_model: t.modelRequested } : {}),
        input, tools: [], tool_choice: 'auto', config: {},
        output: { model: t.model ?? 'unknown', choices: answer ? [{ message: answer, stop_reason: stopReason(t.answer.stopReason) }] : [], usage: usageOf(t.usage, t.costUsd), time: t.latencyMs / 1000, ...(answer ? {} : { error: t.error ?? t.outcome }) },
        ...(t.outcome === 'ok' ? {} : { error: `${t.outcome}${t.error ? `: ${t.error}` : ''}` }),
        working_time: t.latencyMs / 1000,
        metadata: { a2rl: { seq: e.seq, eventId: e.id, callId: t.callId, provider: t.provider, api: t.api, outcome: t.outcome, role: t.role, turn: t.turn } },
      });
    } else if (e.type === 'ProcessStarted') {
      const exit = exits.get(e.seq);
      const x = exit?.data;
      sampleEvents.push({
        event: 'tool', type: 'function', timestamp: e.occurredAt, working_start: 0, id: `process-${e.seq}`, function: 'process',
        arguments: { argv: e.data.argv, cwd: e.data.cwd, pid: e.data.pid, ppid: e.data.ppid },
        result: x ? `exit code ${x.exitCode ?? '-'}${x.signal ? `, signal ${x.signal}` : ''}, ${x.durationMs} ms` : 'not recorded as exited',
        ...(exit ? { completed: exit.occurredAt } : {}),
        ...(x && ((x.exitCode !== null && x.exitCode !== 0) || x.signal) ? { error: { type: 'unknown', message: `exit code ${x.exitCode ?? '-'}${x.signal ? `, signal ${x.signal}` : ''}` } } : {}),
        metadata: { a2rl: { seq: e.seq, eventId: e.id, exitSeq: exit?.seq ?? null } },
      });
    } else if (e.type === 'SubmissionGraded') {
      sampleEvents.push({
        event: 'score', timestamp: e.occurredAt, working_start: 0, intermediate: true,
        score: { value: e.data.score, explanation: `submission ${e.data.submissionId} graded by the grading API`, metadata: { submissionId: e.data.submissionId, improvement: improvements.get(e.seq) ?? null } },
        metadata: { a2rl: { seq: e.seq, eventId: e.id } },
      });
    }
  }

  const best = a.best ?? a.baseline;
  const scores: Json = {};
  if (best !== null) {
    scores.best_of_budget = {
      value: best,
      explanation: a.best !== null ? `best graded submission of ${a.submissions.length}` : 'no graded submission: the base model (baseline) stands',
      metadata: { baseline: a.baseline, best: a.best, improvement: a.improvement, failure_class: a.failure.class, failure_rule: a.failure.rule, route: a.route.best, evidence: a.failure.evidence },
    };
  }
  if (best !== null && a.baseline !== null) scores.improvement = { value: best - a.baseline, explanation: 'best-of-budget minus baseline' };
  // Model usage from the calls themselves (the gateway's usage per call), per answering model.
  const usage: Record<string, Record<string, number>> = {};
  for (const t of transcript.entries) {
    const acc = (usage[t.model ?? 'unknown'] ??= {});
    for (const [k, v] of Object.entries(usageOf(t.usage, t.costUsd))) acc[k] = k === 'total_cost' ? Math.round(((acc[k] ?? 0) + (v as number)) * 1e8) / 1e8 : (acc[k] ?? 0) + (v as number);
  }
  const last = messages.filter((m) => m.role === 'assistant').at(-1);
  return {
    id: a.runId,
    epoch: 1,
    input: `a2rl run ${a.runId}: task ${a.task ?? '-'}, agent ${a.agent ?? '-'}, driver ${a.driver ?? '-'}, budget ${a.budgetSeconds ?? '-'} s, mode ${a.mode ?? '-'}`,
    target: '',
    messages,
    output: { model: inspectModel(a.driver), choices: last ? [{ message: last, stop_reason: 'stop' }] : [] },
    scores,
    metadata: {
      a2rl: {
        runId: a.runId, task: a.task, agent: a.agent, driver: a.driver, declaredDriver: a.declaredDriver, baseModel: a.baseModel, seed: scheduled?.data.seed ?? null,
        campaign: scheduled?.data.campaign ?? null, state: a.state, failureClass: a.failure.class, route: a.route.best, lastSeq: a.lastSeq, eventCount: a.eventCount,
      },
    },
    store: {},
    events: sampleEvents,
    model_usage: usage,
    ...(started ? { started_at: started } : {}),
    ...(ended ? { completed_at: ended } : {}),
    total_time: a.durationS,
    uuid: stableId(`sample/${a.runId}`),
    ...(a.state !== null && ['completed', 'interrupted', 'setup_failed', 'cancelled'].includes(a.state) ? {} : { error: { message: `the run is ${a.state ?? 'not started'}`, traceback: '', traceback_ansi: '' } }),
  };
}

function stopReason(r: string | null): string {
  if (r === null) return 'unknown';
  if (/tool/.test(r)) return 'tool_calls';
  if (/max|length/.test(r)) return 'max_tokens';
  if (/stop|end/.test(r)) return 'stop';
  return 'unknown';
}

/** The Inspect eval log (JSON) of runs of one task × agent × driver, one sample per run. */
export function inspectLog(runs: readonly InspectRun[], opts: { campaignId?: string } = {}): Json {
  if (!runs.length) throw new Error('an Inspect log needs at least one run');
  const sorted = [...runs].sort((p, q) => (p.analysis.runId < q.analysis.runId ? -1 : 1));
  const first = sorted[0].analysis;
  const samples = sorted.map(sample);
  const scored = samples.filter((s) => (s.scores as Json).best_of_budget);
  const meanOf = (name: string) => {
    const xs = samples.flatMap((s) => ((s.scores as Json)[name] ? [((s.scores as Json)[name] as { value: number }).value] : []));
    return xs.length ? xs.reduce((x, y) => x + y, 0) / xs.length : null;
  };
  const models: Record<string, Json> = {};
  for (const s of samples) {
    for (const [m, u] of Object.entries(s.model_usage as Record<string, Record<string, number>>)) {
      const acc = (models[m] ??= {}) as Record<string, number>;
      for (const [k, v] of Object.entries(u)) acc[k] = (acc[k] ?? 0) + v;
    }
  }
  const times = sorted.map((r) => r.events[0]?.occurredAt).filter((t): t is string => !!t).sort();
  const ends = sorted.map((r) => r.events.at(-1)?.occurredAt).filter((t): t is string => !!t).sort();
  const allEnded = sorted.every((r) => r.analysis.state !== null && ['completed', 'interrupted', 'setup_failed', 'cancelled'].includes(r.analysis.state));
  const id = `${opts.campaignId ?? first.runId}/${first.task}/${first.agent}/${first.driver}`;
  const metric = (name: string) => (meanOf(name) === null ? [] : [{ name, scorer: 'a2rl_grading', scored_samples: scored.length, unscored_samples: samples.length - scored.length, params: {}, metrics: { mean: { name: 'mean', value: meanOf(name), params: {} } } }]);
  return {
    version: 2,
    status: allEnded ? 'success' : 'started',
    eval: {
      eval_id: stableId(`eval/${id}`),
      run_id: opts.campaignId ?? first.runId,
      created: times[0] ?? first.scheduledAt ?? '1970-01-01T00:00:00Z',
      task: `a2rl/${first.task ?? 'unknown'}`,
      task_id: stableId(`task/${first.task}`),
      task_version: 0,
      task_attribs: {},
      task_args: {},
      solver: first.agent ?? 'unknown',
      solver_args: {},
      dataset: { name: first.task ?? 'unknown', samples: samples.length, sample_ids: samples.map((s) => s.id), shuffled: false },
      model: inspectModel(first.driver),
      model_generate_config: {},
      model_args: {},
      config: { epochs: 1 },
      packages: {},
      metadata: { a2rl: { task: first.task, agent: first.agent, driver: first.driver, campaignId: opts.campaignId ?? null, runs: sorted.map((r) => r.analysis.runId) } },
      scorers: [{ name: 'a2rl_grading', options: {}, metrics: [{ name: 'mean', options: {} }], metadata: {} }],
    },
    plan: { name: 'plan', steps: [{ solver: first.agent ?? 'unknown', params: {} }], config: {} },
    results: { total_samples: samples.length, completed_samples: scored.length, scores: [...metric('best_of_budget'), ...metric('improvement')] },
    stats: { ...(times[0] ? { started_at: times[0] } : {}), ...(ends.at(-1) ? { completed_at: ends.at(-1) } : {}), model_usage: models },
    samples,
  };
}

export type { EventData };
