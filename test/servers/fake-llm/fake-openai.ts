import type { IncomingMessage, ServerResponse } from 'node:http';
import { endAnswer, requestSeen, serveFake, sse, usageOf } from './serve.js';
import type { FakeLlmCall, FakeLlmOptions, FakeLlmServer } from './types.js';

/**
 * A scripted OpenAI upstream (see types.ts): `/v1/chat/completions` and `/v1/responses`, each as JSON
 * or as the server-sent events OpenAI streams, and `/v1/models`. Codex CLI speaks Responses and runs
 * commands with `exec_command` (`cmd`: a string); OpenCode speaks Responses (`@ai-sdk/openai`) or Chat
 * Completions (`@ai-sdk/openai-compatible`) and runs them with `bash` (`command`). The arguments follow
 * the tool's own schema, so other shapes (`shell` with a `command` array) are served too. A request in
 * hang mode is recorded with status 0.
 */
export async function startFakeOpenAI(options: FakeLlmOptions): Promise<FakeLlmServer> {
  let answered = 0;
  return serveFake(options, async (req, body, res, calls) => {
    const path = (req.url ?? '/').split('?')[0];
    const request = (body ?? {}) as Json;
    const call: FakeLlmCall = {
      path,
      model: typeof request.model === 'string' ? request.model : null,
      stream: request.stream === true,
      status: 0,
      authOk: !options.expectKey || bearerOf(req) === options.expectKey,
      tools: toolsOf(request).map((t) => t.name),
      ...requestSeen(req, body),
    };
    calls.push(call);
    const api = apiOf(req.method ?? 'GET', path);
    if (!call.authOk) return answerError(res, call, 401, 'Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key');
    if (api === 'models') return answerModels(res, call, options.model ?? 'gpt-5');
    if (!api) return answerError(res, call, 404, `Invalid URL (${req.method} ${path})`, 'invalid_request_error', null);
    if (options.mode === 'hang') return; // never answered: close() ends the connection
    if (options.mode === 'error') return answerError(res, call, 500, 'The server had an error while processing your request.', 'server_error', null);
    const usage = usageOf(options, answered++, body);
    const answer = planAnswer(options, request, api);
    call.status = 200;
    // A chat stream carries usage only when the request asked for it (LiteLLM's, R&D-Agent's, do not).
    if (!(call.stream && api === 'chat' && !includeUsage(request))) call.usage = usage;
    if (answer.tool) call.toolCall = { name: answer.tool.name, command: answer.tool.command };
    const model = options.model ?? call.model ?? 'gpt-5';
    const reply = { ...answer, model, usage, id: `${answered}${Date.now().toString(36)}` };
    const hold = () => options.hold?.(call);
    if (call.stream) return api === 'chat' ? streamChat(res, call, reply, includeUsage(request), hold) : streamResponses(res, call, reply, hold);
    await hold();
    json(res, 200, api === 'chat' ? chatJson(reply) : responseObject(reply, 'completed'), call);
  });
}

type Json = Record<string, unknown>;
type Api = 'chat' | 'responses' | 'models';

interface Tool {
  name: string;
  parameters: Json;
}

interface Answer {
  text?: string;
  tool?: { name: string; command: string; callId: string; arguments: string };
}

interface Reply extends Answer {
  id: string;
  model: string;
  usage: { input: number; output: number };
}

/** Tool names the fake recognises as a CLI's shell, most specific first. */
const SHELL_TOOLS = ['exec_command', 'shell_command', 'shell', 'bash', 'Bash', 'run_shell_command', 'terminal'];

function apiOf(method: string, path: string): Api | null {
  if (method === 'GET' && path === '/v1/models') return 'models';
  if (method === 'POST' && path === '/v1/chat/completions') return 'chat';
  if (method === 'POST' && path === '/v1/responses') return 'responses';
  return null;
}

function bearerOf(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  return auth?.startsWith('Bearer ') ? auth.slice('Bearer '.length) : undefined;
}

