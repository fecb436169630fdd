import type { IncomingMessage, ServerResponse } from 'node:http';
import { endAnswer, requestSeen, serveFake, sse, usageOf } from './serve.js';
import type { FakeLlmCall, FakeLlmOptions, FakeLlmServer } from './types.js';

type Json = Record<string, unknown>;

/**
 * A scripted Gemini API (see types.ts for the script's rules) on the paths Gemini CLI calls:
 * `/v1beta/models/<model>:generateContent`, `:streamGenerateContent` (`?alt=sse`: one whole
 * GenerateContentResponse per event; without it, one JSON array), `:countTokens`, and the model
 * listing. The shell tool is Gemini CLI's `run_shell_command {command, description}`, or whichever
 * offered function looks like a shell. Requests for JSON (the CLI's next-speaker and loop checks ask
 * with a `responseJsonSchema`) get a minimal object of that schema.
 */
export async function startFakeGemini(options: FakeLlmOptions): Promise<FakeLlmServer> {
  let answers = 0;
  const nextUsage = (request: Json) => usageOf(options, answers++, request);
  return serveFake(options, (req, body, res, calls) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const call: FakeLlmCall = { path: url.pathname, model: null, stream: false, status: 200, authOk: keyOk(req, url, options), tools: [], ...requestSeen(req, body) };
    calls.push(call);
    const method = /^\/v1(?:beta|alpha)?\/models\/([^/:]+):(generateContent|streamGenerateContent|countTokens)$/.exec(url.pathname);
    const request = (body ?? {}) as Json;
    if (method) {
      call.model = decodeURIComponent(method[1]);
      call.stream = method[2] === 'streamGenerateContent';
      call.tools = functionDeclarations(request).map((d) => String(d.name));
    }
    if (!call.authOk) return answerError(res, call, 401, 'UNAUTHENTICATED', 'API key not valid. Please pass a valid API key.');
    if (options.mode === 'hang') {
      call.status = 0; // never answered; close() ends the connection
      return;
    }
    if (options.mode === 'error') return answerError(res, call, 500, 'INTERNAL', 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting');
    if (method && req.method === 'POST') {
      if (method[2] === 'countTokens') return answerJson(res, { totalTokens: Math.ceil(JSON.stringify(request).length / 4) });
      return generate(url, request, res, call, options, nextUsage);
    }
    if (/^\/v1(?:beta|alpha)?\/models$/.test(url.pathname) && req.method === 'GET') return answerJson(res, modelListing());
    return answerError(res, call, 404, 'NOT_FOUND', `${req.method} ${url.pathname} is not a Gemini API method`);
  });
}

function keyOk(req: IncomingMessage, url: URL, options: FakeLlmOptions): boolean {
  if (options.expectKey === undefined) return true;
  const header = req.headers['x-goog-api-key'];
  return header === options.expectKey || url.searchParams.get('key') === options.expectKey;
}

function generate(
  url: URL,
  request: Json,
  res: ServerResponse,
  call: FakeLlmCall,
  options: FakeLlmOptions,
  nextUsage: (request: Json) => { input: number; output: number },
): Promise<void> | void {
  const declarations = functionDeclarations(request);
  const parts = answerParts(request, declarations, options, call);
  const usage = nextUsage(request);
  call.usage = usage;
  const model = options.model ?? call.model ?? 'gemini-unknown';
  const final = {
    candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: usage.input, candidatesTokenCount: usage.output, totalTokenCount: usage.input + usage.output },
    modelVersion: model,
    responseId: `fake-${call.path.length}-${usage.input}`,
  };
  if (url.searchParams.get('alt') === 'sse' && call.stream) return streamAnswer(res, call, final, parts, usage.input, model, options);
  return Promise.resolve(options.hold?.(call)).then(() => answerJson(res, call.stream ? [final] : final, call));
}

/**
 * Streams as the Gemini API does: a text's first half in an event whose usageMetadata holds only the
 * prompt count, then the last event with the rest (function calls whole), finishReason and full usage.
 */
