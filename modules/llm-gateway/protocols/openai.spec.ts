import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startFakeOpenAI } from '../../../test/servers/fake-llm/fake-openai.js';
import type { FakeLlmServer } from '../../../test/servers/fake-llm/types.js';
import type { ApiRoute } from '../protocol.js';
import { openaiCodec as codec } from './openai.js';

const CHAT: ApiRoute = { api: 'chat.completions', billable: true };
const RESPONSES: ApiRoute = { api: 'responses', billable: true };

/** A server-sent event stream as OpenAI writes it: one `data:` line per event (Responses also names it). */
function stream(events: unknown[], named = false): string {
  return events
    .map((e) => `${named ? `event: ${(e as { type: string }).type}\n` : ''}data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`)
    .join('');
}

describe('openaiCodec routes', () => {
  it('serves chat completions, responses and the model listing', () => {
    expect(codec.route('POST', '/v1/chat/completions')).toEqual({ api: 'chat.completions', billable: true });
    expect(codec.route('POST', '/v1/responses')).toEqual({ api: 'responses', billable: true });
    expect(codec.route('GET', '/v1/models')).toEqual({ api: 'models', billable: false });
    expect(codec.route('GET', '/v1/models/gpt-5.1-codex')).toEqual({ api: 'models', model: 'gpt-5.1-codex', billable: false });
  });

  it('refuses other methods and paths', () => {
    expect(codec.route('GET', '/v1/chat/completions')).toBeNull();
    expect(codec.route('POST', '/v1/completions')).toBeNull();
    expect(codec.route('POST', '/chat/completions')).toBeNull();
    expect(codec.route('POST', '/v1/responses/resp_1/cancel')).toBeNull();
    expect(codec.route('DELETE', '/v1/models/ft:x')).toBeNull();
  });

  it('drops the leading /v1 for the upstream, whose base URL ends in /v1', () => {
    expect(codec.upstreamPath('/v1/chat/completions')).toBe('/chat/completions');
    expect(codec.upstreamPath('/v1/responses')).toBe('/responses');
    expect(codec.upstreamPath('/v1/models')).toBe('/models');
    expect(codec.upstreamPath('/v10/models')).toBe('/v10/models');
    expect(codec.defaultUpstream).toBe('https://api.openai.com/v1');
  });
});

describe('openaiCodec credentials', () => {
  it('reads the bearer token', () => {
    expect(codec.credential({ authorization: 'Bearer gw-token-1' }, new URLSearchParams())).toBe('gw-token-1');
    expect(codec.credential({ authorization: 'bearer gw-token-2' }, new URLSearchParams())).toBe('gw-token-2');
    expect(codec.credential({ authorization: 'Basic abc' }, new URLSearchParams())).toBeUndefined();
    expect(codec.credential({ 'x-api-key': 'k' }, new URLSearchParams())).toBeUndefined();
    expect(codec.credential({}, new URLSearchParams('key=k'))).toBeUndefined();
  });

  it('replaces the agent credential with the harness key', () => {
    const headers: Record<string, string> = { Authorization: 'Bearer gw-token', 'api-key': 'gw-token', 'content-type': 'application/json' };
    const query = new URLSearchParams('x=1');
    codec.authorize(headers, query, 'sk-upstream');
    expect(headers).toEqual({ authorization: 'Bearer sk-upstream', 'content-type': 'application/json' });
    expect(query.toString()).toBe('x=1');
  });
});

describe('openaiCodec chat completions requests', () => {
  it('a new prompt: model, stream, message count and the user text', () => {
    const facts = codec.requestFacts(CHAT, {
      model: 'gpt-4.1',
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: 'system', content: 'You are OpenCode.' },
        { role: 'user', content: [{ type: 'text', text: 'Train the model.' }, { type: 'image_url', image_url: { url: 'data:,' } }] },
      ],
    });
    expect(facts).toEqual({ maxOutputTokens: null, model: 'gpt-4.1', stream: true, messages: 2, userText: 'Train the model.', toolResults: [] });
  });

  it('the trailing tool messages answer the calls of the assistant message before them', () => {
    const facts = codec.requestFacts(CHAT, {
      model: 'gpt-4.1',
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_old', type: 'function', function: { name: 'read', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'call_old', content: 'old' },
        {
          role: 'assistant',
          content: '',
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } },
            { id: 'call_b', type: 'function', function: { name: 'read', arguments: '{"filePath":"x"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', content: 'train.py\n' },
        { role: 'tool', tool_call_id: 'call_b', content: [{ type: 'text', text: 'line 1' }] },
      ],
    });
    expect(facts.stream).toBe(false);
    expect(facts.messages).toBe(6);
    expect(facts.userText).toBeUndefined();
    expect(facts.toolResults).toEqual([
      { id: 'call_a', name: 'bash', output: 'train.py\n' },
      { id: 'call_b', name: 'read', output: 'line 1' },
    ]);
  });

  it('a request ending with the assistant has neither', () => {
    const facts = codec.requestFacts(CHAT, { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }] });
    expect(facts).toEqual({ maxOutputTokens: null, model: null, stream: false, messages: 2, toolResults: [] });
  });

  it('a body that is not an object', () => {
    expect(codec.requestFacts(CHAT, undefined)).toEqual({ maxOutputTokens: null, model: null, stream: false, messages: 0, toolResults: [] });
  });
});