/** Function tools offered: Chat's `{type, function: {name, parameters}}`, Responses' flat `{type, name, parameters}` (and namespaces of them). */
function toolsOf(request: Json): Tool[] {
  const tools = Array.isArray(request.tools) ? (request.tools as Json[]) : [];
  return tools.flatMap((tool): Tool[] => {
    const fn = (tool.function ?? tool) as Json;
    if (typeof fn.name === 'string') return [{ name: fn.name, parameters: (fn.parameters ?? {}) as Json }];
    if (Array.isArray(tool.tools)) return toolsOf({ tools: tool.tools });
    return typeof tool.type === 'string' ? [{ name: tool.type, parameters: {} }] : [];
  });
}

/** The step is the number of tool results the request carries (Chat: role "tool"; Responses: *_call_output items). */
function stepOf(request: Json, api: Api): number {
  const items = (api === 'chat' ? request.messages : request.input) as Json[] | undefined;
  if (!Array.isArray(items)) return 0;
  return items.filter((m) => (api === 'chat' ? m.role === 'tool' : typeof m.type === 'string' && m.type.endsWith('_call_output'))).length;
}

function planAnswer(options: FakeLlmOptions, request: Json, api: Api): Answer {
  const tools = toolsOf(request);
  if (!tools.length) return { text: options.text?.(request) ?? 'OK.' };
  const step = stepOf(request, api);
  const shell = SHELL_TOOLS.map((name) => tools.find((t) => t.name === name)).find(Boolean);
  if (!shell || step >= options.script.length) return { text: options.finalText ?? 'Done.' };
  const command = options.script[step];
  return { tool: { name: shell.name, command, callId: `call_fake${step}`, arguments: JSON.stringify(shellArguments(shell.parameters, command, step)) } };
}

/** Arguments for the shell tool, shaped by its own schema (`cmd`, a `command` string or argv array, a required description). */
function shellArguments(schema: Json, command: string, step: number): Json {
  const props = (schema.properties ?? {}) as Record<string, Json>;
  const args: Json = {};
  if (props.cmd) args.cmd = command;
  else if (props.command?.type === 'array') args.command = ['bash', '-lc', command];
  else args.command = command;
  // Codex's exec_command returns after yield_time_ms with a session id if the command still runs: wait the longest it allows.
  if (props.yield_time_ms) args.yield_time_ms = 30000;
  // Other required strings (a `description`) get a label; other required types are left to the CLI's defaults.
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
  // A required enum (OpenHands' `security_risk`) takes its lowest value.
  for (const name of required) {
    if (name in args) continue;
    const values = Array.isArray(props[name]?.enum) ? (props[name].enum as unknown[]) : null;
    if (values?.length) args[name] = values.includes('LOW') ? 'LOW' : values[0];
    else if (props[name]?.type === 'string') args[name] = `Step ${step + 1} of the script`;
  }
  return args;
}

function includeUsage(request: Json): boolean {
  return (request.stream_options as Json | undefined)?.include_usage === true;
}

function json(res: ServerResponse, status: number, body: unknown, call?: FakeLlmCall): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  if (call) endAnswer(res, call, JSON.stringify(body));
  else res.end(JSON.stringify(body));
}

function answerError(res: ServerResponse, call: FakeLlmCall, status: number, message: string, type: string, code: string | null): void {
  call.status = status;
  json(res, status, { error: { message, type, param: null, code } });
}

function answerModels(res: ServerResponse, call: FakeLlmCall, model: string): void {
  call.status = 200;
  json(res, 200, { object: 'list', data: [{ id: model, object: 'model', created: 1700000000, owned_by: 'a2rl-fake' }] });
}

function startSse(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
}

/** Splits text into a few deltas, as a model streams it. */
function pieces(text: string): string[] {
  const size = Math.max(1, Math.ceil(text.length / 3));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out.length ? out : [''];
}

// ---- Chat Completions ----

