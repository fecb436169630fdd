/**
 * Scripted fake upstreams of the three model providers (fake-anthropic.ts, fake-openai.ts,
 * fake-gemini.ts), shared shape. A fake drives a real agent CLI through a fixed session: while the
 * request offers tools, the n-th step of `script` (n = the number of tool results the request
 * carries) is answered with one call of the CLI's shell tool running that command; once the script
 * is done, with `finalText` and the end of the turn. Requests without tools (titles, summaries,
 * classifiers a CLI makes on the side) get a short text answer. Every answer reports the token
 * usage it was given, so a test can compare what the ledger recorded with what the fake sent.
 */
export interface FakeLlmOptions {
  /** Shell commands, one per turn, run through the CLI's own shell tool. */
  script: string[];
  finalText?: string;
  /** normal: follow the script; hang: accept every request and never answer; error: answer 500 in the provider's error shape. */
  mode?: 'normal' | 'hang' | 'error';
  /**
   * Usage reported for the n-th answer (0-based over all answers), given the request's body. Default:
   * input 1000 + 100·n, output 50 + n. `usageFromRequest` (serve.ts) reports a provider's honest shape.
   */
  usage?: (n: number, request: unknown) => { input: number; output: number };
  /**
   * Awaited before the part of an answer that carries its final usage: a stream sends its content,
   * then waits (a slow provider); a JSON answer waits before it is sent. The answer is then sent to
   * its end even when the client has gone (FakeLlmCall.finished says whether it was written whole).
   */
  hold?: (call: FakeLlmCall) => Promise<void> | undefined;
  /**
   * Awaited before a request is handled at all, given its path and parsed body: until it resolves the
   * request is neither recorded in `calls` nor answered (a provider that has not begun to answer).
   */
  before?: (path: string, request: unknown) => Promise<void> | undefined;
  /**
   * The text answering a request that offers no tools, given its body (OpenAI fake only). Default:
   * 'OK.'. An agent system that asks its model for JSON or code without tools (R&D-Agent) is scripted here.
   */
  text?: (request: unknown) => string;
  /** The model the answers name. Default: the model requested. */
  model?: string;
  /** The API key the fake requires (the harness's upstream key); other keys get 401. Default: any. */
  expectKey?: string;
  port?: number;
}

export interface FakeLlmCall {
  /** Request path, query string excluded. */
  path: string;
  model: string | null;
  stream: boolean;
  status: number;
  /** The key the request carried was `expectKey` (always true without one). */
  authOk: boolean;
  /** Names of the tools the request offered. */
  tools: string[];
  /** The tool the answer called, and the command it was given. */
  toolCall?: { name: string; command: string };
  /** Usage the answer reported; absent for errors, hangs and non-model endpoints. */
  usage?: { input: number; output: number };
  /** The request's headers as they arrived (lower-case names). */
  headers: Record<string, string | string[] | undefined>;
  /** The request target as it arrived (path and query). */
  url: string;
  /** The answer was written to its end (false while it is held, or when the connection broke first). */
  finished: boolean;
  /** The request's parsed JSON body (undefined without one): what the CLI sent, e.g. the conversation it resumed. */
  body?: unknown;
}

export interface FakeLlmServer {
  /** http://127.0.0.1:<port> — the provider's base URL as its SDKs take it (OpenAI: add `/v1`). */
  url: string;
  /** Every request, in arrival order. */
  calls: FakeLlmCall[];
  close(): Promise<void>;
}