describe('openaiCodec responses requests', () => {
  it('a string input is one user message', () => {
    expect(codec.requestFacts(RESPONSES, { model: 'gpt-5', input: 'Say hi', stream: false })).toEqual({ maxOutputTokens: null,
      model: 'gpt-5',
      stream: false,
      messages: 1,
      userText: 'Say hi',
      toolResults: [],
    });
  });

  it("Codex's first request: developer and user messages, the prompt last", () => {
    const facts = codec.requestFacts(RESPONSES, {
      model: 'gpt-5.1-codex',
      stream: true,
      input: [
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex.' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: '<environment_context>…</environment_context>' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Train the model.' }] },
      ],
    });
    expect(facts).toEqual({ maxOutputTokens: null, model: 'gpt-5.1-codex', stream: true, messages: 3, userText: 'Train the model.', toolResults: [] });
  });

  it('an easy input message (no type) counts as the user text', () => {
    expect(codec.requestFacts(RESPONSES, { input: [{ role: 'user', content: 'plain' }] }).userText).toBe('plain');
  });

  it("the last turn's call outputs, by call_id, with the calls' names", () => {
    const facts = codec.requestFacts(RESPONSES, {
      model: 'gpt-5.1-codex',
      input: [
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'go' }] },
        { type: 'function_call', name: 'exec_command', arguments: '{"cmd":"true"}', call_id: 'call_0' },
        { type: 'function_call_output', call_id: 'call_0', output: 'old' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Next.' }] },
        { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'xyz' },
        { type: 'function_call', id: 'fc_1', name: 'exec_command', arguments: '{"cmd":"python3 train.py"}', call_id: 'call_1' },
        { type: 'function_call_output', call_id: 'call_1', output: 'Process exited with code 0\nOutput:\nloss 0.1\n' },
        { type: 'custom_tool_call', id: 'ctc_2', name: 'apply_patch', input: '*** Begin Patch', call_id: 'call_2' },
        { type: 'custom_tool_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'Success.' }] },
      ],
    });
    expect(facts.messages).toBe(9);
    expect(facts.userText).toBeUndefined();
    expect(facts.toolResults).toEqual([
      { id: 'call_1', name: 'exec_command', output: 'Process exited with code 0\nOutput:\nloss 0.1\n' },
      { id: 'call_2', name: 'apply_patch', output: 'Success.' },
    ]);
  });
});

