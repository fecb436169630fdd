import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { EvaluatorError, InvalidCheckpointError, type ServedModel } from '../../tasks/task-pack.js';
import { startOpenAiTestServer, type OpenAiTestServer } from '../../test/servers/openai-test-server.js';
import { ConfigError } from '../settings/settings.port.js';
import { BASE_SERVED_NAME, createEvaluationContext, SERVED_MODEL_NAME } from './model-server.js';
import { OpenAiClient } from './openai-client.js';
import { loadServingConfig } from './serving.config.js';
import { processesWith, rejection } from '../../test/servers/processes.js';
import { until } from '../../test/testing/helpers.js';

const FAKE_VLLM = path.resolve('test/servers/fake-vllm.mjs');
const ANSWERS = { rules: [{ contains: '2+2', reply: 'The answer is 4.' }], default: 'I do not know.' };

let root: string;
let served: ServedModel[] = [];

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-serving-'));
});
afterEach(async () => {
  await Promise.all(served.map((s) => s.stop()));
  served = [];
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

let n = 0;
/** A checkpoint directory; its unique path is also the marker we look for in `ps`. */
async function checkpoint(files: Record<string, string> = { 'answers.json': JSON.stringify(ANSWERS) }): Promise<string> {
  const dir = await mkdtemp(path.join(root, `ckpt-${n++}-`));
  for (const [name, content] of Object.entries(files)) await writeFile(path.join(dir, name), content);
  return dir;
}

/** The server's own processes, without the sandbox's (bwrap, the bridge), which carry the same marker in their argv. */
const servers = (marker: string) => processesWith(marker).filter((line) => !/\bbwrap\b|server-bridge\.mjs/.test(line));

function context(mode = 'normal', extra = '', env: NodeJS.ProcessEnv = {}) {
  const config = loadServingConfig({
    A2RL_SERVE_COMMAND: `${process.execPath} ${FAKE_VLLM} {model_path} --port {port} --served-model-name {name} --mode ${mode} ${extra}`,
    // Generous: starting the sandbox and two Node processes on a busy machine; never-ready waits it out.
    A2RL_SERVE_READY_TIMEOUT: mode === 'never-ready' ? '6s' : '30s',
    ...env,
  });
  return createEvaluationContext(config, 'cpu', { stopGraceMs: 1_000, pollMs: 50 });
}

async function serve(ctx: ReturnType<typeof context>, dir: string, signal?: AbortSignal): Promise<ServedModel> {
  const model = await ctx.serve(dir, signal);
  served.push(model);
  return model;
}

describe('serving a checkpoint through the serve command', () => {
  it('starts the server, answers chat and completions greedily from the checkpoint, and stop() ends the whole process tree', async () => {
    const dir = await checkpoint();
    const model = await serve(context('normal', '--child'), dir);
    expect(model.model).toBe(SERVED_MODEL_NAME);
    expect(model.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const client = new OpenAiClient(model, 5_000);
    expect((await client.chat([{ role: 'user', content: 'What is 2+2?' }])).text).toBe('The answer is 4.');
    expect((await client.complete('Question: capital of Mars?')).text).toBe('I do not know.');
    expect(servers(dir).length).toBe(2); // server + its grandchild
    await model.stop();
    expect(processesWith(dir)).toEqual([]);
  });

  it('fails with EvaluatorError after the readiness timeout, reporting the server output, and leaves no process', async () => {
    const dir = await checkpoint();
    const err = await rejection(serve(context('never-ready', '--child'), dir));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/did not become ready within 6 s/);
    expect(err.message).toMatch(/loading weights/);
    expect(processesWith(dir)).toEqual([]);
  });

  it('fails with EvaluatorError when the server exits before becoming ready', async () => {
    const dir = await checkpoint({ 'config.json': '{}' }); // no answers.json: fake-vllm cannot "load" it
    const err = await rejection(serve(context(), dir));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/exited before becoming ready \(exit code 1\)/);
    expect(err.message).toMatch(/answers\.json/);
  });

  it('turns a server dying mid-evaluation into an EvaluatorError', async () => {
    const dir = await checkpoint();
    const model = await serve(context('die-after=1'), dir);
    const client = new OpenAiClient(model, 5_000);
    expect((await client.chat([{ role: 'user', content: '2+2' }])).text).toBe('The answer is 4.');
    const err = await rejection(client.chat([{ role: 'user', content: '2+2' }]));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/stopped answering/);
    await model.stop();
    expect(processesWith(dir)).toEqual([]);
  });

  it('kills a server that ignores SIGTERM once the grace has passed', async () => {
    const dir = await checkpoint();
    const model = await serve(context('ignore-sigterm'), dir);
    const started = Date.now();
    await model.stop();
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(processesWith(dir)).toEqual([]);
  });

  it('stops the server when the evaluation is aborted', async () => {
    const dir = await checkpoint();
    const abort = new AbortController();
    await serve(context('normal', '--child'), dir, abort.signal);
    expect(servers(dir).length).toBe(2);
    abort.abort();
    await until(() => `the servers to end: ${processesWith(dir).join('; ')}`, () => processesWith(dir).length === 0);
  });

  it('serves a LoRA adapter on the base model: --enable-lora --lora-modules a2rl-checkpoint=<adapter> with its rank rounded up', async () => {
    const base = await checkpoint({ 'config.json': '{}', 'model.safetensors': '' });
    const adapter = await checkpoint({ 'adapter_config.json': JSON.stringify({ r: 24 }), 'adapter_model.safetensors': '' });
    const script = `console.error('argv=' + JSON.stringify(process.argv.slice(1))); process.exit(1)`;
    const config = loadServingConfig({ A2RL_SERVE_COMMAND: `${process.execPath} -e "${script}" {model_path} --port {port} --served-model-name {name}`, A2RL_SERVE_READY_TIMEOUT: '5s' });
    const err = await rejection(createEvaluationContext(config, 'cpu', {}, { baseModelDir: base }).serve(adapter));
    const argv = JSON.parse(/argv=(\[.*\])/.exec(err.message)![1]!) as string[];
    expect(argv[0]).toBe(base);
    expect(argv.slice(-7)).toEqual(['--served-model-name', BASE_SERVED_NAME, '--enable-lora', '--lora-modules', `${SERVED_MODEL_NAME}=${adapter}`, '--max-lora-rank', '32']);
  });

  it('refuses an adapter without weights or with an unreadable config as the agent\'s mistake, and needs a base model for a real one', async () => {
    const noWeights = await checkpoint({ 'adapter_config.json': '{}' });
    expect(await rejection(serve(context(), noWeights))).toBeInstanceOf(InvalidCheckpointError);
    const garbled = await checkpoint({ 'adapter_config.json': '{r:', 'adapter_model.safetensors': '' });
    expect((await rejection(serve(context(), garbled))).message).toMatch(/adapter_config.json is not readable JSON/);
    const adapter = await checkpoint({ 'adapter_config.json': '{"r": 8}', 'adapter_model.safetensors': '' });
    const err = await rejection(serve(context(), adapter));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(processesWith(adapter)).toEqual([]);
  });

  it('never serves pickle weights: pickle-only checkpoints and adapters are the agent\'s mistake; pickles beside safetensors are left unread', async () => {
    const pickleOnly: Record<string, string>[] = [{ 'config.json': '{}', 'pytorch_model.bin': 'pickle' }, { 'adapter_config.json': '{"r": 8}', 'adapter_model.bin': 'pickle' }, { 'config.json': '{}', 'model.pt': 'x', 'answers.json': '{}' }];
    for (const files of pickleOnly) {
      const dir = await checkpoint(files);
      const err = await rejection(serve(context(), dir));
      expect(err).toBeInstanceOf(InvalidCheckpointError);
      expect(err.message).toMatch(/weights are pickle files \(.*\), which a2rl never loads \(unpickling runs code\): save them as safetensors/);
      expect(processesWith(dir)).toEqual([]);
    }
    const withOptimizer = await checkpoint({ 'config.json': '{}', 'model.safetensors': '', 'optimizer.pt': 'pickle', 'training_args.bin': 'pickle', 'answers.json': JSON.stringify(ANSWERS) });
    const model = await serve(context(), withOptimizer);
    expect((await new OpenAiClient(model).complete('2+2=')).text).toBe('The answer is 4.');
  });

  it('serves a merged checkpoint that still carries adapter_config.json', async () => {
    const dir = await checkpoint({ 'adapter_config.json': '{}', 'model.safetensors': '', 'answers.json': JSON.stringify(ANSWERS) });
    const model = await serve(context(), dir);
    expect((await new OpenAiClient(model).complete('2+2=')).text).toBe('The answer is 4.');
  });

  it('gives the server the grading device as CUDA_VISIBLE_DEVICES', async () => {
    const script = `console.error('cuda=' + process.env.CUDA_VISIBLE_DEVICES); process.exit(1)`;
    const config = loadServingConfig({ A2RL_SERVE_COMMAND: `${process.execPath} -e "${script}" {model_path} {port}`, A2RL_SERVE_READY_TIMEOUT: '5s' });
    const err = await rejection(createEvaluationContext(config, '3').serve(await checkpoint()));
    expect(err.message).toMatch(/cuda=3/);
  });

  it('reports a serve command that cannot be started as an EvaluatorError', async () => {
    const config = loadServingConfig({ A2RL_SERVE_COMMAND: 'a2rl-no-such-server {model_path} --port {port}', A2RL_SERVE_READY_TIMEOUT: '1s' });
    const err = await rejection(createEvaluationContext(config, '0').serve(await checkpoint()));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/cannot start the model server "a2rl-no-such-server"/);
  });
});

