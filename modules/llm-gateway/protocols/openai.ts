import type { IncomingHttpHeaders } from 'node:http';
import { emptyResponseFacts, type ApiRoute, type GatewayErrorKind, type ProviderCodec, type RequestFacts, type ResponseFacts, type ToolCall, type ToolResult, type Usage } from '../protocol.js';
import { parseJson, sseData, count, asObject, asArray, type Json } from './json.js';

/**
 * The OpenAI API as Codex CLI (Responses), OpenCode (Chat Completions) and OpenAI-compatible servers
 * (vLLM, LiteLLM, OpenRouter) speak it: `Authorization: Bearer <key>`, a base URL that ends in `/v1`,
 * and two chat APIs. Chat Completions streams `data: {chunk}` lines ending with `data: [DONE]` (usage in
 * a last chunk when `stream_options.include_usage` asks for it); Responses streams typed events
 * (`event: response.output_text.delta` …) ending with `response.completed` (or `.incomplete`/`.failed`),
 * whose response carries the usage.
 */


const MODEL_LISTING = /^\/v1\/models(?:\/([^/]+))?$/;

/** Items of a Responses input that answer a tool call, and the calls they answer. */
const CALL_OUTPUTS = new Set(['function_call_output', 'custom_tool_call_output', 'local_shell_call_output']);
const CALLS = new Set(['function_call', 'custom_tool_call', 'local_shell_call', 'reasoning']);

export const openaiCodec: ProviderCodec = {
  provider: 'openai',
  defaultUpstream: 'https://api.openai.com/v1',

  route(method, path) {
    if (method === 'POST' && path === '/v1/chat/completions') return { api: 'chat.completions', billable: true };
    if (method === 'POST' && path === '/v1/responses') return { api: 'responses', billable: true };
    const listing = MODEL_LISTING.exec(path);
    if (listing && method === 'GET') return listing[1] ? { api: 'models', model: decodeModel(listing[1]), billable: false } : { api: 'models', billable: false };
    return null;
  },

  upstreamPath: (path) => path.replace(/^\/v1(?=\/|$)/, ''),
  // Never OpenAI-Organization or OpenAI-Project: they choose whom the harness's key bills.
  forwardedHeaders: ['openai-beta'],
  queryParameters: [],

  credential(headers: IncomingHttpHeaders) {
    const bearer = /^Bearer\s+(.+)$/i.exec(headers.authorization ?? '');
    return bearer?.[1].trim() || undefined;
  },

  authorize(headers, _query, key) {
    for (const name of Object.keys(headers)) {
      const lower = name.toLowerCase();
      if (lower === 'authorization' || lower === 'api-key') delete headers[name];
    }
    headers.authorization = `Bearer ${key}`;
  },

  requestFacts(route, body) {
    const request = asObject(body);
    const facts: RequestFacts = {
      model: typeof request.model === 'string' ? request.model : (route.model ?? null),
      stream: request.stream === true,
      messages: 0,
      toolResults: [],
    };
    if (route.api === 'chat.completions') {
      chatRequestFacts(facts, asArray(request.messages).map(asObject));
      const max = count(request.max_completion_tokens) ?? count(request.max_tokens);
      facts.maxOutputTokens = max === null ? null : max * Math.max(1, count(request.n) ?? 1);
    } else if (route.api === 'responses') {
      responsesRequestFacts(facts, request.input);
      facts.maxOutputTokens = count(request.max_output_tokens);
    }
    return facts;
  },

  responseFacts(route, status, body, streamed) {
    const facts = emptyResponseFacts();
    if (route.api === 'models') return facts;
    if (route.api === 'chat.completions') {
      if (streamed) addChatChunks(facts, sseData(body));
      else addChatCompletion(facts, parseJson(body));
    } else if (route.api === 'responses') {
      if (streamed) addResponseEvents(facts, sseData(body));
      else addResponse(facts, parseJson(body), true);
    }
    if (facts.error === undefined && status >= 400) facts.error = errorMessage(parseJson(body)) ?? `HTTP ${status}`;
    return facts;
  },

  errorBody(kind: GatewayErrorKind, _status: number, message: string) {
    const { type, code } = ERROR_SHAPE[kind];
    return { error: { message, type, param: null, code } };
  },
};

/**
 * `error.type` and `error.code` as OpenAI sends them. A run's token or cost limit is the account's
 * quota running out (`insufficient_quota`), which the CLIs treat as final, not as a rate limit to retry.
 */
const ERROR_SHAPE: Record<GatewayErrorKind, { type: string; code: string | null }> = {
  auth: { type: 'invalid_request_error', code: 'invalid_api_key' },
  not_found: { type: 'invalid_request_error', code: 'model_not_found' },
  bad_request: { type: 'invalid_request_error', code: null },
  limit: { type: 'insufficient_quota', code: 'insufficient_quota' },
  upstream: { type: 'server_error', code: null },
  timeout: { type: 'server_error', code: 'timeout' },
};

// ---- requests ----