async function streamAnswer(res: ServerResponse, call: FakeLlmCall, final: Json, parts: Json[], input: number, model: string, options: FakeLlmOptions): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const text = parts.find((p) => typeof p.text === 'string')?.text as string | undefined;
  let rest = parts;
  if (text && text.length > 1) {
    const half = Math.ceil(text.length / 2);
    sse(res, { candidates: [{ content: { role: 'model', parts: [{ text: text.slice(0, half) }] }, index: 0 }], usageMetadata: { promptTokenCount: input, totalTokenCount: input }, modelVersion: model });
    rest = parts.map((p) => (p.text === text ? { text: text.slice(half) } : p));
  }
  await options.hold?.(call);
  sse(res, { ...final, candidates: [{ content: { role: 'model', parts: rest }, finishReason: 'STOP', index: 0 }] });
  endAnswer(res, call);
}

/** The script's next command as a shell call, a JSON object for a schema, or a short text. */
function answerParts(request: Json, declarations: Json[], options: FakeLlmOptions, call: FakeLlmCall): Json[] {
  const step = toolResultCount(request);
  const shell = shellTool(declarations);
  if (shell && step < options.script.length) {
    const command = options.script[step];
    call.toolCall = { name: String(shell.name), command };
    return [{ functionCall: { name: shell.name, args: shellArgs(shell, command, step) } }];
  }
  const config = (request.generationConfig ?? {}) as Json;
  if (config.responseMimeType === 'application/json') return [{ text: JSON.stringify(sampleOf(config.responseJsonSchema ?? config.responseSchema)) }];
  return [{ text: declarations.length ? (options.finalText ?? 'Done.') : 'OK.' }];
}

function functionDeclarations(request: Json): Json[] {
  const tools = Array.isArray(request.tools) ? (request.tools as Json[]) : [];
  return tools.flatMap((t) => (Array.isArray(t?.functionDeclarations) ? (t.functionDeclarations as Json[]) : []));
}

/**
 * The step: how many function calls the conversation carries results for so far. A result is counted
 * once per call id: Gemini CLI resuming a session cut off mid-turn sends the last result twice.
 */
function toolResultCount(request: Json): number {
  const contents = Array.isArray(request.contents) ? (request.contents as Json[]) : [];
  const results = contents.flatMap((c) => (Array.isArray(c?.parts) ? (c.parts as Json[]) : [])).filter((p) => p?.functionResponse);
  const ids = results.map((p, i) => (p.functionResponse as Json).id ?? `#${i}`);
  return new Set(ids).size;
}

function shellTool(declarations: Json[]): Json | undefined {
  return declarations.find((d) => d.name === 'run_shell_command') ?? declarations.find((d) => /shell|bash|terminal|exec/i.test(String(d.name)));
}

/** `command`, plus a `description` when the declaration has one (Gemini CLI shows it). */
function shellArgs(shell: Json, command: string, step: number): Json {
  const schema = (shell.parametersJsonSchema ?? shell.parameters ?? {}) as Json;
  const properties = (schema.properties ?? {}) as Json;
  return 'description' in properties ? { command, description: `Scripted step ${step + 1}` } : { command };
}

/** The smallest value of a JSON schema: first enum value, empty string, 0, false, [], required properties. */
function sampleOf(schema: unknown): unknown {
  const s = (schema ?? {}) as Json;
  if (Array.isArray(s.enum) && s.enum.length) return s.enum[0];
  const type = String(s.type ?? 'object').toLowerCase();
  if (type === 'string') return '';
  if (type === 'number' || type === 'integer') return 0;
  if (type === 'boolean') return false;
  if (type === 'array') return [];
  const properties = (s.properties ?? {}) as Json;
  const required = Array.isArray(s.required) ? (s.required as string[]) : Object.keys(properties);
  return Object.fromEntries(required.map((name) => [name, sampleOf(properties[name])]));
}

function modelListing(): Json {
  const model = (name: string) => ({ name: `models/${name}`, displayName: name, supportedGenerationMethods: ['generateContent', 'countTokens'] });
  return { models: [model('gemini-2.5-pro'), model('gemini-2.5-flash'), model('gemini-2.5-flash-lite')] };
}

function answerJson(res: ServerResponse, body: unknown, call?: FakeLlmCall): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  if (call) endAnswer(res, call, JSON.stringify(body));
  else res.end(JSON.stringify(body));
}

function answerError(res: ServerResponse, call: FakeLlmCall, code: number, status: string, message: string): void {
  call.status = code;
  res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code, message, status } }));
}
