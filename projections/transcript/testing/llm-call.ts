// LlmCallRecorded payloads for specs: a complete, valid call with neutral defaults (an answered
// Claude turn asking for one bash call); override what a test is about.
import { createHash } from 'node:crypto';
import type { EventData } from '../../../modules/ledger/events/catalog.js';

type Call = EventData<'LlmCallRecorded'>;

const blob = (text: string) => {
  const sha256 = createHash('sha256').update(text).digest('hex');
  return { sha256, size: text.length, key: `sha256/${sha256.slice(0, 2)}/${sha256}` };
};

export function llmCall(overrides: Partial<Call> = {}): Call {
  const callId = overrides.callId ?? 'call-1';
  return {
    callId,
    provider: 'anthropic',
    api: 'messages',
    modelRequested: 'claude-sonnet-4-5',
    modelAnswered: 'claude-sonnet-4-5-20250929',
    stream: true,
    status: 200,
    outcome: 'ok',
    stopReason: 'tool_use',
    usage: { inputTokens: 1000, outputTokens: 50, cacheReadTokens: 0, cacheWriteTokens: 0 },
    costUsd: 0.00375,
    priceTable: 'test-1',
    latencyMs: 1200,
    ttftMs: 300,
    messages: 1,
    toolResults: [],
    outputText: null,
    toolCalls: [{ id: `tu-${callId}`, name: 'Bash', input: '{"command":"ls"}' }],
    request: blob(`request ${callId}`),
    response: blob(`response ${callId}`),
    startedAt: '2026-01-01T00:00:01.000Z',
    observedAt: '2026-01-01T00:00:02.200Z',
    ...overrides,
  };
}

/** A call that never got an answer (the upstream hung until the gateway gave up). */
export function failedCall(overrides: Partial<Call> = {}): Call {
  const { response: _none, ...call } = llmCall({
    modelAnswered: null,
    status: 504,
    outcome: 'upstream_timeout',
    error: 'upstream did not answer',
    stopReason: null,
    usage: { inputTokens: null, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null },
    costUsd: null,
    ttftMs: null,
    toolCalls: [],
    ...overrides,
  });
  return overrides.response ? { ...call, response: overrides.response } : call;
}