/** Chat: the trailing `tool` messages answer the tool calls of the assistant message before them. */
function chatRequestFacts(facts: RequestFacts, messages: Json[]): void {
  facts.messages = messages.length;
  const last = messages[messages.length - 1];
  if (last?.role === 'user') {
    const text = contentText(last.content, 'text');
    if (text !== null) facts.userText = text;
  }
  let first = messages.length;
  while (first > 0 && messages[first - 1].role === 'tool') first--;
  const names = toolNames(asArray(messages[first - 1]?.tool_calls).map(asObject), (call) => asObject(call.function).name);
  facts.toolResults = messages.slice(first).map((message) => toolResult(message.tool_call_id, contentText(message.content, 'text'), names));
}

/**
 * Responses: `input` is a string (one user message) or a list of items. The results of the last
 * turn's calls are the *_call_output items after the last message (calls and reasoning between them).
 */
function responsesRequestFacts(facts: RequestFacts, input: unknown): void {
  if (typeof input === 'string') {
    facts.messages = 1;
    facts.userText = input;
    return;
  }
  const items = asArray(input).map(asObject);
  facts.messages = items.length;
  const last = items[items.length - 1];
  if (last && last.role === 'user' && (last.type === undefined || last.type === 'message')) {
    const text = contentText(last.content, 'input_text');
    if (text !== null) facts.userText = text;
  }
  let first = items.length;
  while (first > 0 && (CALLS.has(String(items[first - 1].type)) || CALL_OUTPUTS.has(String(items[first - 1].type)))) first--;
  const turn = items.slice(first);
  const names = toolNames(turn.filter((item) => item.type !== 'reasoning'), (call) => call.name ?? (call.type === 'local_shell_call' ? 'local_shell' : undefined));
  facts.toolResults = turn.filter((item) => CALL_OUTPUTS.has(String(item.type))).map((item) => toolResult(item.call_id, contentText(item.output, 'input_text'), names));
}

function toolNames(calls: Json[], nameOf: (call: Json) => unknown): Map<string, string> {
  const names = new Map<string, string>();
  for (const call of calls) {
    const id = call.call_id ?? call.id;
    const name = nameOf(call);
    if (typeof id === 'string' && typeof name === 'string') names.set(id, name);
  }
  return names;
}

function toolResult(id: unknown, output: string | null, names: Map<string, string>): ToolResult {
  const result: ToolResult = { output: output ?? '' };
  if (typeof id === 'string') {
    result.id = id;
    const name = names.get(id);
    if (name) result.name = name;
  }
  return result;
}

/** A message's text: a string, or the `partType` parts of a list joined (images and files left out). */
function contentText(content: unknown, partType: string): string | null {
  if (typeof content === 'string') return content;
  const texts = asArray(content)
    .map(asObject)
    .filter((part) => (part.type === partType || part.type === 'text' || part.type === 'output_text') && typeof part.text === 'string')
    .map((part) => part.text as string);
  return texts.length ? texts.join('\n') : null;
}

// ---- Chat Completions answers ----

function addChatCompletion(facts: ResponseFacts, completion: Json): void {
  if (typeof completion.model === 'string') facts.model = completion.model;
  setChatUsage(facts.usage, asObject(completion.usage));
  facts.usageFinal = count(asObject(completion.usage).completion_tokens) !== null;
  const choice = asObject(asArray(completion.choices)[0]);
  if (typeof choice.finish_reason === 'string') facts.stopReason = choice.finish_reason;
  const message = asObject(choice.message);
  facts.text = contentText(message.content, 'text');
  facts.toolCalls = asArray(message.tool_calls).map(asObject).map((call) => {
    const fn = asObject(call.function);
    return toolCall(call.id, fn.name, typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments ?? {}));
  });
  const error = errorMessage(completion);
  if (error !== null) facts.error = error;
}

function addChatChunks(facts: ResponseFacts, chunks: Json[]): void {
  chunks.forEach((chunk) => addChatChunk(facts, chunk));
  facts.toolCalls = streamedToolCalls(chunks);
}

/** One streamed chunk: text deltas appended, the finish reason and usage (its own last chunk) kept. */
function addChatChunk(facts: ResponseFacts, chunk: Json): void {
  if (typeof chunk.model === 'string' && chunk.model) facts.model = chunk.model;
  if (chunk.usage) {
    setChatUsage(facts.usage, asObject(chunk.usage));
    if (count(asObject(chunk.usage).completion_tokens) !== null) facts.usageFinal = true;
  }
  const error = errorMessage(chunk);
  if (error !== null) facts.error = error;
  const choice = asObject(asArray(chunk.choices)[0]);
  if (typeof choice.finish_reason === 'string') facts.stopReason = choice.finish_reason;
  const content = asObject(choice.delta).content;
  if (typeof content === 'string' && content) facts.text = (facts.text ?? '') + content;
}

