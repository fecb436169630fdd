import type { ApiRoute } from '../protocol.js';
import { geminiCodec } from './gemini.js';

const STREAM: ApiRoute = { api: 'streamGenerateContent', model: 'gemini-2.5-pro', streamByPath: true, billable: true };
const GENERATE: ApiRoute = { api: 'generateContent', model: 'gemini-2.5-flash', streamByPath: false, billable: true };
const COUNT: ApiRoute = { api: 'countTokens', model: 'gemini-2.5-pro', streamByPath: false, billable: false };

describe('geminiCodec.route', () => {
  it('serves generateContent, streamGenerateContent (streaming by its path) and countTokens (free), the model taken from the URL', () => {
    expect(geminiCodec.route('POST', '/v1beta/models/gemini-2.5-pro:generateContent')).toEqual({ api: 'generateContent', model: 'gemini-2.5-pro', streamByPath: false, billable: true });
    expect(geminiCodec.route('POST', '/v1beta/models/gemini-2.5-pro:streamGenerateContent')).toEqual({ api: 'streamGenerateContent', model: 'gemini-2.5-pro', streamByPath: true, billable: true });
    expect(geminiCodec.route('POST', '/v1beta/models/gemini-2.5-flash-lite:countTokens')).toEqual({ api: 'countTokens', model: 'gemini-2.5-flash-lite', streamByPath: false, billable: false });
  });

  it('serves the /v1 equivalents and decodes an escaped model name', () => {
    expect(geminiCodec.route('POST', '/v1/models/gemini-2.5-pro:generateContent')?.model).toBe('gemini-2.5-pro');
    expect(geminiCodec.route('POST', '/v1/models/gemini%2D2.5%2Dpro:streamGenerateContent')?.model).toBe('gemini-2.5-pro');
  });

  it('serves the model listing and a model lookup as non-billable', () => {
    expect(geminiCodec.route('GET', '/v1beta/models')).toEqual({ api: 'models', billable: false });
    expect(geminiCodec.route('GET', '/v1/models')).toEqual({ api: 'models', billable: false });
    expect(geminiCodec.route('GET', '/v1beta/models/gemini-2.5-pro')).toEqual({ api: 'models', model: 'gemini-2.5-pro', billable: false });
  });

  it('refuses other methods and paths', () => {
    expect(geminiCodec.route('GET', '/v1beta/models/gemini-2.5-pro:generateContent')).toBeNull();
    expect(geminiCodec.route('POST', '/v1beta/models')).toBeNull();
    expect(geminiCodec.route('POST', '/v1beta/models/gemini-2.5-pro:embedContent')).toBeNull();
    expect(geminiCodec.route('POST', '/v1beta/files')).toBeNull();
    expect(geminiCodec.route('POST', '/v2/models/m:generateContent')).toBeNull();
    expect(geminiCodec.route('POST', '/v1beta/models/a/b:generateContent')).toBeNull();
  });

  it('keeps the path for the upstream (its base URL ends at the host)', () => {
    expect(geminiCodec.upstreamPath('/v1beta/models/gemini-2.5-pro:streamGenerateContent')).toBe('/v1beta/models/gemini-2.5-pro:streamGenerateContent');
    expect(geminiCodec.defaultUpstream).toBe('https://generativelanguage.googleapis.com');
  });
});

describe('geminiCodec credentials', () => {
  it('reads the x-goog-api-key header first, then the key query parameter', () => {
    expect(geminiCodec.credential({ 'x-goog-api-key': 'tok-header' }, new URLSearchParams('key=tok-query'))).toBe('tok-header');
    expect(geminiCodec.credential({}, new URLSearchParams('alt=sse&key=tok-query'))).toBe('tok-query');
    expect(geminiCodec.credential({ 'x-goog-api-key': ['tok-a', 'tok-b'] } as never, new URLSearchParams())).toBe('tok-a');
    expect(geminiCodec.credential({ authorization: 'Bearer tok' }, new URLSearchParams('alt=sse'))).toBeUndefined();
  });

  it("puts the harness's key in x-goog-api-key and removes the agent's from the headers and the query", () => {
    const headers: Record<string, string> = { 'X-Goog-Api-Key': 'gateway-token', authorization: 'Bearer gateway-token', 'content-type': 'application/json' };
    const query = new URLSearchParams('alt=sse&key=gateway-token');
    geminiCodec.authorize(headers, query, 'harness-key');
    expect(headers).toEqual({ 'x-goog-api-key': 'harness-key', 'content-type': 'application/json' });
    expect(query.toString()).toBe('alt=sse');
  });
});

