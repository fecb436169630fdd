import { anthropicCodec as codec } from './anthropic.js';
import type { ApiRoute } from '../protocol.js';

const MESSAGES: ApiRoute = { api: 'messages', billable: true };
const COUNT: ApiRoute = { api: 'count_tokens', billable: false };

/** A server-sent event stream as Anthropic writes it: `event:` then `data:` lines, blank line between. */
function stream(...events: object[]): string {
  return events.map((e) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n`).join('');
}

describe('anthropicCodec.route', () => {
  it('serves messages, count_tokens and model listings by path', () => {
    expect(codec.route('POST', '/v1/messages')).toEqual({ api: 'messages', billable: true });
    expect(codec.route('POST', '/v1/messages/count_tokens')).toEqual({ api: 'count_tokens', billable: false });
    expect(codec.route('GET', '/v1/models')).toEqual({ api: 'models', billable: false });
    expect(codec.route('GET', '/v1/models/claude-sonnet-4-6')).toEqual({ api: 'models', model: 'claude-sonnet-4-6', billable: false });
  });

  it('tolerates the query string Claude Code adds (?beta=true)', () => {
    expect(codec.route('POST', '/v1/messages?beta=true')?.api).toBe('messages');
    expect(codec.route('POST', '/v1/messages/count_tokens?beta=true')?.api).toBe('count_tokens');
  });

  it('refuses other methods and paths', () => {
    expect(codec.route('GET', '/v1/messages')).toBeNull();
    expect(codec.route('HEAD', '/api/hello')).toBeNull();
    expect(codec.route('POST', '/v1/complete')).toBeNull();
    expect(codec.route('POST', '/v1/messages/batches')).toBeNull();
    expect(codec.route('POST', '/anthropic/v1/messages')).toBeNull();
  });

  it('forwards the path unchanged to a base URL that ends at the host', () => {
    expect(codec.defaultUpstream).toBe('https://api.anthropic.com');
    expect(codec.upstreamPath('/v1/messages')).toBe('/v1/messages');
  });
});

describe('anthropicCodec credentials', () => {
  const none = new URLSearchParams();

  it('reads x-api-key, else a bearer token', () => {
    expect(codec.credential({ 'x-api-key': 'tok-a' }, none)).toBe('tok-a');
    expect(codec.credential({ authorization: 'Bearer tok-b' }, none)).toBe('tok-b');
    expect(codec.credential({ 'x-api-key': 'tok-a', authorization: 'Bearer tok-b' }, none)).toBe('tok-a');
    expect(codec.credential({ authorization: 'Basic dXNlcjpwdw==' }, none)).toBeUndefined();
    expect(codec.credential({}, none)).toBeUndefined();
  });

  it('sends the harness key as x-api-key and drops the agent token from every credential header', () => {
    const headers: Record<string, string> = {
      'x-api-key': 'agent-token',
      Authorization: 'Bearer agent-token',
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'claude-code-20250219',
    };
    const query = new URLSearchParams('beta=true');
    codec.authorize(headers, query, 'sk-ant-harness');
    expect(headers).toEqual({ 'x-api-key': 'sk-ant-harness', 'anthropic-version': '2023-06-01', 'anthropic-beta': 'claude-code-20250219' });
    expect(query.toString()).toBe('beta=true');
  });
});

describe('anthropicCodec.requestFacts', () => {
  it('reads a first prompt: model, stream, message count and the prompt without system reminders', () => {
    const facts = codec.requestFacts(MESSAGES, {
      model: 'claude-sonnet-4-6',
      stream: true,
      max_tokens: 32000,
      system: [{ type: 'text', text: 'You are Claude Code.' }],
      tools: [{ name: 'Bash', input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } }],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: '<system-reminder>\n# Environment\n - Platform: linux\n</system-reminder>' },
            { type: 'text', text: 'Train the model and submit it.', cache_control: { type: 'ephemeral' } },
          ],
        },
      ],
    });
    expect(facts).toEqual({ maxOutputTokens: 32000, model: 'claude-sonnet-4-6', stream: true, messages: 1, userText: 'Train the model and submit it.', toolResults: [] });
  });

  it('reads a plain string prompt, and a request that does not stream', () => {
    const facts = codec.requestFacts(MESSAGES, { model: 'claude-haiku-4-5', max_tokens: 512, messages: [{ role: 'user', content: 'Write a title.' }] });
    expect(facts).toEqual({ maxOutputTokens: 512, model: 'claude-haiku-4-5', stream: false, messages: 1, userText: 'Write a title.', toolResults: [] });
  });

  it('reads the tool results that end the request, named after the tool_use they answer', () => {
    const facts = codec.requestFacts(MESSAGES, {
      model: 'claude-sonnet-4-6',
      stream: true,
      messages: [
        { role: 'user', content: 'Run the script.' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Running both.' },
            { type: 'tool_use', id: 'toolu_01', name: 'Bash', input: { command: 'python3 code/train.py' } },
            { type: 'tool_use', id: 'toolu_02', name: 'Read', input: { file_path: '/w/missing.txt' } },
          ],
        },
        {
          role: 'user',
          content: [
            { tool_use_id: 'toolu_01', type: 'tool_result', content: 'loss 0.12\n\n<system-reminder>\nnote\n</system-reminder>', is_error: false },
            { tool_use_id: 'toolu_02', type: 'tool_result', content: [{ type: 'text', text: 'File does not exist.' }], is_error: true },
          ],
        },
      ],
    });
    expect(facts.messages).toBe(3);
    expect(facts.userText).toBeUndefined();
    expect(facts.toolResults).toEqual([
      { id: 'toolu_01', name: 'Bash', output: 'loss 0.12\n\n<system-reminder>\nnote\n</system-reminder>' },
      { id: 'toolu_02', name: 'Read', output: 'File does not exist.', isError: true },
    ]);
  });

  it('keeps text the user adds after tool results, and shows non-text result blocks by type', () => {
    const facts = codec.requestFacts(MESSAGES, {
      model: 'claude-sonnet-4-6',
      messages: [
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_09', name: 'Read', input: { file_path: 'plot.png' } }] },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_09', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0K' } }] },
            { type: 'text', text: 'Now stop.' },
          ],
        },
      ],
    });
    expect(facts.userText).toBe('Now stop.');
    expect(facts.toolResults).toEqual([{ id: 'toolu_09', name: 'Read', output: '[image]' }]);
  });

  it('reports nothing trailing when the request ends with an assistant prefill', () => {
    const facts = codec.requestFacts(MESSAGES, {
      model: 'claude-sonnet-4-6',
      messages: [
        { role: 'user', content: 'Answer in JSON.' },
        { role: 'assistant', content: '{' },
      ],
    });
    expect(facts).toEqual({ maxOutputTokens: null, model: 'claude-sonnet-4-6', stream: false, messages: 2, toolResults: [] });
  });

  it('survives a body that is not a Messages request', () => {
    expect(codec.requestFacts(MESSAGES, undefined)).toEqual({ maxOutputTokens: null, model: null, stream: false, messages: 0, toolResults: [] });
    expect(codec.requestFacts(COUNT, { model: 7, messages: 'x' })).toEqual({ maxOutputTokens: null, model: null, stream: false, messages: 0, toolResults: [] });
  });
});

describe('anthropicCodec.responseFacts (JSON)', () => {
  it('reads a message that ends its turn', () => {
    const body = JSON.stringify({
      id: 'msg_01XFDUDYJgAACzvnptvVoYEL',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-6',
      content: [{ type: 'text', text: 'Hello!' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 12, output_tokens: 6, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    });
    expect(codec.responseFacts(MESSAGES, 200, body, false)).toEqual({ usageFinal: true,
      model: 'claude-sonnet-4-6',
      usage: { inputTokens: 12, outputTokens: 6, cacheReadTokens: 0, cacheWriteTokens: 0 },
      stopReason: 'end_turn',
      text: 'Hello!',
      toolCalls: [],
    });
  });

  it('reads tool calls, thinking left out of the text, and cache tokens', () => {
    const body = JSON.stringify({
      id: 'msg_02',
      type: 'message',
      role: 'assistant',
      model: 'claude-opus-4-6',
      content: [
        { type: 'thinking', thinking: 'I should list files.', signature: 'c2ln' },
        { type: 'text', text: 'Listing the workspace.' },
        { type: 'tool_use', id: 'toolu_01A', name: 'Bash', input: { command: 'ls -la', description: 'List files' } },
      ],
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 3, output_tokens: 88, cache_creation_input_tokens: 2048, cache_read_input_tokens: 15000 },
    });
    const facts = codec.responseFacts(MESSAGES, 200, body, false);
    expect(facts.model).toBe('claude-opus-4-6');
    expect(facts.usage).toEqual({ inputTokens: 3, outputTokens: 88, cacheReadTokens: 15000, cacheWriteTokens: 2048 });
    expect(facts.stopReason).toBe('tool_use');
    expect(facts.text).toBe('Listing the workspace.');
    expect(facts.toolCalls).toEqual([{ id: 'toolu_01A', name: 'Bash', input: '{"command":"ls -la","description":"List files"}' }]);
  });

  it('reads count_tokens as input tokens', () => {
    const facts = codec.responseFacts(COUNT, 200, '{"input_tokens":2095}', false);
    expect(facts.usage).toEqual({ inputTokens: 2095, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null });
    expect(facts.error).toBeUndefined();
  });

  it('reads an error answer', () => {
    const body = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}';
    const facts = codec.responseFacts(MESSAGES, 529, body, false);
    expect(facts.error).toBe('Overloaded');
    expect(facts.usage.inputTokens).toBeNull();
    expect(facts.toolCalls).toEqual([]);
  });

  it('falls back to the status when an error body is not Anthropic JSON', () => {
    expect(codec.responseFacts(MESSAGES, 502, '<html>Bad Gateway</html>', false).error).toBe('HTTP 502');
    expect(codec.responseFacts(MESSAGES, 200, '', false).error).toBeUndefined();
  });

  it('reads nothing billable from a model listing', () => {
    const body = '{"data":[{"type":"model","id":"claude-sonnet-4-6","display_name":"Claude Sonnet 4.6"}],"has_more":false}';
    const facts = codec.responseFacts({ api: 'models', billable: false }, 200, body, false);
    expect(facts).toEqual({ usageFinal: false,
      model: null,
      usage: { inputTokens: null, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null },
      stopReason: null,
      text: null,
      toolCalls: [],
    });
  });
});

describe('anthropicCodec.responseFacts (stream)', () => {
  it('reads a streamed text answer', () => {
    const body = stream(
      { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-6', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 25, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 } } },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'ping' },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: ', world.' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 15 } },
      { type: 'message_stop' },
    );
    expect(codec.responseFacts(MESSAGES, 200, body, true)).toEqual({ usageFinal: true,
      model: 'claude-sonnet-4-6',
      usage: { inputTokens: 25, outputTokens: 15, cacheReadTokens: 0, cacheWriteTokens: 0 },
      stopReason: 'end_turn',
      text: 'Hello, world.',
      toolCalls: [],
    });
  });

  it('assembles a tool input from its input_json_delta fragments, thinking left out', () => {
    const body = stream(
      { type: 'message_start', message: { id: 'msg_2', type: 'message', role: 'assistant', model: 'claude-sonnet-4-6', content: [], stop_reason: null, usage: { input_tokens: 4, cache_creation_input_tokens: 1200, cache_read_input_tokens: 30000, output_tokens: 1 } } },
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Train first.' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'RXVn' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'Starting training.' } },
      { type: 'content_block_stop', index: 1 },
      { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', name: 'Bash', input: {} } },
      { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '' } },
      { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"command": "python3 co' } },
      { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: 'de/train.py", "timeout": 600000}' } },
      { type: 'content_block_stop', index: 2 },
      { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 89 } },
      { type: 'message_stop' },
    );
    const facts = codec.responseFacts(MESSAGES, 200, body, true);
    expect(facts.usage).toEqual({ inputTokens: 4, outputTokens: 89, cacheReadTokens: 30000, cacheWriteTokens: 1200 });
    expect(facts.stopReason).toBe('tool_use');
    expect(facts.text).toBe('Starting training.');
    expect(facts.toolCalls).toEqual([{ id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', name: 'Bash', input: '{"command":"python3 code/train.py","timeout":600000}' }]);
  });

  it('takes the cumulative counts message_delta repeats, and keeps a tool input that does not parse', () => {
    const body = stream(
      { type: 'message_start', message: { model: 'claude-haiku-4-5', usage: { input_tokens: 10, output_tokens: 1 } } },
      { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_x', name: 'Write', input: {} } },
      { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"file_path": "a.py", "con' } },
      { type: 'message_delta', delta: { stop_reason: 'max_tokens' }, usage: { input_tokens: 10, cache_read_input_tokens: 500, output_tokens: 4096 } },
    );
    const facts = codec.responseFacts(MESSAGES, 200, body, true);
    expect(facts.usage).toEqual({ inputTokens: 10, outputTokens: 4096, cacheReadTokens: 500, cacheWriteTokens: null });
    expect(facts.stopReason).toBe('max_tokens');
    expect(facts.toolCalls).toEqual([{ id: 'toolu_x', name: 'Write', input: '{"file_path": "a.py", "con' }]);
  });

  it('reads an error event that ends a stream after its 200', () => {
    const body =
      stream(
        { type: 'message_start', message: { model: 'claude-sonnet-4-6', usage: { input_tokens: 30, output_tokens: 1 } } },
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Partial' } },
      ) + 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n';
    const facts = codec.responseFacts(MESSAGES, 200, body, true);
    expect(facts.error).toBe('Overloaded');
    expect(facts.text).toBe('Partial');
    expect(facts.usage.inputTokens).toBe(30);
    expect(facts.stopReason).toBeNull();
  });

  it('reads a stream cut short, and CRLF line ends', () => {
    const cut = 'event: message_start\r\ndata: {"type":"message_start","message":{"model":"claude-sonnet-4-6","usage":{"input_tokens":7,"output_tokens":1}}}\r\n\r\nevent: content_bl';
    const facts = codec.responseFacts(MESSAGES, 200, cut, true);
    expect(facts.model).toBe('claude-sonnet-4-6');
    expect(facts.usage.inputTokens).toBe(7);
    expect(facts.text).toBeNull();
    expect(facts.error).toBeUndefined();
  });
});

describe('anthropicCodec.errorBody', () => {
  it.each([
    ['auth', 401, 'authentication_error'],
    ['not_found', 404, 'not_found_error'],
    ['bad_request', 400, 'invalid_request_error'],
    ['limit', 429, 'rate_limit_error'],
    ['upstream', 502, 'api_error'],
    ['upstream', 529, 'overloaded_error'],
    ['timeout', 504, 'timeout_error'],
  ] as const)('%s (%i) is an Anthropic %s', (kind, status, type) => {
    expect(codec.errorBody(kind, status, 'the message')).toEqual({ type: 'error', error: { type, message: 'the message' }, request_id: null });
  });

  it('is read back by responseFacts', () => {
    const body = JSON.stringify(codec.errorBody('limit', 429, 'the run reached --max-llm-tokens'));
    expect(codec.responseFacts(MESSAGES, 429, body, false).error).toBe('the run reached --max-llm-tokens');
  });
});