describe('serving through A2RL_INFERENCE_URL', () => {
  let server: OpenAiTestServer;
  beforeAll(async () => {
    server = await startOpenAiTestServer({ answers: ANSWERS, model: 'my-served-model' });
  });
  afterAll(() => server.close());

  it('refuses an endpoint that cannot load checkpoints at configuration time, in one line naming the way out', () => {
    const err = (() => {
      try {
        loadServingConfig({ A2RL_INFERENCE_URL: `${server.baseUrl}/v1` });
      } catch (e) {
        return e as Error;
      }
      throw new Error('accepted');
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toMatch(/^A2RL_INFERENCE_URL: an external endpoint cannot load submitted checkpoints: .*A2RL_INFERENCE_LORA=runtime/);
    expect(err.message).not.toMatch(/\n/);
    expect(() => loadServingConfig({ A2RL_INFERENCE_LORA: 'runtime' })).toThrow(/A2RL_INFERENCE_LORA: set without A2RL_INFERENCE_URL/);
    expect(() => loadServingConfig({ A2RL_INFERENCE_URL: server.baseUrl, A2RL_INFERENCE_LORA: 'always' })).toThrow(/unknown mode "always"/);
  });

  it('refuses at grading, as an evaluator error, an endpoint config that cannot load the checkpoint: never its first listed model', async () => {
    const config = { ...loadServingConfig({}), inferenceUrl: server.baseUrl, inferenceLora: false };
    const err = await rejection(createEvaluationContext(config, 'cpu').serve(await checkpoint()));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/external endpoint cannot load submitted checkpoints/);
    const lora = createEvaluationContext(loadServingConfig({ A2RL_INFERENCE_URL: server.baseUrl, A2RL_INFERENCE_LORA: 'runtime' }), 'cpu');
    const full = await rejection(lora.serve(await checkpoint({ 'config.json': '{}', 'model.safetensors': 'tuned' })));
    expect(full).toBeInstanceOf(EvaluatorError);
    expect(full.message).toMatch(/loads LoRA adapters only and cannot grade a full-weights checkpoint/);
  });

  it('fails with EvaluatorError when the endpoint does not answer', async () => {
    const ctx = createEvaluationContext(loadServingConfig({ A2RL_INFERENCE_URL: 'http://127.0.0.1:1', A2RL_INFERENCE_LORA: 'runtime' }), 'cpu');
    const err = await rejection(ctx.serve(await checkpoint()));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/A2RL_INFERENCE_URL .* does not answer/);
  });

  it('reports an unknown model name as an EvaluatorError with the server message', async () => {
    const err = await rejection(new OpenAiClient({ baseUrl: server.baseUrl, model: 'other' }).complete('x'));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/HTTP 404: .*does not exist/);
  });

  it('lends the configured judge and the device to the evaluator', () => {
    const ctx = createEvaluationContext(loadServingConfig({ A2RL_JUDGE_URL: server.baseUrl, A2RL_JUDGE_MODEL: 'judge' }), '1');
    expect(ctx.device).toBe('1');
    expect(ctx.judge).toEqual({ baseUrl: server.baseUrl, model: 'judge' });
  });
});
