import type { IncomingHttpHeaders } from 'node:http';
import { emptyResponseFacts, type ApiRoute, type GatewayErrorKind, type ProviderCodec, type RequestFacts, type ResponseFacts, type ToolCall, type ToolResult, type Usage } from '../protocol.js';
import { sseData, count, asObject, asArray, type Json } from './json.js';

/**
 * The Gemini API (generativelanguage.googleapis.com) as Gemini CLI and the google-genai SDKs speak it:
 * the model is part of the URL (`/v1beta/models/<model>:<method>`), the key is the `x-goog-api-key`
 * header or the `key` query parameter, and `streamGenerateContent?alt=sse` streams one whole
 * GenerateContentResponse per `data:` line (without `alt=sse`, one JSON array of them).
 */

const MODEL_METHOD = /^\/(v1beta|v1|v1alpha)\/models\/([^/:]+):(generateContent|streamGenerateContent|countTokens)$/;
const MODELS = /^\/(v1beta|v1|v1alpha)\/models(?:\/([^/:]+))?$/;


export const geminiCodec: ProviderCodec = {
  provider: 'gemini',
  defaultUpstream: 'https://generativelanguage.googleapis.com',

  route(method, path) {
    const call = MODEL_METHOD.exec(path);
    if (call && method === 'POST') {
      const api = call[3];
      // countTokens is free and generates nothing: like a listing, it is recorded but not accounted.
      return { api, model: decodeModel(call[2]), streamByPath: api === 'streamGenerateContent', billable: api !== 'countTokens' };
    }
    const listing = MODELS.exec(path);
    if (listing && method === 'GET') {
      return listing[2] ? { api: 'models', model: decodeModel(listing[2]), billable: false } : { api: 'models', billable: false };
    }
    return null;
  },

  upstreamPath: (path) => path,
  // Never x-goog-user-project: it chooses the project the harness's key bills.
  forwardedHeaders: [],
  queryParameters: ['alt', 'key', 'pageSize', 'pageToken'],

  credential(headers: IncomingHttpHeaders, query) {
    const header = headers['x-goog-api-key'];
    const value = Array.isArray(header) ? header[0] : header;
    return value || query.get('key') || undefined;
  },

  authorize(headers, query, key) {
    for (const name of Object.keys(headers)) {
      const lower = name.toLowerCase();
      if (lower === 'x-goog-api-key' || lower === 'authorization') delete headers[name];
    }
    query.delete('key');
    headers['x-goog-api-key'] = key;
  },

  requestFacts(route, body) {
    const request = asObject(body);
    // countTokens takes `contents`, or a whole `generateContentRequest`.
    const contents = asArray(request.contents ?? asObject(request.generateContentRequest).contents);
    const last = asObject(contents[contents.length - 1]);
    const trailing = last.role === 'model' ? [] : asArray(last.parts).map(asObject);
    const facts: RequestFacts = {
      model: route.model ?? null,
      stream: route.streamByPath === true,
      messages: contents.length,
      toolResults: trailing.filter((p) => p.functionResponse).map((p) => toolResultOf(asObject(p.functionResponse))),
      maxOutputTokens: maxOutputTokensOf(asObject(request.generationConfig)),
    };
    const userText = textOf(trailing, '\n');
    if (userText !== null) facts.userText = userText;
    return facts;
  },

  responseFacts(route, status, body, streamed) {
    const facts = emptyResponseFacts();
    if (route.api === 'models') return facts;
    const chunks = streamed ? sseData(body) : jsonChunks(body);
    if (route.api === 'countTokens') {
      facts.usage.inputTokens = count(chunks[0]?.totalTokens);
      facts.usageFinal = facts.usage.inputTokens !== null;
    } else chunks.forEach((chunk) => addChunk(facts, chunk));
    // An error is the whole body, or the last event of a stream that failed midway.
    const error = chunks.map((c) => asObject(c.error)).find((e) => Object.keys(e).length > 0);
    if (error || status >= 400) facts.error = typeof error?.message === 'string' ? error.message : `HTTP ${status}`;
    return facts;
  },

  errorBody(kind: GatewayErrorKind, status: number, message: string) {
    return { error: { code: status, message, status: ERROR_STATUS[kind] } };
  },
};

