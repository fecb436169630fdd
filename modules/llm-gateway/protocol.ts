import type { IncomingHttpHeaders } from 'node:http';

/**
 * What the gateway needs to know of one provider's HTTP API: which requests it serves, where the
 * agent's credential is and where the harness's goes, and how to read the facts of a request and
 * of its response (JSON, or a server-sent event stream read whole once it has ended). Pure: no I/O.
 * One codec per provider under protocols/; the gateway (gateway.ts) does the forwarding.
 */
export type Provider = 'anthropic' | 'openai' | 'gemini';
export const PROVIDERS: readonly Provider[] = ['anthropic', 'openai', 'gemini'];

export interface Usage {
  inputTokens: number | null;
  outputTokens: number | null;
  cacheReadTokens: number | null;
  cacheWriteTokens: number | null;
}

export interface ToolCall {
  id?: string;
  name: string;
  /** The call's arguments as JSON text (the gateway cuts it to 2000 characters). */
  input: string;
}

export interface ToolResult {
  id?: string;
  name?: string;
  output: string;
  isError?: boolean;
}

/** A request the codec serves: the API it belongs to, and the model when the URL names it (Gemini). */
export interface ApiRoute {
  /** messages, count_tokens, chat.completions, responses, generateContent, streamGenerateContent, countTokens, models */
  api: string;
  model?: string;
  /** The URL alone says the answer streams (Gemini's streamGenerateContent). */
  streamByPath?: boolean;
  /** Whether the call is accounted as a model call (false for model listings). */
  billable: boolean;
}

export interface RequestFacts {
  model: string | null;
  stream: boolean;
  /** Number of messages (or contents / input items) in the request. */
  messages: number;
  /** The user's text at the end of the request, when the request ends with one (a new prompt). */
  userText?: string;
  /** Tool results at the end of the request: the answers to the previous call's tool calls. */
  toolResults: ToolResult[];
  /**
   * The most tokens the request lets the model generate over all the answers it asks for (the
   * protocol's maximum times its number of choices); null when the request sets no maximum.
   */
  maxOutputTokens?: number | null;
}

export interface ResponseFacts {
  model: string | null;
  usage: Usage;
  stopReason: string | null;
  /** The assistant's text (the gateway cuts it to 4000 characters); null when there was none. */
  text: string | null;
  toolCalls: ToolCall[];
  /** The provider's error message when the body is an error. */
  error?: string;
  /**
   * The answer carried the provider's final usage (a stream's last usage event, a whole JSON
   * answer's usage). Absent: final when any count is known.
   */
  usageFinal?: boolean;
}

/** Facts before anything of a response is read: every codec starts from these. */
export function emptyResponseFacts(): ResponseFacts {
  return {
    model: null,
    usage: { inputTokens: null, outputTokens: null, cacheReadTokens: null, cacheWriteTokens: null },
    stopReason: null,
    text: null,
    toolCalls: [],
    usageFinal: false,
  };
}

export type GatewayErrorKind = 'auth' | 'not_found' | 'bad_request' | 'limit' | 'upstream' | 'timeout';

export interface ProviderCodec {
  readonly provider: Provider;
  /** The default upstream base URL (A2RL_LLM_<PROVIDER>_URL overrides it). */
  readonly defaultUpstream: string;
  /**
   * The API a request addresses, given its method and its path below the gateway's `/<provider>`
   * prefix (query string excluded); null when the codec does not serve it (the gateway answers 404).
   */
  route(method: string, path: string): ApiRoute | null;
  /**
   * The path to append to the upstream base URL: the same path for Anthropic and Gemini (their base
   * URLs end at the host); without the leading `/v1` for OpenAI, whose base URLs end in `/v1`
   * (`https://api.openai.com/v1`, a vLLM or LiteLLM server's `/v1`, OpenRouter's `/api/v1`).
   */
  upstreamPath(path: string): string;
  /**
   * The agent's headers that go upstream besides content-type, accept and user-agent (lower case):
   * the protocol's own (version, beta flags), never account, organisation, project or billing ones.
   */
  readonly forwardedHeaders: readonly string[];
  /** The query parameters the provider's routes take (others are answered 400 and never forwarded). */
  readonly queryParameters: readonly string[];
  /** The credential the agent sent (API-key header, bearer token, or `key` query parameter). */
  credential(headers: IncomingHttpHeaders, query: URLSearchParams): string | undefined;
  /** Headers to send upstream with the harness's key (the agent's credential removed; the query too). */
  authorize(headers: Record<string, string>, query: URLSearchParams, key: string): void;
  requestFacts(route: ApiRoute, body: unknown): RequestFacts;
  /** `body` is the whole response as text; `streamed` when it is a server-sent event stream. */
  responseFacts(route: ApiRoute, status: number, body: string, streamed: boolean): ResponseFacts;
  /** The provider's own error shape, so the agent's CLI reports the gateway's refusals as its provider's. */
  errorBody(kind: GatewayErrorKind, status: number, message: string): unknown;
}
