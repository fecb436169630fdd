import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent, EventData, EventType } from '../../modules/ledger/events/catalog.js';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { failedCall, llmCall } from '../transcript/testing/llm-call.js';
import { analyzeRun } from './analyze.js';
import { p50, sameModel } from './llm.js';
import { sha } from '../../test/testing/helpers.js';

const RUN = 'llm-1';
const GATEWAY = { providers: ['anthropic' as const], url: 'http://127.0.0.1:5001' };

/** A run of an LLM-driven agent, event by event, one second apart. */
class Run {
  readonly events: A2rlEvent[] = [];
  readonly blobs = new Map<string, Buffer>();
  private seconds = 0;

  add<T extends EventType>(type: T, data: EventData<T>, dt = 1): number {
    this.seconds += dt;
    this.events.push(buildEvent(type, RUN, this.events.length, new Date(Date.UTC(2026, 0, 1) + this.seconds * 1000), data));
    return this.events.length - 1;
  }

  start(opts: { driver?: string; gateway?: boolean } = {}): this {
    this.add('RunScheduled', { task: 'ref-x', agent: 'claude-code', ...(opts.driver ? { driver: opts.driver } : {}), baseModel: 'tiny', budgetSeconds: 600, seed: 0, mode: 'free' }, 0);
    this.add('WorkspacePrepared', { workspace: '/ws', sandbox: 'bwrap', mounts: [], dataManifest: [] });
    this.add('BaselineEvaluated', { score: 10, cached: false });
    this.add('AgentStarted', { command: 'start.sh', ...(opts.gateway === false ? {} : { gateway: GATEWAY }) });
    return this;
  }

  call(overrides: Partial<EventData<'LlmCallRecorded'>> = {}): number {
    return this.add('LlmCallRecorded', llmCall({ callId: `c${this.events.length}`, ...overrides }));
  }

  failed(overrides: Partial<EventData<'LlmCallRecorded'>> = {}): number {
    return this.add('LlmCallRecorded', failedCall({ callId: `c${this.events.length}`, ...overrides }));
  }

  submit(score: number): number {
    const seq = this.add('SubmissionReceived', { submissionId: `s${this.events.length}`, modelPath: 'output/m', manifest: [] });
    this.add('SubmissionGraded', { submissionId: `s${seq}`, score, improvement: score - 10 });
    return seq;
  }

  stderr(text: string): number {
    const sha256 = sha(text);
    this.blobs.set(sha256, Buffer.from(text));
    return this.add('AgentOutput', { stream: 'stderr', chunk: { sha256, size: text.length, key: `sha256/${sha256}` }, observedAt: new Date(Date.UTC(2026, 0, 1) + (this.seconds + 1) * 1000).toISOString() });
  }

  end(reason: 'completed' | 'timeout' | 'crashed' = 'completed', exitCode?: number, dt = 1): number {
    const seq = this.add('AgentExited', { reason, ...(exitCode !== undefined ? { exitCode } : {}) }, dt);
    this.add('RunCompleted', { submissions: 0 }, 0);
    return seq;
  }

  analyze() {
    return analyzeRun(this.events, { read: async (h) => this.blobs.get(h) ?? null });
  }
}

