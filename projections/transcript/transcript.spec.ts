import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent, EventData, EventType } from '../../modules/ledger/events/catalog.js';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { failedCall, llmCall } from './testing/llm-call.js';
import { buildTranscript, callRole, TranscriptBuilder } from './transcript.js';
import { at } from '../../test/testing/helpers.js';


function events(specs: Array<[EventType, EventData<EventType>]>): A2rlEvent[] {
  return specs.map(([type, data], seq) => buildEvent(type, 'tr-1', seq, at(seq), data));
}

/** A Claude Code-like session: a quota check on the side, three turns (two bash calls, then the answer), a token count, a failed retry. */
function session(): A2rlEvent[] {
  return events([
    ['RunScheduled', { task: 'ref-arith', agent: 'claude-code', driver: 'claude-sonnet-4-5', baseModel: 'b', budgetSeconds: 60, seed: 0, mode: 'free' }],
    ['AgentStarted', { command: 'start.sh', gateway: { providers: ['anthropic'], url: 'http://127.0.0.1:5001' } }],
    ['LlmCallRecorded', llmCall({ callId: 'c0', modelRequested: 'claude-haiku-4-5', modelAnswered: 'claude-haiku-4-5', userText: 'quota', toolCalls: [], outputText: 'ok', stopReason: 'end_turn', costUsd: null })],
    ['LlmCallRecorded', llmCall({ callId: 'c1', userText: 'Train a model', toolCalls: [{ id: 't1', name: 'Bash', input: '{"command":"python3 code/train.py"}' }] })],
    ['ProcessStarted', { pid: 5, ppid: 1, argv: ['python3', 'code/train.py'], cwd: '/ws', observedAt: at(3) }],
    ['LlmCallRecorded', failedCall({ callId: 'c2', messages: 3, toolResults: [{ id: 't1', output: 'loss 0.1' }] })],
    ['LlmCallRecorded', llmCall({ callId: 'c3', messages: 3, toolResults: [{ id: 't1', output: 'loss 0.1' }], toolCalls: [{ id: 't2', name: 'Bash', input: '{"command":"curl …/submit"}' }] })],
    ['LlmCallRecorded', llmCall({ callId: 'c4', api: 'count_tokens', toolCalls: [], usage: { inputTokens: 900, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null }, costUsd: 0 })],
    ['LlmCallRecorded', llmCall({ callId: 'c5', messages: 5, toolResults: [{ id: 't2', output: '{"score": 55}', isError: false }], toolCalls: [], outputText: 'Done: submitted.', stopReason: 'end_turn' })],
    ['AgentExited', { reason: 'completed', exitCode: 0 }],
  ]);
}

describe('buildTranscript', () => {
  it('lists every call in seq order, numbering only the turns of the tool loop', () => {
    const t = buildTranscript(session());
    expect(t.entries.map((e) => [e.seq, e.callId, e.role, e.turn])).toEqual([
      [2, 'c0', 'side', null],
      [3, 'c1', 'turn', 1],
      [5, 'c2', 'failed', null],
      [6, 'c3', 'turn', 2],
      [7, 'c4', 'side', null],
      [8, 'c5', 'turn', 3],
    ]);
    expect(t.runId).toBe('tr-1');
    expect(t.lastSeq).toBe(8);
  });

  it('keeps what each request added and what each answer said, with tokens, status and latency', () => {
    const [, first, failed, second, , last] = buildTranscript(session()).entries;
    expect(first).toMatchObject({
      model: 'claude-sonnet-4-5-20250929',
      modelRequested: 'claude-sonnet-4-5',
      request: { messages: 1, userText: 'Train a model', toolResults: [] },
      answer: { text: null, stopReason: 'tool_use', toolCalls: [{ id: 't1', name: 'Bash', input: '{"command":"python3 code/train.py"}' }] },
      usage: { inputTokens: 1000, outputTokens: 50 },
      status: 200,
      outcome: 'ok',
      latencyMs: 1200,
      ttftMs: 300,
    });
    expect(failed).toMatchObject({ model: 'claude-sonnet-4-5', outcome: 'upstream_timeout', status: 504, error: 'upstream did not answer', costUsd: null });
    expect(second.request.toolResults).toEqual([{ id: 't1', output: 'loss 0.1' }]);
    expect(last.answer).toEqual({ text: 'Done: submitted.', toolCalls: [], stopReason: 'end_turn' });
  });

  it('totals tokens and cost: the sum of known costs, with the calls whose cost is unknown counted', () => {
    expect(buildTranscript(session()).totals).toEqual({
      calls: 6,
      turns: 3,
      sideCalls: 2,
      failedCalls: 1,
      toolCalls: 2,
      toolResults: 3, // the failed retry sent the first result again
      inputTokens: 4900,
      outputTokens: 200,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd: 0.01125, // three turns at 0.00375; the token count is free; quota check and failed call unknown
      callsWithoutCost: 2,
      outcomes: { ok: 5, upstream_timeout: 1 },
    });
    const unpriced = buildTranscript(events([['LlmCallRecorded', llmCall({ costUsd: null })]]));
    expect(unpriced.totals).toMatchObject({ costUsd: null, callsWithoutCost: 1 });
    expect(buildTranscript([]).totals).toMatchObject({ calls: 0, costUsd: 0, callsWithoutCost: 0 });
  });

  it('is deterministic and independent of input order; the incremental fold gives the same transcript', () => {
    const ordered = session();
    const shuffled = [...ordered].reverse();
    expect(canonicalJson(buildTranscript(shuffled))).toBe(canonicalJson(buildTranscript(ordered)));
    const builder = new TranscriptBuilder();
    const added = ordered.map((e) => builder.add(e)?.callId ?? null).filter((id) => id !== null);
    expect(added).toEqual(['c0', 'c1', 'c2', 'c3', 'c4', 'c5']);
    expect(builder.add(ordered[3])).toBeNull(); // a seq already folded in
    expect(canonicalJson(builder.result())).toBe(canonicalJson(buildTranscript(ordered)));
  });

  it('roles: failed whatever the call was, side for token counts and text-only exchanges', () => {
    expect(callRole(llmCall({ outcome: 'limit_exceeded' }))).toBe('failed');
    expect(callRole(llmCall({ api: 'countTokens' }))).toBe('side');
    expect(callRole(llmCall({ toolCalls: [], toolResults: [] }))).toBe('side');
    expect(callRole(llmCall({ toolCalls: [], toolResults: [{ output: 'x' }] }))).toBe('turn');
  });
});