describe('geminiCodec.requestFacts', () => {
  it("reads Gemini CLI's first request: one user content, its session context and the prompt as separate texts", () => {
    const body = {
      contents: [{ role: 'user', parts: [{ text: '<session_context>\nThis is the Gemini CLI.\n</session_context>' }, { text: 'Train the model.' }] }],
      systemInstruction: { role: 'user', parts: [{ text: 'You are an interactive CLI agent.' }] },
      tools: [{ functionDeclarations: [{ name: 'run_shell_command' }] }],
      generationConfig: { temperature: 1 },
    };
    expect(geminiCodec.requestFacts(STREAM, body)).toEqual({ maxOutputTokens: null,
      model: 'gemini-2.5-pro',
      stream: true,
      messages: 1,
      userText: '<session_context>\nThis is the Gemini CLI.\n</session_context>\nTrain the model.',
      toolResults: [],
    });
  });

  it('reads the trailing function responses (as JSON text) of a tool turn, and no user text', () => {
    const body = {
      contents: [
        { role: 'user', parts: [{ text: 'Train the model.' }] },
        { role: 'model', parts: [{ functionCall: { id: 'run_shell_command_1_0', name: 'run_shell_command', args: { command: 'python3 code/train.py' } }, thoughtSignature: 'sig' }] },
        {
          role: 'user',
          parts: [
            { functionResponse: { id: 'run_shell_command_1_0', name: 'run_shell_command', response: { output: 'Output: trained 42\nProcess Group PGID: 10630' } } },
            { functionResponse: { name: 'read_file', response: { error: 'File not found: code/missing.py' } } },
          ],
        },
      ],
    };
    expect(geminiCodec.requestFacts(GENERATE, body)).toEqual({ maxOutputTokens: null,
      model: 'gemini-2.5-flash',
      stream: false,
      messages: 3,
      toolResults: [
        { id: 'run_shell_command_1_0', name: 'run_shell_command', output: '{"output":"Output: trained 42\\nProcess Group PGID: 10630"}' },
        { name: 'read_file', output: '{"error":"File not found: code/missing.py"}', isError: true },
      ],
    });
  });

  it('takes neither text nor results from a request that ends with the model, and leaves thoughts out of the user text', () => {
    const endsWithModel = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }, { role: 'model', parts: [{ text: 'hello' }] }] };
    expect(geminiCodec.requestFacts(GENERATE, endsWithModel)).toEqual({ maxOutputTokens: null, model: 'gemini-2.5-flash', stream: false, messages: 2, toolResults: [] });
    const noRole = { contents: [{ parts: [{ text: 'thinking', thought: true }, { text: 'question' }] }] };
    expect(geminiCodec.requestFacts(GENERATE, noRole).userText).toBe('question');
  });

  it('counts the contents of a countTokens request, given directly or inside generateContentRequest', () => {
    expect(geminiCodec.requestFacts(COUNT, { contents: [{ role: 'user', parts: [{ text: 'a' }] }, { role: 'model', parts: [{ text: 'b' }] }] }).messages).toBe(2);
    expect(geminiCodec.requestFacts(COUNT, { generateContentRequest: { model: 'models/gemini-2.5-pro', contents: [{ role: 'user', parts: [{ text: 'a' }] }] } })).toEqual({ maxOutputTokens: null,
      model: 'gemini-2.5-pro',
      stream: false,
      messages: 1,
      userText: 'a',
      toolResults: [],
    });
  });

  it('survives a body that is not a request', () => {
    expect(geminiCodec.requestFacts(GENERATE, undefined)).toEqual({ maxOutputTokens: null, model: 'gemini-2.5-flash', stream: false, messages: 0, toolResults: [] });
    expect(geminiCodec.requestFacts(GENERATE, { contents: 'nope' }).messages).toBe(0);
  });
});

/** A streamed answer as the Gemini API sends it with `alt=sse`: CRLF-separated events, usage repeated in each. */
const TEXT_STREAM =
  'data: {"candidates": [{"content": {"parts": [{"text": "**Planning** the run", "thought": true}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 1200,"totalTokenCount": 1200,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 1200}]},"modelVersion": "gemini-2.5-pro","responseId": "r1"}\r\n\r\n' +
  'data: {"candidates": [{"content": {"parts": [{"text": "The model is "}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 1200,"totalTokenCount": 1210,"thoughtsTokenCount": 10},"modelVersion": "gemini-2.5-pro","responseId": "r1"}\r\n\r\n' +
  'data: {"candidates": [{"content": {"parts": [{"text": "trained."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 1200,"candidatesTokenCount": 7,"totalTokenCount": 1249,"cachedContentTokenCount": 1024,"thoughtsTokenCount": 42},"modelVersion": "gemini-2.5-pro-002","responseId": "r1"}\r\n\r\n';

const CALL_STREAM =
  'data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "run_shell_command","args": {"command": "python3 code/train.py","description": "Train"}},"thoughtSignature": "CiQB"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 5000,"candidatesTokenCount": 30,"totalTokenCount": 5030},"modelVersion": "gemini-2.5-flash"}\n\n';