/** Streamed tool calls come in pieces keyed by `index`: the first names the call, the rest extend its arguments. */
function streamedToolCalls(chunks: Json[]): ToolCall[] {
  const calls = new Map<number, ToolCall>();
  for (const chunk of chunks) {
    for (const piece of asArray(asObject(asObject(asArray(chunk.choices)[0]).delta).tool_calls).map(asObject)) {
      const index = typeof piece.index === 'number' ? piece.index : calls.size;
      const call = calls.get(index) ?? { name: '', input: '' };
      const fn = asObject(piece.function);
      if (typeof piece.id === 'string' && piece.id) call.id = piece.id;
      if (typeof fn.name === 'string' && fn.name) call.name = fn.name;
      if (typeof fn.arguments === 'string') call.input += fn.arguments;
      calls.set(index, call);
    }
  }
  return [...calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
}

/** prompt_tokens counts the cached part too: the codecs report input as what was not read from the cache. */
function setChatUsage(usage: Usage, raw: Json): void {
  const prompt = count(raw.prompt_tokens);
  const cached = count(asObject(raw.prompt_tokens_details).cached_tokens);
  const completion = count(raw.completion_tokens);
  if (prompt !== null) usage.inputTokens = Math.max(0, prompt - (cached ?? 0));
  if (cached !== null) usage.cacheReadTokens = cached;
  if (completion !== null) usage.outputTokens = completion;
}

// ---- Responses answers ----

/**
 * The events of a Responses stream: text from the deltas, calls from the finished output items, and
 * model, usage and status from the final response (completed, incomplete or failed). Servers that send
 * only the final response still give its text and calls.
 */
function addResponseEvents(facts: ResponseFacts, events: Json[]): void {
  let final: Json | null = null;
  for (const event of events) {
    const type = event.type;
    if (type === 'response.output_text.delta' && typeof event.delta === 'string') facts.text = (facts.text ?? '') + event.delta;
    else if (type === 'response.output_item.done') {
      const call = outputCall(asObject(event.item));
      if (call) facts.toolCalls.push(call);
    } else if (type === 'response.created' || type === 'response.in_progress') {
      const model = asObject(event.response).model;
      if (typeof model === 'string' && model) facts.model = model;
    } else if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') final = asObject(event.response);
    else if (type === 'error') facts.error = typeof event.message === 'string' ? event.message : (errorMessage(event) ?? 'stream error');
  }
  if (final) addResponse(facts, final, facts.text === null && facts.toolCalls.length === 0);
}

/** A Response object; `withOutput` reads the text and calls from its output items too. */
function addResponse(facts: ResponseFacts, response: Json, withOutput: boolean): void {
  if (typeof response.model === 'string' && response.model) facts.model = response.model;
  setResponsesUsage(facts.usage, asObject(response.usage));
  facts.usageFinal = count(asObject(response.usage).output_tokens) !== null;
  const reason = asObject(response.incomplete_details).reason;
  if (typeof reason === 'string') facts.stopReason = reason;
  else if (typeof response.status === 'string') facts.stopReason = response.status;
  const error = errorMessage(response);
  if (error !== null) facts.error = error;
  if (!withOutput) return;
  const items = asArray(response.output).map(asObject);
  const texts = items.filter((item) => item.type === 'message').map((item) => contentText(item.content, 'output_text')).filter((t): t is string => t !== null);
  if (texts.length) facts.text = texts.join('\n');
  facts.toolCalls = items.map(outputCall).filter((call): call is ToolCall => call !== null);
}

/** A tool call among a response's output items: a function, a custom (free-form) tool, or the local shell. */
function outputCall(item: Json): ToolCall | null {
  if (item.type === 'function_call') return toolCall(item.call_id, item.name, typeof item.arguments === 'string' ? item.arguments : '');
  if (item.type === 'custom_tool_call') return toolCall(item.call_id, item.name, typeof item.input === 'string' ? item.input : '');
  if (item.type === 'local_shell_call') return toolCall(item.call_id, 'local_shell', JSON.stringify(item.action ?? {}));
  return null;
}

/** input_tokens counts the cached part too (see setChatUsage). */
function setResponsesUsage(usage: Usage, raw: Json): void {
  const input = count(raw.input_tokens);
  const cached = count(asObject(raw.input_tokens_details).cached_tokens);
  const output = count(raw.output_tokens);
  if (input !== null) usage.inputTokens = Math.max(0, input - (cached ?? 0));
  if (cached !== null) usage.cacheReadTokens = cached;
  if (output !== null) usage.outputTokens = output;
}

// ---- shared ----

function toolCall(id: unknown, name: unknown, input: string): ToolCall {
  const call: ToolCall = { name: typeof name === 'string' ? name : '', input };
  if (typeof id === 'string') call.id = id;
  return call;
}

/** `{error: {message}}` (or a bare string) when the body is an error; a Response's `error: null` is none. */
function errorMessage(body: Json): string | null {
  const error = body.error;
  if (typeof error === 'string') return error;
  const message = asObject(error).message;
  return typeof message === 'string' ? message : null;
}

function decodeModel(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