/** google.rpc.Code names as the Gemini API puts them in `error.status`. */
const ERROR_STATUS: Record<GatewayErrorKind, string> = {
  auth: 'UNAUTHENTICATED',
  not_found: 'NOT_FOUND',
  bad_request: 'INVALID_ARGUMENT',
  limit: 'RESOURCE_EXHAUSTED',
  upstream: 'INTERNAL',
  timeout: 'DEADLINE_EXCEEDED',
};

/** generationConfig's maxOutputTokens for each of its candidateCount answers; null without one. */
function maxOutputTokensOf(config: Json): number | null {
  const max = count(config.maxOutputTokens);
  return max === null ? null : max * Math.max(1, count(config.candidateCount) ?? 1);
}

function decodeModel(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** One GenerateContentResponse, or the JSON array streamGenerateContent answers without `alt=sse`. */
function jsonChunks(body: string): Json[] {
  try {
    const parsed: unknown = JSON.parse(body);
    return (Array.isArray(parsed) ? parsed : [parsed]).map(asObject);
  } catch {
    return [];
  }
}

/**
 * Folds one streamed chunk into the facts. Every chunk repeats usageMetadata with the totals so far,
 * so the last value of each count wins; text and function calls arrive in pieces and are appended.
 */
function addChunk(facts: ResponseFacts, chunk: Json): void {
  if (typeof chunk.modelVersion === 'string') facts.model = chunk.modelVersion;
  mergeUsage(facts.usage, asObject(chunk.usageMetadata));
  const candidate = asObject(asArray(chunk.candidates)[0]);
  if (typeof candidate.finishReason === 'string') facts.stopReason = candidate.finishReason;
  // Every chunk repeats the usage so far: the counts are final from the chunk that finishes the answer on.
  if (facts.stopReason !== null && count(asObject(chunk.usageMetadata).promptTokenCount) !== null) facts.usageFinal = true;
  const parts = asArray(asObject(candidate.content).parts).map(asObject);
  const text = textOf(parts, '');
  if (text !== null) facts.text = (facts.text ?? '') + text;
  facts.toolCalls.push(...parts.filter((p) => p.functionCall).map((p) => toolCallOf(asObject(p.functionCall))));
}

/**
 * promptTokenCount includes the cached part: the codecs report input as what was not read from the
 * cache. Thinking tokens are billed as output, so they count as output here.
 */
function mergeUsage(usage: Usage, meta: Json): void {
  const prompt = count(meta.promptTokenCount);
  const candidates = count(meta.candidatesTokenCount);
  const thoughts = count(meta.thoughtsTokenCount);
  const cached = count(meta.cachedContentTokenCount);
  if (prompt !== null) usage.inputTokens = Math.max(0, prompt - (cached ?? 0));
  if (candidates !== null || thoughts !== null) usage.outputTokens = (candidates ?? 0) + (thoughts ?? 0);
  if (cached !== null) usage.cacheReadTokens = cached;
}

/**
 * The visible text of some parts (thought summaries left out), or null when there is none. A request's
 * parts are separate texts (Gemini CLI sends its session context, then the prompt); a streamed
 * answer's parts are pieces of one text.
 */
function textOf(parts: Json[], separator: string): string | null {
  const texts = parts.filter((p) => typeof p.text === 'string' && p.thought !== true).map((p) => p.text as string);
  return texts.length ? texts.join(separator) : null;
}

function toolCallOf(call: Json): ToolCall {
  const tool: ToolCall = { name: typeof call.name === 'string' ? call.name : '', input: JSON.stringify(call.args ?? {}) };
  if (typeof call.id === 'string') tool.id = call.id;
  return tool;
}

/** A function's result is free-form JSON; by convention `{error: …}` reports a failure. */
function toolResultOf(answer: Json): ToolResult {
  const response = answer.response ?? {};
  const result: ToolResult = { output: JSON.stringify(response) };
  if (typeof answer.id === 'string') result.id = answer.id;
  if (typeof answer.name === 'string') result.name = answer.name;
  if (asObject(response).error !== undefined) result.isError = true;
  return result;
}
