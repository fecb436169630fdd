import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { EvaluatorError } from '../../tasks/task-pack.js';
import { rejection } from '../../test/servers/processes.js';
import { startVllmLoraTestServer, type VllmLoraTestServer } from '../../test/servers/vllm-lora-test-server.js';
import { createEvaluationContext } from './model-server.js';
import { OpenAiClient } from './openai-client.js';
import { loadServingConfig } from './serving.config.js';

const BASE = { rules: [], default: 'base model answer' };
const TUNED = { rules: [{ contains: '2+2', reply: 'tuned: 4' }], default: 'tuned answer' };

let root: string;
let servers: VllmLoraTestServer[] = [];
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-runtime-lora-'));
});
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});
afterAll(() => rm(root, { recursive: true, force: true }));

let n = 0;
async function dir(files: Record<string, string>): Promise<string> {
  const d = await mkdtemp(path.join(root, `ckpt-${n++}-`));
  for (const [name, content] of Object.entries(files)) await writeFile(path.join(d, name), content);
  return d;
}

async function endpoint(runtimeLora: boolean): Promise<VllmLoraTestServer> {
  const server = await startVllmLoraTestServer({ baseAnswers: BASE, runtimeLora });
  servers.push(server);
  return server;
}

const context = (server: VllmLoraTestServer, baseModelDir?: string) =>
  createEvaluationContext(loadServingConfig({ A2RL_INFERENCE_URL: `${server.baseUrl}/v1`, A2RL_INFERENCE_LORA: 'runtime' }), 'cpu', {}, { baseModelDir });

describe('grading a LoRA adapter through an external vLLM with runtime LoRA loading', () => {
  it('loads the submitted adapter under a fresh name, requests it by that name, and unloads it on stop()', async () => {
    const server = await endpoint(true);
    const adapter = await dir({ 'adapter_config.json': '{"r": 16}', 'adapter_model.safetensors': '', 'answers.json': JSON.stringify(TUNED) });
    const model = await context(server).serve(adapter);
    expect(model.baseUrl).toBe(server.baseUrl);
    expect(model.model).toMatch(/^a2rl-[0-9a-f-]{36}$/);
    expect((await new OpenAiClient(model).complete('2+2=')).text).toBe('tuned: 4');
    await model.stop();
    await model.stop(); // once
    expect(server.requests.map((r) => `${r.method} ${r.route}`)).toEqual(['GET /v1/models', 'POST /v1/load_lora_adapter', 'POST /v1/completions', 'POST /v1/unload_lora_adapter']);
    expect(server.requests[1]!.body).toEqual({ lora_name: model.model, lora_path: adapter });
    expect(server.requests[2]!.body).toMatchObject({ model: model.model, prompt: '2+2=', temperature: 0 });
    expect(server.requests[3]!.body).toEqual({ lora_name: model.model });
    expect(server.loaded.size).toBe(0);
  });

  it('grades the unchanged base model as the endpoint\'s base model, and refuses any other full-weights checkpoint', async () => {
    const server = await endpoint(true);
    const base = await dir({ 'config.json': '{}', 'model.safetensors': 'weights' });
    const copy = await dir({ 'config.json': '{}', 'model.safetensors': 'weights' });
    const model = await context(server, base).serve(copy);
    expect(model.model).toBe('served-base');
    expect((await new OpenAiClient(model).chat([{ role: 'user', content: 'hi' }])).text).toBe('base model answer');
    const tuned = await dir({ 'config.json': '{}', 'model.safetensors': 'other weights' });
    const err = await rejection(context(server, base).serve(tuned));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/cannot grade a full-weights checkpoint/);
    expect(server.requests.filter((r) => r.route === '/v1/load_lora_adapter')).toEqual([]);
  });

  it('says so when the endpoint has no runtime LoRA API (VLLM_ALLOW_RUNTIME_LORA_UPDATING off): an evaluator error, not the agent\'s', async () => {
    const server = await endpoint(false);
    const adapter = await dir({ 'adapter_config.json': '{}', 'adapter_model.safetensors': '', 'answers.json': JSON.stringify(TUNED) });
    const err = await rejection(context(server).serve(adapter));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/could not load the submitted LoRA adapter: HTTP 404 \(is the server started with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True\?\)/);
  });
});
