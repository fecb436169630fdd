import type { IncomingMessage, ServerResponse } from 'node:http';
import { endAnswer, requestSeen, serveFake, sse, usageOf } from './serve.js';
import type { FakeLlmCall, FakeLlmOptions, FakeLlmServer } from './types.js';

/**
 * A scripted Anthropic Messages API (see types.ts for the script's rules): POST /v1/messages as JSON
 * or as the real event stream, POST /v1/messages/count_tokens, GET /v1/models, and the HEAD
 * /api/hello reachability probe Claude Code sends unless non-essential traffic is off. The shell
 * tool is Claude Code's `Bash` ({command, description}), or any offered tool whose input needs a
 * `command`.
 */
export function startFakeAnthropic(options: FakeLlmOptions): Promise<FakeLlmServer> {
  let answers = 0;
  return serveFake(options, async (req, body, res, calls) => {
    const path = (req.url ?? '/').split('?')[0];
    const request = (body ?? {}) as MessagesRequest;
    const call: FakeLlmCall = {
      path,
      model: typeof request.model === 'string' ? request.model : null,
      stream: request.stream === true,
      status: 0,
      authOk: !options.expectKey || keyOf(req) === options.expectKey,
      tools: (request.tools ?? []).map((t) => t.name),
      ...requestSeen(req, body),
    };
    calls.push(call);
    const api = apiOf(req.method ?? 'GET', path);
    if (api === 'hello') return reply(res, call, 200, null);
    if (!call.authOk) return reply(res, call, 401, errorJson('authentication_error', 'invalid x-api-key'));
    if (api === 'models') return reply(res, call, 200, modelList(options));
    if (!api) return reply(res, call, 404, errorJson('not_found_error', `Not found: ${req.method} ${path}`));
    if (options.mode === 'hang') return; // never answered: close() ends the connection
    if (options.mode === 'error') return reply(res, call, 500, errorJson('api_error', 'Internal server error'));
    if (api === 'count_tokens') return reply(res, call, 200, { input_tokens: tokenEstimate(body) });
    const usage = usageOf(options, answers++, body);
    call.usage = usage;
    const message = answerTo(request, options, usage, call);
    if (call.stream) return streamMessage(res, call, message, options);
    await options.hold?.(call);
    reply(res, call, 200, message);
  });
}

type Api = 'messages' | 'count_tokens' | 'models' | 'hello';

function apiOf(method: string, path: string): Api | null {
  if (method === 'POST' && path === '/v1/messages') return 'messages';
  if (method === 'POST' && path === '/v1/messages/count_tokens') return 'count_tokens';
  if (method === 'GET' && path === '/v1/models') return 'models';
  if (method === 'HEAD' && path === '/api/hello') return 'hello';
  return null;
}

interface ToolSpec {
  name: string;
  input_schema?: { required?: string[]; properties?: Record<string, unknown> };
}

interface MessagesRequest {
  model?: string;
  stream?: boolean;
  tools?: ToolSpec[];
  messages?: { role: string; content: unknown }[];
}

type Block = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

interface Message {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: Block[];
  stop_reason: 'end_turn' | 'tool_use';
  stop_sequence: null;
  usage: { input_tokens: number; output_tokens: number; cache_creation_input_tokens: number; cache_read_input_tokens: number };
}

function keyOf(req: IncomingMessage): string | undefined {
  const apiKey = req.headers['x-api-key'];
  if (typeof apiKey === 'string') return apiKey;
  const bearer = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
  return bearer?.[1];
}

function errorJson(type: string, message: string): unknown {
  return { type: 'error', error: { type, message } };
}

function reply(res: ServerResponse, call: FakeLlmCall, status: number, body: unknown): void {
  call.status = status;
  if (body === null) return void endAnswer(res.writeHead(status), call);
  endAnswer(res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_fake_${Date.now()}` }), call, JSON.stringify(body));
}

function modelList(options: FakeLlmOptions): unknown {
  const id = options.model ?? 'claude-sonnet-4-6';
  return { data: [{ type: 'model', id, display_name: id, created_at: '2026-01-01T00:00:00Z' }], has_more: false, first_id: id, last_id: id };
}

/** Roughly four characters a token, as a count_tokens answer only needs to be plausible. */
function tokenEstimate(body: unknown): number {
  return Math.max(1, Math.ceil(JSON.stringify(body ?? '').length / 4));
}

/** The shell tool the request offers: Claude Code's `Bash`, else one whose input requires `command`. */
function shellTool(tools: ToolSpec[]): string | undefined {
  const named = tools.find((t) => /^bash$/i.test(t.name));
  return (named ?? tools.find((t) => t.input_schema?.required?.includes('command')))?.name;
}

/** The script's step: how many tool results the conversation carries so far. */
function stepOf(request: MessagesRequest): number {
  let results = 0;
  for (const message of request.messages ?? []) {
    if (!Array.isArray(message.content)) continue;
    for (const block of message.content as { type?: string }[]) if (block?.type === 'tool_result') results++;
  }
  return results;
}

function answerTo(request: MessagesRequest, options: FakeLlmOptions, usage: { input: number; output: number }, call: FakeLlmCall): Message {
  const tools = request.tools ?? [];
  const shell = tools.length ? shellTool(tools) : undefined;
  const step = stepOf(request);
  let content: Block[];
  if (shell && step < options.script.length) {
    const command = options.script[step];
    call.toolCall = { name: shell, command };
    content = [
      { type: 'text', text: `Step ${step + 1}.` },
      { type: 'tool_use', id: `toolu_fake_${step}_${Math.random().toString(36).slice(2, 10)}`, name: shell, input: { command, description: `Run step ${step + 1} of the script` } },
    ];
  } else {
    content = [{ type: 'text', text: tools.length ? (options.finalText ?? 'Done.') : 'OK.' }];
  }
  return {
    id: `msg_fake_${Math.random().toString(36).slice(2, 14)}`,
    type: 'message',
    role: 'assistant',
    model: options.model ?? request.model ?? 'claude-sonnet-4-6',
    content,
    stop_reason: call.toolCall ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: usage.input, output_tokens: usage.output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
}

/** The message as Anthropic streams it: start, each block (tool input in two JSON fragments), (hold,) delta with the final usage, stop. */
async function streamMessage(res: ServerResponse, call: FakeLlmCall, message: Message, options: FakeLlmOptions): Promise<void> {
  call.status = 200;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'request-id': `req_fake_${Date.now()}` });
  const { usage } = message;
  const start = { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } };
  sse(res, { type: 'message_start', message: start }, 'message_start');
  sse(res, { type: 'ping' }, 'ping');
  message.content.forEach((block, index) => streamBlock(res, block, index));
  await options.hold?.(call);
  sse(res, { type: 'message_delta', delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } }, 'message_delta');
  sse(res, { type: 'message_stop' }, 'message_stop');
  endAnswer(res, call);
}

function streamBlock(res: ServerResponse, block: Block, index: number): void {
  if (block.type === 'text') {
    sse(res, { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }, 'content_block_start');
    sse(res, { type: 'content_block_delta', index, delta: { type: 'text_delta', text: block.text } }, 'content_block_delta');
  } else {
    sse(res, { type: 'content_block_start', index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } }, 'content_block_start');
    const json = JSON.stringify(block.input);
    const cut = Math.floor(json.length / 2);
    for (const partial_json of [json.slice(0, cut), json.slice(cut)]) {
      sse(res, { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json } }, 'content_block_delta');
    }
  }
  sse(res, { type: 'content_block_stop', index }, 'content_block_stop');
}
