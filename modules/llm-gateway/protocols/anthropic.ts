import type { IncomingHttpHeaders } from 'node:http';
import { emptyResponseFacts, type ApiRoute, type GatewayErrorKind, type ProviderCodec, type RequestFacts, type ResponseFacts, type ToolCall, type ToolResult, type Usage } from '../protocol.js';
import { parseJson, sseData, count, asObject, asArray, type Json } from './json.js';

/**
 * The Anthropic Messages API (api.anthropic.com) as Claude Code and the Anthropic SDKs speak it:
 * `POST /v1/messages` (JSON, or server-sent events when the body says `stream: true`),
 * `POST /v1/messages/count_tokens` and `GET /v1/models`. Claude Code adds `?beta=true` to its
 * calls; the gateway routes by path and passes the query on. The key is the `x-api-key` header, or
 * a bearer token (`ANTHROPIC_AUTH_TOKEN`).
 */


export const anthropicCodec: ProviderCodec = {
  provider: 'anthropic',
  defaultUpstream: 'https://api.anthropic.com',

  route(method, path) {
    const bare = path.split('?')[0].replace(/\/+$/, '');
    if (method === 'POST' && bare === '/v1/messages') return { api: 'messages', billable: true };
    // Counting is free at Anthropic: its input_tokens are recorded, not added to the run's totals.
    if (method === 'POST' && bare === '/v1/messages/count_tokens') return { api: 'count_tokens', billable: false };
    const listing = /^\/v1\/models(?:\/([^/]+))?$/.exec(bare);
    if (listing && method === 'GET') return listing[1] ? { api: 'models', model: listing[1], billable: false } : { api: 'models', billable: false };
    return null;
  },

  upstreamPath: (path) => path,
  forwardedHeaders: ['anthropic-version', 'anthropic-beta'],
  // Claude Code's `?beta=true`, and the model listing's paging.
  queryParameters: ['beta', 'limit', 'after_id', 'before_id'],

  credential(headers: IncomingHttpHeaders, _query) {
    const apiKey = first(headers['x-api-key']);
    if (apiKey) return apiKey;
    const bearer = /^Bearer\s+(.+)$/i.exec(first(headers.authorization) ?? '');
    return bearer?.[1].trim() || undefined;
  },

  authorize(headers, _query, key) {
    for (const name of Object.keys(headers)) {
      const lower = name.toLowerCase();
      if (lower === 'x-api-key' || lower === 'authorization') delete headers[name];
    }
    headers['x-api-key'] = key;
  },

  requestFacts(_route: ApiRoute, body) {
    const request = asObject(body);
    const messages = asArray(request.messages).map(asObject);
    const last = messages[messages.length - 1] ?? {};
    const trailing = last.role === 'user' ? blocksOf(last.content) : [];
    const facts: RequestFacts = {
      model: typeof request.model === 'string' ? request.model : null,
      stream: request.stream === true,
      messages: messages.length,
      toolResults: trailing.filter((b) => b.type === 'tool_result').map((b) => toolResultOf(b, messages[messages.length - 2])),
      maxOutputTokens: count(request.max_tokens),
    };
    const userText = userTextOf(trailing);
    if (userText !== null) facts.userText = userText;
    return facts;
  },

  responseFacts(route, status, body, streamed) {
    const facts = emptyResponseFacts();
    if (streamed) readStream(facts, sseData(body));
    else readJson(facts, route, parseJson(body));
    if (facts.error === undefined && status >= 400) facts.error = `HTTP ${status}`;
    return facts;
  },

  errorBody(kind: GatewayErrorKind, status: number, message: string) {
    const type = kind === 'upstream' && status === 529 ? 'overloaded_error' : ERROR_TYPE[kind];
    return { type: 'error', error: { type, message }, request_id: null };
  },
};

/** Anthropic's error types (docs: API errors; the SDK's ErrorObject union). */
const ERROR_TYPE: Record<GatewayErrorKind, string> = {
  auth: 'authentication_error',
  not_found: 'not_found_error',
  bad_request: 'invalid_request_error',
  limit: 'rate_limit_error',
  upstream: 'api_error',
  timeout: 'timeout_error',
};

// ── request ───────────────────────────────────────────────────────────────────────────────────

/** A message's content as blocks: a plain string is one text block. */
function blocksOf(content: unknown): Json[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return asArray(content).map(asObject);
}

/**
 * The user's own words at the end of the request: the text blocks after the last tool result,
 * without the `<system-reminder>` blocks Claude Code puts before the prompt (they are context, and
 * would push the prompt out of the recorded excerpt).
 */
function userTextOf(trailing: Json[]): string | null {
  const lastResult = trailing.map((b) => b.type).lastIndexOf('tool_result');
  const texts = trailing
    .slice(lastResult + 1)
    .filter((b) => b.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text as string)
    .filter((text) => !/^\s*<system-reminder>[\s\S]*<\/system-reminder>\s*$/.test(text));
  return texts.length ? texts.join('\n\n') : null;
}

/** A tool_result block, named after the tool_use it answers in the assistant message before it. */
function toolResultOf(block: Json, previous: Json | undefined): ToolResult {
  const result: ToolResult = { output: contentText(block.content) };
  if (typeof block.tool_use_id === 'string') {
    result.id = block.tool_use_id;
    const use = blocksOf(previous?.content).find((b) => b.type === 'tool_use' && b.id === block.tool_use_id);
    if (typeof use?.name === 'string') result.name = use.name;
  }
  if (block.is_error === true) result.isError = true;
  return result;
}

