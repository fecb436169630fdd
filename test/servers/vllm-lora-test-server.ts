import { readFileSync } from 'node:fs';
import http from 'node:http';
import { listenLocal } from './local-http.js';
import path from 'node:path';
import { replyFor, type ScriptedAnswers } from './fake-vllm.mjs';

export interface RecordedRequest {
  method: string;
  route: string;
  body: Record<string, unknown> | null;
}

export interface VllmLoraTestServer {
  baseUrl: string;
  /** Every request in arrival order. */
  requests: RecordedRequest[];
  /** Adapters loaded now, by name → path. */
  loaded: Map<string, string>;
  close(): Promise<void>;
}

/**
 * A scripted stand-in for a running `vllm serve <base>` (tests of A2RL_INFERENCE_URL): it serves
 * `baseModel` (replies from `baseAnswers`) and, with `runtimeLora` (vLLM's
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING=True), `POST /v1/load_lora_adapter {lora_name, lora_path}` and
 * `POST /v1/unload_lora_adapter {lora_name}`; a loaded adapter is listed with `parent` and answers from
 * `<lora_path>/answers.json`. Without runtimeLora those routes are FastAPI's 404 `{"detail":"Not Found"}`.
 */
export async function startVllmLoraTestServer(options: { baseModel?: string; baseAnswers: ScriptedAnswers; runtimeLora: boolean }): Promise<VllmLoraTestServer> {
  const baseModel = options.baseModel ?? 'served-base';
  const requests: RecordedRequest[] = [];
  const loaded = new Map<string, string>();
  const answersOf = new Map<string, ScriptedAnswers>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const route = (req.url ?? '').split('?')[0]!;
      let body: Record<string, unknown> | null = null;
      try {
        body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>) : null;
      } catch {
        body = null;
      }
      requests.push({ method: req.method ?? '', route, body });
      const send = (status: number, payload: unknown) => {
        res.writeHead(status, { 'content-type': typeof payload === 'string' ? 'text/plain' : 'application/json' });
        res.end(typeof payload === 'string' ? payload : JSON.stringify(payload));
      };
      if (req.method === 'GET' && route === '/v1/models') {
        const data = [{ id: baseModel, object: 'model', root: '/models/base', parent: null }, ...[...loaded].map(([id, root]) => ({ id, object: 'model', root, parent: baseModel }))];
        return send(200, { object: 'list', data });
      }
      if (route === '/v1/load_lora_adapter' || route === '/v1/unload_lora_adapter') {
        if (!options.runtimeLora || req.method !== 'POST') return send(404, { detail: 'Not Found' });
        const name = String(body?.lora_name ?? '');
        if (route === '/v1/unload_lora_adapter') {
          if (!loaded.delete(name)) return send(404, { error: { message: `The lora adapter '${name}' cannot be found.`, type: 'NotFoundError' } });
          return send(200, `Success: LoRA adapter '${name}' removed successfully.`);
        }
        const dir = String(body?.lora_path ?? '');
        try {
          answersOf.set(name, JSON.parse(readFileSync(path.join(dir, 'answers.json'), 'utf8')) as ScriptedAnswers);
        } catch (err) {
          return send(400, { error: { message: `Loading lora ${name} failed: No adapter found for ${dir}: ${(err as Error).message}`, type: 'BadRequestError' } });
        }
        loaded.set(name, dir);
        return send(200, `Success: LoRA adapter '${name}' added successfully.`);
      }
      const chat = route === '/v1/chat/completions';
      if (req.method !== 'POST' || (!chat && route !== '/v1/completions')) return send(404, { detail: 'Not Found' });
      const model = String(body?.model ?? '');
      const answers = model === baseModel ? options.baseAnswers : answersOf.get(model);
      if (!answers || (model !== baseModel && !loaded.has(model))) return send(404, { error: { message: `The model \`${model}\` does not exist.`, type: 'NotFoundError' } });
      const prompt = chat ? ((body?.messages as { content?: unknown }[]) ?? []).map((m) => String(m?.content ?? '')).join('\n') : String(body?.prompt ?? '');
      const text = replyFor(answers, prompt);
      const choice = chat ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' } : { index: 0, text, finish_reason: 'stop' };
      return send(200, { id: 'cmpl-test', object: chat ? 'chat.completion' : 'text_completion', created: 0, model, choices: [choice], usage: { prompt_tokens: 1, completion_tokens: 1 } });
    });
  });
  return { ...(await listenLocal(server)), requests, loaded };
}