describe('geminiCodec.responseFacts', () => {
  it('reads a text stream: last usage wins, input without its cached part, thoughts as output, the answering model, text without thoughts', () => {
    expect(geminiCodec.responseFacts(STREAM, 200, TEXT_STREAM, true)).toEqual({ usageFinal: true,
      model: 'gemini-2.5-pro-002',
      usage: { inputTokens: 176, outputTokens: 49, cacheReadTokens: 1024, cacheWriteTokens: null },
      stopReason: 'STOP',
      text: 'The model is trained.',
      toolCalls: [],
    });
  });

  it('reads a function call from a stream (LF-separated events too)', () => {
    expect(geminiCodec.responseFacts(STREAM, 200, CALL_STREAM, true)).toEqual({ usageFinal: true,
      model: 'gemini-2.5-flash',
      usage: { inputTokens: 5000, outputTokens: 30, cacheReadTokens: null, cacheWriteTokens: null },
      stopReason: 'STOP',
      text: null,
      toolCalls: [{ name: 'run_shell_command', input: '{"command":"python3 code/train.py","description":"Train"}' }],
    });
  });

  it('reads a generateContent JSON answer, with a function call id when the model gives one', () => {
    const body = JSON.stringify({
      candidates: [{ content: { role: 'model', parts: [{ text: 'Let me look.' }, { functionCall: { id: 'c1', name: 'read_file', args: { file_path: 'code/train.py' } } }] }, finishReason: 'STOP', index: 0 }],
      usageMetadata: { promptTokenCount: 300, candidatesTokenCount: 12, totalTokenCount: 312 },
      modelVersion: 'gemini-2.5-flash',
    });
    expect(geminiCodec.responseFacts(GENERATE, 200, body, false)).toEqual({ usageFinal: true,
      model: 'gemini-2.5-flash',
      usage: { inputTokens: 300, outputTokens: 12, cacheReadTokens: null, cacheWriteTokens: null },
      stopReason: 'STOP',
      text: 'Let me look.',
      toolCalls: [{ id: 'c1', name: 'read_file', input: '{"file_path":"code/train.py"}' }],
    });
  });

  it('reads streamGenerateContent without alt=sse: one JSON array of answers', () => {
    const body = JSON.stringify([
      { candidates: [{ content: { role: 'model', parts: [{ text: 'Hel' }] } }], usageMetadata: { promptTokenCount: 9 }, modelVersion: 'gemini-2.5-pro' },
      { candidates: [{ content: { role: 'model', parts: [{ text: 'lo' }] }, finishReason: 'MAX_TOKENS' }], usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 2 }, modelVersion: 'gemini-2.5-pro' },
    ]);
    const facts = geminiCodec.responseFacts(STREAM, 200, body, false);
    expect([facts.text, facts.stopReason, facts.usage.inputTokens, facts.usage.outputTokens]).toEqual(['Hello', 'MAX_TOKENS', 9, 2]);
  });

  it('reads countTokens as input tokens only', () => {
    expect(geminiCodec.responseFacts(COUNT, 200, '{"totalTokens": 31, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 31}]}', false)).toEqual({ usageFinal: true,
      model: null,
      usage: { inputTokens: 31, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null },
      stopReason: null,
      text: null,
      toolCalls: [],
    });
  });

  it('reads nothing from a model listing', () => {
    const facts = geminiCodec.responseFacts({ api: 'models', billable: false }, 200, '{"models":[{"name":"models/gemini-2.5-pro"}]}', false);
    expect(facts).toEqual({ usageFinal: false, model: null, usage: { inputTokens: null, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null }, stopReason: null, text: null, toolCalls: [] });
  });

  it("reads the provider's error message from an error body, and from an error event ending a stream", () => {
    const quota = '{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED"}}';
    expect(geminiCodec.responseFacts(GENERATE, 429, quota, false).error).toBe('Resource has been exhausted (e.g. check quota).');
    const broken = CALL_STREAM + 'data: {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}\n\n';
    const facts = geminiCodec.responseFacts(STREAM, 200, broken, true);
    expect([facts.error, facts.toolCalls.length, facts.usage.inputTokens]).toEqual(['The model is overloaded.', 1, 5000]);
  });

  it('reports the HTTP status when an error body is not JSON, and nothing for a body that is not an answer', () => {
    expect(geminiCodec.responseFacts(GENERATE, 502, '<html>Bad Gateway</html>', false).error).toBe('HTTP 502');
    const odd = geminiCodec.responseFacts(STREAM, 200, 'data: [DONE]\n\n: keep-alive\n\ndata: {"candidates": "x", "usageMetadata": {"promptTokenCount": -1}}\n\n', true);
    expect(odd).toEqual({ usageFinal: false, model: null, usage: { inputTokens: null, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null }, stopReason: null, text: null, toolCalls: [] });
  });
});

describe('geminiCodec.errorBody', () => {
  it("answers in the Gemini API's error shape, with the google.rpc status of each kind", () => {
    expect(geminiCodec.errorBody('limit', 429, 'run token limit reached')).toEqual({ error: { code: 429, message: 'run token limit reached', status: 'RESOURCE_EXHAUSTED' } });
    const statuses = (['auth', 'not_found', 'bad_request', 'upstream', 'timeout'] as const).map((kind) => (geminiCodec.errorBody(kind, 400, 'm') as { error: { status: string } }).error.status);
    expect(statuses).toEqual(['UNAUTHENTICATED', 'NOT_FOUND', 'INVALID_ARGUMENT', 'INTERNAL', 'DEADLINE_EXCEEDED']);
  });
});