function chatUsage(usage: Reply['usage']): Json {
  return {
    prompt_tokens: usage.input,
    completion_tokens: usage.output,
    total_tokens: usage.input + usage.output,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

function chatJson(reply: Reply): Json {
  const toolCalls = reply.tool ? [{ id: reply.tool.callId, type: 'function', function: { name: reply.tool.name, arguments: reply.tool.arguments } }] : undefined;
  return {
    id: `chatcmpl-${reply.id}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: reply.model,
    choices: [{ index: 0, message: { role: 'assistant', content: reply.text ?? null, refusal: null, ...(toolCalls && { tool_calls: toolCalls }) }, logprobs: null, finish_reason: reply.tool ? 'tool_calls' : 'stop' }],
    usage: chatUsage(reply.usage),
    system_fingerprint: 'fp_a2rl_fake',
  };
}

/** `data: {chunk}` lines, a last chunk with the finish reason, the usage chunk when asked for, then `data: [DONE]`. */
async function streamChat(res: ServerResponse, call: FakeLlmCall, reply: Reply, withUsage: boolean, hold: () => Promise<void> | undefined): Promise<void> {
  startSse(res);
  const base = { id: `chatcmpl-${reply.id}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: reply.model, system_fingerprint: 'fp_a2rl_fake' };
  const chunk = (delta: Json, finish: string | null = null) =>
    sse(res, { ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...(withUsage && { usage: null }) });
  if (reply.tool) {
    chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: reply.tool.callId, type: 'function', function: { name: reply.tool.name, arguments: '' } }], refusal: null });
    for (const part of pieces(reply.tool.arguments)) chunk({ tool_calls: [{ index: 0, function: { arguments: part } }] });
  } else {
    chunk({ role: 'assistant', content: '', refusal: null });
    for (const part of pieces(reply.text ?? '')) chunk({ content: part });
  }
  chunk({}, reply.tool ? 'tool_calls' : 'stop');
  await hold();
  if (withUsage) sse(res, { ...base, choices: [], usage: chatUsage(reply.usage) });
  sse(res, '[DONE]');
  endAnswer(res, call);
}

// ---- Responses ----

function outputItem(reply: Reply, done: boolean): Json {
  const status = done ? 'completed' : 'in_progress';
  if (reply.tool) return { id: `fc_${reply.id}`, type: 'function_call', status, arguments: done ? reply.tool.arguments : '', call_id: reply.tool.callId, name: reply.tool.name };
  const content = done ? [{ type: 'output_text', text: reply.text ?? '', annotations: [], logprobs: [] }] : [];
  return { id: `msg_${reply.id}`, type: 'message', status, role: 'assistant', content };
}

function responseObject(reply: Reply, status: 'in_progress' | 'completed'): Json {
  const done = status === 'completed';
  return {
    id: `resp_${reply.id}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model: reply.model,
    output: done ? [outputItem(reply, true)] : [],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: false,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: done
      ? { input_tokens: reply.usage.input, input_tokens_details: { cached_tokens: 0 }, output_tokens: reply.usage.output, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: reply.usage.input + reply.usage.output }
      : null,
    metadata: {},
  };
}

/** The typed events, each with its `event:` line and sequence number: created … output item … completed. */
async function streamResponses(res: ServerResponse, call: FakeLlmCall, reply: Reply, hold: () => Promise<void> | undefined): Promise<void> {
  startSse(res);
  let sequence = 0;
  const emit = (type: string, fields: Json) => sse(res, { type, sequence_number: sequence++, ...fields }, type);
  const itemId = reply.tool ? `fc_${reply.id}` : `msg_${reply.id}`;
  emit('response.created', { response: responseObject(reply, 'in_progress') });
  emit('response.in_progress', { response: responseObject(reply, 'in_progress') });
  emit('response.output_item.added', { output_index: 0, item: outputItem(reply, false) });
  if (reply.tool) {
    for (const delta of pieces(reply.tool.arguments)) emit('response.function_call_arguments.delta', { item_id: itemId, output_index: 0, delta });
    emit('response.function_call_arguments.done', { item_id: itemId, output_index: 0, name: reply.tool.name, arguments: reply.tool.arguments });
  } else {
    const text = reply.text ?? '';
    const at = { item_id: itemId, output_index: 0, content_index: 0 };
    emit('response.content_part.added', { ...at, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } });
    for (const delta of pieces(text)) emit('response.output_text.delta', { ...at, delta, logprobs: [] });
    emit('response.output_text.done', { ...at, text, logprobs: [] });
    emit('response.content_part.done', { ...at, part: { type: 'output_text', text, annotations: [], logprobs: [] } });
  }
  emit('response.output_item.done', { output_index: 0, item: outputItem(reply, true) });
  await hold();
  emit('response.completed', { response: responseObject(reply, 'completed') });
  endAnswer(res, call);
}