describe('LLM usage per model', () => {
  it('counts calls, billable calls, turns, tokens, cost, errors and medians per model, most-used first, with totals', async () => {
    const r = new Run().start({ driver: 'claude-sonnet-4-5' });
    const quota = r.call({ modelRequested: 'claude-haiku-4-5', modelAnswered: 'claude-haiku-4-5', toolCalls: [], outputText: 'ok', costUsd: 0.0001, latencyMs: 100, ttftMs: 50 });
    const first = r.call({ latencyMs: 1000, ttftMs: 200 });
    const retry = r.failed({ messages: 3, toolResults: [{ output: 'x' }] }); // requested the alias: counted for the model it names
    const second = r.call({ messages: 3, toolResults: [{ output: 'x' }], latencyMs: 3000, ttftMs: 400, costUsd: null, usage: { inputTokens: 2000, outputTokens: 80, cacheReadTokens: 1500, cacheWriteTokens: 10 } });
    const count = r.call({ api: 'count_tokens', toolCalls: [], costUsd: 0, latencyMs: 20, ttftMs: null, usage: { inputTokens: 900, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null } });
    r.end();
    const a = await r.analyze();
    expect(a.llm!.gateway).toEqual({ providers: ['anthropic'], url: 'http://127.0.0.1:5001', evidence: [3] });
    expect(a.llm!.models.map((m) => m.model)).toEqual(['claude-sonnet-4-5-20250929', 'claude-haiku-4-5']);
    expect(a.llm!.models[0]).toEqual({
      model: 'claude-sonnet-4-5-20250929',
      providers: ['anthropic'],
      calls: 4,
      billableCalls: 3,
      turns: 2,
      inputTokens: 3900,
      outputTokens: 130,
      cacheReadTokens: 1500,
      cacheWriteTokens: 10,
      costUsd: 0.00375, // the first call's; the failed call and the second are unpriced, the count is free
      callsWithoutCost: 2,
      errors: { upstream_timeout: 1 },
      latencyP50Ms: 1000, // answered calls 20, 1000, 3000
      ttftP50Ms: 200, // 200, 400
      evidence: [first, retry, second, count],
    });
    expect(a.llm!.models[1]).toMatchObject({ calls: 1, turns: 0, billableCalls: 1, costUsd: 0.0001, evidence: [quota] });
    expect(a.llm!.totals).toMatchObject({ calls: 5, billableCalls: 4, turns: 2, inputTokens: 4900, outputTokens: 180, costUsd: 0.00385, callsWithoutCost: 2, errors: { upstream_timeout: 1 } });
    expect(a.llm!.priceTables).toEqual(['test-1']);
  });

  it('says a model\'s cost is unknown (null) when none of its calls has a price', async () => {
    const r = new Run().start();
    r.call({ modelAnswered: 'mystery-1', costUsd: null });
    r.end();
    expect((await r.analyze()).llm!.models[0]).toMatchObject({ model: 'mystery-1', costUsd: null, callsWithoutCost: 1 });
  });

  it('has no llm part for a run without a gateway and without calls (the driver stays the declared one)', async () => {
    const r = new Run().start({ driver: 'gpt-5', gateway: false });
    r.submit(20);
    r.end();
    expect(await r.analyze()).toMatchObject({ llm: null, driver: 'gpt-5', declaredDriver: 'gpt-5', driverMismatch: false, failure: { class: 'success' } });
  });

  it('takes the nearest-rank median', () => {
    expect([p50([]), p50([5]), p50([3, 1]), p50([1, 2, 3]), p50([4, 1, 3, 2])]).toEqual([null, 5, 1, 2, 2]);
  });

  it('is deterministic', async () => {
    const build = () => {
      const r = new Run().start({ driver: 'x' });
      r.call();
      r.failed();
      r.end();
      return r.analyze();
    };
    expect(canonicalJson(await build())).toBe(canonicalJson(await build()));
  });
});