describe('openaiCodec chat completions answers', () => {
  it('a JSON completion with a tool call and cached input', () => {
    const body = JSON.stringify({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1700000000,
      model: 'gpt-4.1-2025-04-14',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'Running it.', tool_calls: [{ id: 'call_x', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } }] },
          finish_reason: 'tool_calls',
        },
      ],
      usage: { prompt_tokens: 1500, completion_tokens: 40, total_tokens: 1540, prompt_tokens_details: { cached_tokens: 1024 } },
    });
    expect(codec.responseFacts(CHAT, 200, body, false)).toEqual({ usageFinal: true,
      model: 'gpt-4.1-2025-04-14',
      usage: { inputTokens: 476, outputTokens: 40, cacheReadTokens: 1024, cacheWriteTokens: null },
      stopReason: 'tool_calls',
      text: 'Running it.',
      toolCalls: [{ id: 'call_x', name: 'bash', input: '{"command":"ls"}' }],
    });
  });

  it('a stream: text deltas, tool calls assembled by index, the finish reason and the usage chunk', () => {
    const base = { id: 'chatcmpl-2', object: 'chat.completion.chunk', created: 1700000000, model: 'gpt-4o-mini-2024-07-18' };
    const chunk = (delta: unknown, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage: null });
    const body = stream([
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'Two ' }),
      chunk({ content: 'calls.' }),
      chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'bash', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"command":' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'read', arguments: '{"filePath"' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"ls"}' } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: ':"a.py"}' } }] }),
      chunk({}, 'tool_calls'),
      { ...base, choices: [], usage: { prompt_tokens: 900, completion_tokens: 33, total_tokens: 933, prompt_tokens_details: { cached_tokens: 0 } } },
      '[DONE]',
    ]);
    expect(codec.responseFacts(CHAT, 200, body, true)).toEqual({ usageFinal: true,
      model: 'gpt-4o-mini-2024-07-18',
      usage: { inputTokens: 900, outputTokens: 33, cacheReadTokens: 0, cacheWriteTokens: null },
      stopReason: 'tool_calls',
      text: 'Two calls.',
      toolCalls: [
        { id: 'call_a', name: 'bash', input: '{"command":"ls"}' },
        { id: 'call_b', name: 'read', input: '{"filePath":"a.py"}' },
      ],
    });
  });

  it('a stream without include_usage has no usage', () => {
    const body = stream([
      { id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: null }] },
      { id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'length' }] },
      '[DONE]',
    ]);
    const facts = codec.responseFacts(CHAT, 200, body, true);
    expect(facts.usage).toEqual({ inputTokens: null, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null });
    expect(facts.stopReason).toBe('length');
    expect(facts.text).toBe('hi');
    expect(facts.toolCalls).toEqual([]);
  });

  it('an error answer, and an error chunk in the middle of a stream', () => {
    const body = JSON.stringify({ error: { message: 'Incorrect API key provided.', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } });
    expect(codec.responseFacts(CHAT, 401, body, false).error).toBe('Incorrect API key provided.');
    const midway = stream([{ id: 'c', model: 'm', choices: [{ index: 0, delta: { content: 'par' } }] }, { error: { message: 'overloaded', type: 'server_error' } }]);
    expect(codec.responseFacts(CHAT, 200, midway, true).error).toBe('overloaded');
    expect(codec.responseFacts(CHAT, 502, '<html>bad gateway</html>', false).error).toBe('HTTP 502');
    expect(codec.responseFacts(CHAT, 200, '', false).error).toBeUndefined();
  });

  it('the model listing has no facts', () => {
    const facts = codec.responseFacts({ api: 'models', billable: false }, 200, '{"object":"list","data":[{"id":"gpt-5"}]}', false);
    expect(facts.model).toBeNull();
    expect(facts.usage.inputTokens).toBeNull();
  });
});