/** A tool result's content: a string, or blocks whose texts are joined (an image shows as `[image]`). */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  return asArray(content)
    .map(asObject)
    .map((b) => (typeof b.text === 'string' ? b.text : `[${typeof b.type === 'string' ? b.type : 'block'}]`))
    .join('\n');
}

// ── response ──────────────────────────────────────────────────────────────────────────────────

function readJson(facts: ResponseFacts, route: ApiRoute, body: Json): void {
  if (readError(facts, body)) return;
  if (route.api === 'count_tokens') {
    facts.usage.inputTokens = count(body.input_tokens);
    facts.usageFinal = true;
    return;
  }
  if (route.api !== 'messages') return;
  if (typeof body.model === 'string') facts.model = body.model;
  mergeUsage(facts.usage, asObject(body.usage));
  facts.usageFinal = count(asObject(body.usage).output_tokens) !== null;
  if (typeof body.stop_reason === 'string') facts.stopReason = body.stop_reason;
  const blocks = asArray(body.content).map(asObject);
  facts.text = joinTexts(blocks.map((b) => (b.type === 'text' && typeof b.text === 'string' ? b.text : null)));
  facts.toolCalls = blocks.filter(isToolUse).map((b) => toolCallOf(b, JSON.stringify(b.input ?? {})));
}

/** `{type: "error", error: {type, message}}`, the whole body of an error answer or a stream's last event. */
function readError(facts: ResponseFacts, event: Json): boolean {
  if (event.type !== 'error') return false;
  const error = asObject(event.error);
  facts.error = typeof error.message === 'string' ? error.message : typeof error.type === 'string' ? error.type : 'error';
  return true;
}

/** A content block being streamed: its start, and the text or tool-input JSON its deltas add. */
interface OpenBlock {
  start: Json;
  text: string;
  json: string;
}

/**
 * Folds a message stream: message_start carries the model and the input-side usage, each
 * content_block_start/delta builds a block (text_delta text, input_json_delta a tool's input in
 * fragments), message_delta the stop reason and the cumulative usage (output_tokens, and in newer
 * streams the input-side counts again), an `error` event a failure after the 200.
 */
function readStream(facts: ResponseFacts, events: Json[]): void {
  const blocks = new Map<number, OpenBlock>();
  for (const event of events) {
    if (readError(facts, event)) continue;
    if (event.type === 'message_start') {
      const message = asObject(event.message);
      if (typeof message.model === 'string') facts.model = message.model;
      mergeUsage(facts.usage, asObject(message.usage));
    } else if (event.type === 'content_block_start') {
      blocks.set(indexOf(event), { start: asObject(event.content_block), text: '', json: '' });
    } else if (event.type === 'content_block_delta') {
      addDelta(blocks.get(indexOf(event)), asObject(event.delta));
    } else if (event.type === 'message_delta') {
      const stop = asObject(event.delta).stop_reason;
      if (typeof stop === 'string') facts.stopReason = stop;
      mergeUsage(facts.usage, asObject(event.usage));
      // message_start's usage is a running count (output_tokens 1); message_delta's is the final one.
      if (count(asObject(event.usage).output_tokens) !== null) facts.usageFinal = true;
    }
  }
  const ordered = [...blocks.entries()].sort(([a], [b]) => a - b).map(([, block]) => block);
  facts.text = joinTexts(ordered.map((b) => (b.start.type === 'text' ? String(b.start.text ?? '') + b.text : null)));
  facts.toolCalls = ordered.filter((b) => isToolUse(b.start)).map((b) => toolCallOf(b.start, streamedInput(b)));
}

function addDelta(block: OpenBlock | undefined, delta: Json): void {
  if (!block) return;
  if (delta.type === 'text_delta' && typeof delta.text === 'string') block.text += delta.text;
  if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') block.json += delta.partial_json;
}

/** The tool input its fragments assemble (compacted when it parses), else the input the start gave. */
function streamedInput(block: OpenBlock): string {
  if (!block.json) return JSON.stringify(block.start.input ?? {});
  try {
    return JSON.stringify(JSON.parse(block.json));
  } catch {
    return block.json;
  }
}

/** Client tools (`tool_use`) and Anthropic's server tools (`server_tool_use`, e.g. web search). */
function isToolUse(block: Json): boolean {
  return block.type === 'tool_use' || block.type === 'server_tool_use';
}

function toolCallOf(block: Json, input: string): ToolCall {
  const call: ToolCall = { name: typeof block.name === 'string' ? block.name : '', input };
  if (typeof block.id === 'string') call.id = block.id;
  return call;
}

/** Separate text blocks are separate paragraphs; null when the answer had no text. */
function joinTexts(texts: (string | null)[]): string | null {
  const present = texts.filter((t): t is string => t !== null);
  return present.length ? present.join('\n\n') : null;
}

/**
 * Anthropic's `input_tokens` excludes cached input: cache reads and cache writes are counted (and
 * priced) apart. A later value wins, as message_delta repeats the counts cumulatively.
 */
function mergeUsage(usage: Usage, raw: Json): void {
  usage.inputTokens = count(raw.input_tokens) ?? usage.inputTokens;
  usage.outputTokens = count(raw.output_tokens) ?? usage.outputTokens;
  usage.cacheReadTokens = count(raw.cache_read_input_tokens) ?? usage.cacheReadTokens;
  usage.cacheWriteTokens = count(raw.cache_creation_input_tokens) ?? usage.cacheWriteTokens;
}

function indexOf(event: Json): number {
  return typeof event.index === 'number' ? event.index : 0;
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