describe('driver attribution', () => {
  it('the driver is the model the agent used most; the declared one is kept and a different one flagged', async () => {
    const r = new Run().start({ driver: 'gpt-5' });
    r.call();
    r.call({ modelRequested: 'claude-haiku-4-5', modelAnswered: 'claude-haiku-4-5', toolCalls: [] });
    r.call({ modelRequested: 'claude-haiku-4-5', modelAnswered: 'claude-haiku-4-5', toolCalls: [] });
    r.end();
    // Two side calls of haiku, one turn of sonnet: the tool loop's model drives.
    expect(await r.analyze()).toMatchObject({ driver: 'claude-sonnet-4-5-20250929', declaredDriver: 'gpt-5', driverMismatch: true });
  });

  it('breaks ties by billable calls, then output tokens, then name', async () => {
    const r = new Run().start();
    r.call({ modelAnswered: 'model-b', usage: { inputTokens: 1, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 } });
    r.call({ modelAnswered: 'model-a', usage: { inputTokens: 1, outputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0 } });
    r.call({ modelAnswered: 'model-c', usage: { inputTokens: 1, outputTokens: 11, cacheReadTokens: 0, cacheWriteTokens: 0 } });
    r.end();
    expect((await r.analyze()).llm!.models.map((m) => m.model)).toEqual(['model-c', 'model-a', 'model-b']);
  });

  it('a declared name that the used model extends with a version is no mismatch', async () => {
    const r = new Run().start({ driver: 'Claude-Sonnet-4-5' });
    r.call();
    r.end();
    expect(await r.analyze()).toMatchObject({ driver: 'claude-sonnet-4-5-20250929', declaredDriver: 'Claude-Sonnet-4-5', driverMismatch: false });
    expect(sameModel('claude-sonnet-4-5', 'claude-sonnet-4-5-20250929')).toBe(true);
    expect(sameModel('anthropic/claude-sonnet-4-5', 'claude-sonnet-4-5')).toBe(true);
    expect(sameModel('gpt-4', 'gpt-4o')).toBe(false);
    expect(sameModel('claude-sonnet-4-5-20250929', 'claude-sonnet-4-5')).toBe(false);
  });

  it('without --driver the used model is the driver, and nothing is flagged', async () => {
    const r = new Run().start();
    r.call({ provider: 'openai', api: 'responses', modelRequested: 'gpt-5-codex', modelAnswered: 'gpt-5-codex' });
    r.end();
    expect(await r.analyze()).toMatchObject({ driver: 'gpt-5-codex', declaredDriver: null, driverMismatch: false });
  });

  it('a name the agent only asked for never decides the driver: the model the upstream answered as does', async () => {
    // The agent asks for gpt-x-pro five times (refused or failed: no answer names a model) and once for
    // gpt-x, which the upstream answers as claude-y. Requested names alone would file the run under gpt-x-pro.
    const r = new Run().start({ driver: 'gpt-x' });
    for (let i = 0; i < 5; i++) r.failed({ modelRequested: 'gpt-x-pro', outcome: 'refused', status: 401 });
    r.call({ modelRequested: 'gpt-x', modelAnswered: 'claude-y', toolCalls: [] });
    r.end();
    const a = await r.analyze();
    expect(a.llm!.models.map((m) => [m.model, m.billableCalls])).toEqual([
      ['gpt-x-pro', 5],
      ['claude-y', 1],
    ]);
    expect(a).toMatchObject({ driver: 'claude-y', declaredDriver: 'gpt-x', driverMismatch: true });
  });

  it('answered names that differ only in case or a provider/ prefix count as one model for the driver', async () => {
    const r = new Run().start();
    r.call({ modelRequested: 'm', modelAnswered: 'vendor/model-b' });
    r.call({ modelRequested: 'm', modelAnswered: 'model-b' });
    r.call({ modelRequested: 'a', modelAnswered: 'model-a' });
    r.call({ modelRequested: 'a', modelAnswered: 'model-a', usage: { inputTokens: 1, outputTokens: 99, cacheReadTokens: 0, cacheWriteTokens: 0 } });
    r.call({ modelRequested: 'c', modelAnswered: 'model-b' });
    r.end();
    // model-a has 2 turns; model-b 2 under its own name and 1 as vendor/model-b: 3.
    expect(await r.analyze()).toMatchObject({ driver: 'model-b' });
  });

  it('only failed calls leave the declared driver; only token counts name none', async () => {
    const failed = new Run().start({ driver: 'claude-sonnet-4-5' });
    failed.failed();
    failed.end('timeout');
    expect(await failed.analyze()).toMatchObject({ driver: 'claude-sonnet-4-5', driverMismatch: false });
    const counted = new Run().start({ driver: 'declared-model' });
    counted.call({ api: 'count_tokens', toolCalls: [] });
    counted.end();
    expect(await counted.analyze()).toMatchObject({ driver: 'declared-model', driverMismatch: false });
  });
});