describe('openaiCodec responses answers', () => {
  const completed = {
    id: 'resp_1',
    object: 'response',
    status: 'completed',
    error: null,
    incomplete_details: null,
    model: 'gpt-5.1-codex-2025-11-13',
    output: [
      { id: 'rs_1', type: 'reasoning', summary: [] },
      { id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'I will run it.', annotations: [] }] },
      { id: 'fc_1', type: 'function_call', status: 'completed', name: 'exec_command', arguments: '{"cmd":"python3 train.py"}', call_id: 'call_1' },
    ],
    usage: { input_tokens: 5000, input_tokens_details: { cached_tokens: 4096 }, output_tokens: 120, output_tokens_details: { reasoning_tokens: 64 }, total_tokens: 5120 },
  };

  it('a JSON response: output text and calls, usage with cached input, status', () => {
    expect(codec.responseFacts(RESPONSES, 200, JSON.stringify(completed), false)).toEqual({ usageFinal: true,
      model: 'gpt-5.1-codex-2025-11-13',
      usage: { inputTokens: 904, outputTokens: 120, cacheReadTokens: 4096, cacheWriteTokens: null },
      stopReason: 'completed',
      text: 'I will run it.',
      toolCalls: [{ id: 'call_1', name: 'exec_command', input: '{"cmd":"python3 train.py"}' }],
    });
  });

  it('a stream of typed events, each named on its event: line', () => {
    const inProgress = { ...completed, status: 'in_progress', output: [], usage: null };
    const body = stream(
      [
        { type: 'response.created', sequence_number: 0, response: inProgress },
        { type: 'response.in_progress', sequence_number: 1, response: inProgress },
        { type: 'response.output_item.added', sequence_number: 2, output_index: 0, item: { id: 'msg_1', type: 'message', status: 'in_progress', role: 'assistant', content: [] } },
        { type: 'response.output_text.delta', sequence_number: 3, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'I will ' },
        { type: 'response.output_text.delta', sequence_number: 4, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'run it.' },
        { type: 'response.output_text.done', sequence_number: 5, item_id: 'msg_1', output_index: 0, content_index: 0, text: 'I will run it.' },
        { type: 'response.output_item.done', sequence_number: 6, output_index: 0, item: completed.output[1] },
        { type: 'response.output_item.added', sequence_number: 7, output_index: 1, item: { ...completed.output[2], arguments: '', status: 'in_progress' } },
        { type: 'response.function_call_arguments.delta', sequence_number: 8, item_id: 'fc_1', output_index: 1, delta: '{"cmd":"python3 train.py"}' },
        { type: 'response.function_call_arguments.done', sequence_number: 9, item_id: 'fc_1', output_index: 1, arguments: '{"cmd":"python3 train.py"}' },
        { type: 'response.output_item.done', sequence_number: 10, output_index: 1, item: completed.output[2] },
        { type: 'response.completed', sequence_number: 11, response: completed },
      ],
      true,
    );
    expect(codec.responseFacts(RESPONSES, 200, body, true)).toEqual({ usageFinal: true,
      model: 'gpt-5.1-codex-2025-11-13',
      usage: { inputTokens: 904, outputTokens: 120, cacheReadTokens: 4096, cacheWriteTokens: null },
      stopReason: 'completed',
      text: 'I will run it.',
      toolCalls: [{ id: 'call_1', name: 'exec_command', input: '{"cmd":"python3 train.py"}' }],
    });
  });

  it('a stream that sends only the final response still gives its text and calls', () => {
    const facts = codec.responseFacts(RESPONSES, 200, stream([{ type: 'response.completed', response: completed }], true), true);
    expect(facts.text).toBe('I will run it.');
    expect(facts.toolCalls.map((c) => c.name)).toEqual(['exec_command']);
  });

  it('an incomplete response reports its reason', () => {
    const incomplete = { ...completed, status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output: [] };
    const facts = codec.responseFacts(RESPONSES, 200, stream([{ type: 'response.incomplete', response: incomplete }], true), true);
    expect(facts.stopReason).toBe('max_output_tokens');
    expect(facts.usage.outputTokens).toBe(120);
  });

  it('a failed response and an error event report the error', () => {
    const failed = { ...completed, status: 'failed', error: { code: 'server_error', message: 'The model crashed.' }, output: [], usage: null };
    const facts = codec.responseFacts(RESPONSES, 200, stream([{ type: 'response.failed', response: failed }], true), true);
    expect(facts.stopReason).toBe('failed');
    expect(facts.error).toBe('The model crashed.');
    expect(facts.usage.inputTokens).toBeNull();
    const event = stream([{ type: 'error', code: 'rate_limit_exceeded', message: 'Slow down.', param: null, sequence_number: 1 }], true);
    expect(codec.responseFacts(RESPONSES, 200, event, true).error).toBe('Slow down.');
  });

  it('custom tool and local shell calls count as tool calls', () => {
    const items = [
      { type: 'custom_tool_call', id: 'ctc', call_id: 'call_p', name: 'apply_patch', input: '*** Begin Patch' },
      { type: 'local_shell_call', id: 'lsc', call_id: 'call_s', status: 'completed', action: { type: 'exec', command: ['ls'] } },
    ];
    const body = stream(items.map((item, i) => ({ type: 'response.output_item.done', output_index: i, item })), true);
    expect(codec.responseFacts(RESPONSES, 200, body, true).toolCalls).toEqual([
      { id: 'call_p', name: 'apply_patch', input: '*** Begin Patch' },
      { id: 'call_s', name: 'local_shell', input: '{"type":"exec","command":["ls"]}' },
    ]);
  });
});

describe('openaiCodec error bodies', () => {
  it("answers in OpenAI's error shape", () => {
    expect(codec.errorBody('auth', 401, 'Invalid gateway token.')).toEqual({ error: { message: 'Invalid gateway token.', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } });
    expect(codec.errorBody('limit', 429, 'Token limit reached.')).toEqual({ error: { message: 'Token limit reached.', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } });
    expect(codec.errorBody('upstream', 502, 'Upstream failed.')).toEqual({ error: { message: 'Upstream failed.', type: 'server_error', param: null, code: null } });
    expect(codec.errorBody('timeout', 504, 'Upstream timed out.')).toMatchObject({ error: { type: 'server_error', code: 'timeout' } });
  });

  it('the error bodies read back as errors', () => {
    const body = JSON.stringify(codec.errorBody('limit', 429, 'Token limit reached.'));
    expect(codec.responseFacts(CHAT, 429, body, false).error).toBe('Token limit reached.');
  });
});

