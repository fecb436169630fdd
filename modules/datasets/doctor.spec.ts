import { mkdtempSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TaskPack, TaskRequirement } from '../../tasks/task-pack.js';
import { diagnoseTask, type MachineProbe } from './doctor.js';

const pack = (id: string, requirements?: TaskRequirement[]): TaskPack => ({
  id, level: 1, title: `${id} pack`, baseModel: 'base', evaluatorVersion: '1', description: '', requirements,
  materialize: async () => undefined,
  evaluate: async () => ({ score: 0, details: {} }),
});

const GSM8K: TaskRequirement[] = [{ kind: 'gpu' }, { kind: 'command', name: 'vllm', hint: 'pip install vllm' }, { kind: 'dataset' }];

let home: string;
beforeEach(() => { home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-doctor-')); });
afterEach(() => rm(home, { recursive: true, force: true }));

const probe = (over: Partial<MachineProbe> = {}): MachineProbe => ({ env: {}, home, hasCommand: () => false, gpu: () => null, pythonImports: () => false, envServerAnswers: async () => false, ...over });

async function fetchedGsm8k(): Promise<void> {
  const dir = path.join(home, 'datasets', 'gsm8k');
  await mkdir(dir, { recursive: true });
  await mkdir(path.join(dir, 'base-model'));
  const files = [['train.jsonl', 'abc'], ['test.jsonl', 'de'], ['base-model/config.json', '{}']] as const;
  for (const [name, body] of files) await writeFile(path.join(dir, name), body);
  const manifest = { task: 'gsm8k', complete: true, files: files.map(([name, body]) => ({ name, sha256: 'x', size: body.length })) };
  await writeFile(path.join(dir, 'manifest.json'), JSON.stringify(manifest));
}

describe('doctor', () => {
  it('lists every missing piece for gsm8k on a bare machine with how to get it', async () => {
    const d = await diagnoseTask('gsm8k', pack('gsm8k', GSM8K), probe());
    expect(d.ready).toBe(false);
    expect(d.checks.map((c) => [c.name, c.status])).toEqual([['task pack', 'ok'], ['GPU', 'missing'], ['vllm', 'missing'], ['dataset', 'missing']]);
    expect(d.checks[2].hint).toBe('pip install vllm');
    expect(d.checks[3].hint).toMatch(/^a2rl data fetch gsm8k/);
  });

  it('is ready when the GPU, the serve command and a complete dataset are present', async () => {
    await fetchedGsm8k();
    const d = await diagnoseTask('gsm8k', pack('gsm8k', GSM8K), probe({ gpu: () => 'GPU 0: A100', hasCommand: (n) => n === 'vllm' }));
    expect(d.checks.every((c) => c.status === 'ok')).toBe(true);
    expect(d.ready).toBe(true);
  });

  it('flags a dataset whose file is missing or has another size than the manifest says', async () => {
    await fetchedGsm8k();
    await writeFile(path.join(home, 'datasets', 'gsm8k', 'test.jsonl'), 'longer');
    const d = await diagnoseTask('gsm8k', pack('gsm8k', [{ kind: 'dataset' }]), probe());
    expect(d.checks[1]).toMatchObject({ status: 'missing', detail: expect.stringMatching(/incomplete .*test\.jsonl/) });
  });

  it('asks for the base checkpoint when only the data was fetched', async () => {
    const dir = path.join(home, 'datasets', 'gsm8k');
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'train.jsonl'), 'a');
    await writeFile(path.join(dir, 'test.jsonl'), 'b');
    await writeFile(path.join(dir, 'manifest.json'), JSON.stringify({ task: 'gsm8k', complete: true, files: [{ name: 'train.jsonl', size: 1 }, { name: 'test.jsonl', size: 1 }] }));
    const d = await diagnoseTask('gsm8k', pack('gsm8k', [{ kind: 'dataset' }]), probe());
    expect(d.checks[1]).toMatchObject({ status: 'missing', hint: 'a2rl data fetch gsm8k --base-model <Hugging Face checkpoint dir>' });
  });

  it('needs neither GPU nor vLLM when A2RL_INFERENCE_URL loads adapters at runtime, refuses it otherwise, and checks the A2RL_SERVE_COMMAND executable', async () => {
    const external = await diagnoseTask('gsm8k', pack('gsm8k', GSM8K.slice(0, 2)), probe({ env: { A2RL_INFERENCE_URL: 'http://127.0.0.1:9000', A2RL_INFERENCE_LORA: 'runtime' } }));
    expect(external.ready).toBe(true);
    const fixed = await diagnoseTask('gsm8k', pack('gsm8k', GSM8K.slice(0, 2)), probe({ env: { A2RL_INFERENCE_URL: 'http://127.0.0.1:9000' } }));
    expect(fixed.ready).toBe(false);
    expect(fixed.checks[1]).toMatchObject({ name: 'GPU', status: 'missing', detail: expect.stringMatching(/^A2RL_INFERENCE_URL: an external endpoint cannot load submitted checkpoints/) });
    const custom = await diagnoseTask('gsm8k', pack('gsm8k', GSM8K.slice(1, 2)), probe({ env: { A2RL_SERVE_COMMAND: 'node fake-vllm.mjs {model_path}' }, hasCommand: (n) => n === 'node' }));
    expect(custom.checks[1]).toMatchObject({ status: 'ok', detail: '`node` found on PATH' });
  });

  it('requires judge URL and model; a missing search key is optional (keyless fallback)', async () => {
    const reqs: TaskRequirement[] = [{ kind: 'judge' }, { kind: 'search' }];
    const bare = await diagnoseTask('deepsearchqa', pack('deepsearchqa', reqs), probe({ env: { A2RL_JUDGE_URL: 'http://judge' } }));
    expect(bare.checks.slice(1).map((c) => [c.status, c.detail])).toEqual([
      ['missing', 'A2RL_JUDGE_MODEL not set'],
      ['optional', 'no search API key: the keyless fallback backend will be used'],
    ]);
    const configured = await diagnoseTask('deepsearchqa', pack('deepsearchqa', reqs), probe({ env: { A2RL_JUDGE_URL: 'http://judge', A2RL_JUDGE_MODEL: 'gpt-4o' } }));
    expect(configured.ready).toBe(true);
  });

  it('checks environment servers: the Python package of the bundled server, a configured command, or a configured URL', async () => {
    const reqs: TaskRequirement[] = [{ kind: 'env-server', name: 'alfworld', pythonModule: 'alfworld', hint: 'pip install alfworld' }];
    const diagnose = async (over: Partial<MachineProbe>) => (await diagnoseTask('alfworld', pack('alfworld', reqs), probe(over))).checks[1];
    expect(await diagnose({})).toMatchObject({ status: 'missing', detail: '`python3` not found on PATH (the bundled environment server is Python)' });
    expect(await diagnose({ hasCommand: (c) => c === 'python3' })).toMatchObject({
      status: 'missing', detail: 'python3 cannot import alfworld (needed by tasks/alfworld/env_backend.py)', hint: expect.stringMatching(/^pip install alfworld; or set A2RL_ENV_ALFWORLD_URL/),
    });
    expect(await diagnose({ hasCommand: (c) => c === 'python3', pythonImports: (m) => m === 'alfworld' })).toMatchObject({ status: 'ok' });
    expect(await diagnose({ env: { A2RL_ENV_ALFWORLD_COMMAND: 'my-alfworld --port {port}' } })).toMatchObject({ status: 'missing', detail: expect.stringContaining('`my-alfworld`') });
    expect(await diagnose({ env: { A2RL_ENV_ALFWORLD_URL: 'http://gpu-box:3000' } })).toMatchObject({ status: 'missing', detail: 'A2RL_ENV_ALFWORLD_URL=http://gpu-box:3000 does not answer GET /health with a2rl environment protocol 1' });
    expect(await diagnose({ env: { A2RL_ENV_ALFWORLD_URL: 'http://gpu-box:3000' }, envServerAnswers: async (url) => url === 'http://gpu-box:3000' })).toMatchObject({ status: 'ok' });
  });

  it('says plainly that an unknown task does not exist, naming the paper\'s tasks', async () => {
    const d = await diagnoseTask('mmlu', undefined, probe({ gpu: () => 'GPU 0', hasCommand: () => true }));
    expect(d).toEqual({ task: 'mmlu', implemented: false, ready: false, checks: [{
      name: 'task pack', status: 'missing', detail: 'no such task',
      hint: "the paper's tasks are gsm8k, humaneval, alpacaeval, alfworld, webshop, deepsearchqa; `a2rl tasks` lists every pack",
    }] });
  });

  it('reports reference packs as needing nothing', async () => {
    const d = await diagnoseTask('ref-arith', pack('ref-arith'), probe());
    expect(d.ready).toBe(true);
  });
});