describe('failure taxonomy: infrastructure classes', () => {
  it('infra_model_unreachable: an LLM-driven agent that never called its model (not timeout_no_submission)', async () => {
    const r = new Run().start();
    const exit = r.end('timeout');
    expect((await r.analyze()).failure).toEqual({ class: 'infra_model_unreachable', rule: 'model_never_called', evidence: [3, exit] });
  });

  it('infra_model_unreachable: every call hung (gateway closed or upstream timeout)', async () => {
    const r = new Run().start();
    const a = r.failed();
    const b = r.failed({ outcome: 'gateway_closed', status: 502 });
    const exit = r.end('timeout');
    expect((await r.analyze()).failure).toEqual({ class: 'infra_model_unreachable', rule: 'model_calls_hung', evidence: [3, a, b, exit] });
  });

  it('infra_model_unreachable: upstream errors, not the agent\'s code_error_runtime or crash', async () => {
    const r = new Run().start();
    r.failed({ outcome: 'upstream_error', status: 500 });
    r.failed({ outcome: 'upstream_unreachable', status: 502 });
    r.stderr('Traceback (most recent call last):\n  File "code/train.py", line 3, in <module>\nKeyError: 1\n');
    r.end('crashed', 1);
    expect((await r.analyze()).failure).toMatchObject({ class: 'infra_model_unreachable', rule: 'model_calls_failed' });
  });

  it('one answered call is enough: then the agent\'s own classes apply', async () => {
    const r = new Run().start();
    r.call();
    r.failed();
    r.end('timeout');
    expect((await r.analyze()).failure.class).toBe('timeout_no_submission');
  });

  it('a live run is not judged unreachable before its agent exits', async () => {
    const r = new Run().start();
    r.failed();
    expect((await r.analyze()).failure).toMatchObject({ class: 'no_improvement', rule: 'run_in_progress' });
  });

  it('infra_llm_limit: the operator\'s token or cost limit refused a call and the run did not improve', async () => {
    const r = new Run().start();
    r.call();
    const refused = r.call({ outcome: 'limit_exceeded', status: 429, toolCalls: [], costUsd: null });
    const reached = r.add('LimitReached', { limit: 'llmTokens', value: 5000, max: 4000, action: 'refused the call', observedAt: '2026-01-01T00:00:07.000Z' });
    r.submit(5);
    r.end();
    expect((await r.analyze()).failure).toEqual({ class: 'infra_llm_limit', rule: 'llm_limit_exceeded', evidence: [refused, reached] });
  });

  it('infra_setup: the run failed while it was being set up', async () => {
    const r = new Run().start();
    const seq = r.add('RunInterrupted', { reason: 'setup failed before the agent started: claude not found in the sandbox' });
    expect((await r.analyze()).failure).toEqual({ class: 'infra_setup', rule: 'setup_failed', evidence: [seq] });
  });

  it('infra_setup: the agent\'s CLI is missing (exit 127, or "command not found" then a quick exit)', async () => {
    const r127 = new Run().start();
    const exit = r127.end('crashed', 127);
    expect((await r127.analyze()).failure).toEqual({ class: 'infra_setup', rule: 'agent_command_not_found', evidence: [3, exit] });
    const dash = new Run().start({ gateway: false });
    const out = dash.stderr('/agent/start.sh: 4: exec: codex: not found\n');
    dash.end('crashed', 2);
    expect((await dash.analyze()).failure).toMatchObject({ class: 'infra_setup', evidence: [3, out, out + 1] });
    const bash = new Run().start();
    bash.stderr('start.sh: line 3: claude: command not found\n');
    bash.end('crashed', 1);
    expect((await bash.analyze()).failure.class).toBe('infra_setup');
  });

  it('not infra_setup: an agent that called its model first, or ran past the first minute', async () => {
    const called = new Run().start();
    called.call();
    called.end('crashed', 127);
    expect((await called.analyze()).failure.class).toBe('agent_crash');
    const late = new Run().start({ gateway: false });
    late.end('crashed', 127, 120);
    expect((await late.analyze()).failure.class).toBe('agent_crash');
  });

  it('success wins over every infrastructure class', async () => {
    const limited = new Run().start();
    limited.call();
    limited.submit(40);
    limited.call({ outcome: 'limit_exceeded', status: 429, toolCalls: [] });
    limited.end();
    expect((await limited.analyze()).failure.class).toBe('success');
    const unreachable = new Run().start(); // a scripted submission, the model never answered
    unreachable.failed();
    unreachable.submit(40);
    unreachable.end();
    expect((await unreachable.analyze()).failure.class).toBe('success');
  });
});