/** The fake upstream the CLI specs use answers what the codec reads: both APIs, JSON and streams. */
describe('openaiCodec on the fake upstream', () => {
  let fake: FakeLlmServer;
  beforeAll(async () => {
    fake = await startFakeOpenAI({ script: ['echo one'], finalText: 'All done.', expectKey: 'sk-fake', model: 'gpt-fake-1' });
  });
  afterAll(() => fake.close());

  async function post(path: string, body: unknown): Promise<{ status: number; text: string }> {
    const res = await fetch(`${fake.url}${path}`, { method: 'POST', headers: { authorization: 'Bearer sk-fake', 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, text: await res.text() };
  }

  const bash = { type: 'function', function: { name: 'bash', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } } };
  const exec = { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: { cmd: { type: 'string' }, yield_time_ms: { type: 'number' } }, required: ['cmd'] } };

  it('chat: a streamed tool call with its usage chunk, then the final text as JSON', async () => {
    const first = await post('/v1/chat/completions', { model: 'm', stream: true, stream_options: { include_usage: true }, tools: [bash], messages: [{ role: 'user', content: 'go' }] });
    const called = codec.responseFacts(CHAT, first.status, first.text, true);
    expect(first.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(called.toolCalls).toEqual([{ id: 'call_fake0', name: 'bash', input: '{"command":"echo one"}' }]);
    expect(called.stopReason).toBe('tool_calls');
    expect(called.model).toBe('gpt-fake-1');
    expect(called.usage).toEqual({ inputTokens: 1000, outputTokens: 50, cacheReadTokens: 0, cacheWriteTokens: null });
    const messages = [{ role: 'user', content: 'go' }, { role: 'assistant', tool_calls: [{ id: 'call_fake0', type: 'function', function: { name: 'bash', arguments: '{}' } }] }, { role: 'tool', tool_call_id: 'call_fake0', content: 'one' }];
    const last = await post('/v1/chat/completions', { model: 'm', tools: [bash], messages });
    expect(codec.responseFacts(CHAT, last.status, last.text, false)).toMatchObject({ text: 'All done.', stopReason: 'stop', toolCalls: [], usage: { inputTokens: 1100, outputTokens: 51 } });
  });

  it('responses: a streamed exec_command call, then the final text', async () => {
    const first = await post('/v1/responses', { model: 'm', stream: true, tools: [exec], input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'go' }] }] });
    expect(first.text.startsWith('event: response.created\ndata: ')).toBe(true);
    const called = codec.responseFacts(RESPONSES, first.status, first.text, true);
    expect(called.toolCalls).toEqual([{ id: 'call_fake0', name: 'exec_command', input: '{"cmd":"echo one","yield_time_ms":30000}' }]);
    expect(called.usage).toEqual({ inputTokens: 1200, outputTokens: 52, cacheReadTokens: 0, cacheWriteTokens: null });
    const input = [{ type: 'function_call', call_id: 'call_fake0', name: 'exec_command', arguments: '{}' }, { type: 'function_call_output', call_id: 'call_fake0', output: 'one' }];
    const last = await post('/v1/responses', { model: 'm', stream: true, tools: [exec], input });
    expect(codec.responseFacts(RESPONSES, last.status, last.text, true)).toMatchObject({ text: 'All done.', stopReason: 'completed', toolCalls: [] });
  });

  it('requests without tools get a short answer; a wrong key gets 401 in the error shape', async () => {
    const side = await post('/v1/responses', { model: 'm', input: 'Title?' });
    expect(codec.responseFacts(RESPONSES, side.status, side.text, false).text).toBe('OK.');
    const res = await fetch(`${fake.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer wrong' }, body: '{}' });
    expect(res.status).toBe(401);
    expect(codec.responseFacts(CHAT, 401, await res.text(), false).error).toBe('Incorrect API key provided.');
    expect(fake.calls.map((c) => c.authOk)).toEqual([true, true, true, true, true, false]);
    expect(fake.calls.map((c) => c.toolCall?.name ?? null)).toEqual(['bash', null, 'exec_command', null, null, null]);
  });
});
