import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { TaskPack, TaskRequirement } from '../../tasks/task-pack.js';
import { EnvClient } from '../serving/env-client.js';
import { probeJudge, probeSearch } from './service-probes.js';
import { chooseServeEngine, hostEngineProbe, INFERENCE_URL_REFUSAL } from '../serving/serving.config.js';
import { DATASETS, datasetDir } from './dataset-registry.js';
import { BASE_MODEL, readManifest } from './fetch-dataset.js';

/** The paper's six tasks, in the paper's order (`a2rl doctor` without --task checks them all). */
export const PAPER_TASKS = ['gsm8k', 'humaneval', 'alpacaeval', 'alfworld', 'webshop', 'deepsearchqa'] as const;

/** `optional`: something is absent but the task still runs (e.g. the keyless search fallback). */
export type CheckStatus = 'ok' | 'missing' | 'optional';

export interface DoctorCheck {
  name: string;
  status: CheckStatus;
  detail: string;
  /** How to get it, when not ok. */
  hint?: string;
}

export interface TaskDiagnosis {
  task: string;
  implemented: boolean;
  checks: DoctorCheck[];
  ready: boolean;
}

/** What doctor may look at on the machine; injected in tests. */
export interface MachineProbe {
  env: NodeJS.ProcessEnv;
  home: string;
  /** Whether an executable of that name is on PATH. */
  hasCommand(name: string): boolean;
  /** A GPU description, or null when none is visible. */
  gpu(): string | null;
  /** Whether `python3 -c "import <module>"` succeeds. */
  pythonImports(module: string): boolean;
  /** Whether an environment server at `baseUrl` answers `GET /health` in protocol 1. */
  envServerAnswers(baseUrl: string): Promise<boolean>;
  /** One real call to the configured judge (1-token chat completion): null when it answered, else why not. Absent: not called. */
  judgeAnswers?(judge: { baseUrl: string; model: string; apiKey?: string }): Promise<string | null>;
  /** One real query to the search backend the tasks use: null when it answered, else why not. Absent: not called. */
  searchAnswers?(): Promise<string | null>;
}

export function machineProbe(home: string, env: NodeJS.ProcessEnv = process.env): MachineProbe {
  const hasCommand = (name: string) =>
    (env.PATH ?? '').split(path.delimiter).filter(Boolean).some((dir) => {
      try {
        accessSync(path.join(dir, name), constants.X_OK);
        return statSync(path.join(dir, name)).isFile();
      } catch {
        return false;
      }
    });
  const calls = new Map<string, Promise<string | null>>();
  const once = (key: string, call: () => Promise<string | null>) => calls.get(key) ?? calls.set(key, call()).get(key)!;
  return {
    env, home, hasCommand,
    envServerAnswers: async (baseUrl) => (await new EnvClient({ baseUrl, token: null }, 5_000).probe()) !== null,
    // Once per doctor run, however many tasks need the same judge or search.
    judgeAnswers: (judge) => once(`judge ${judge.baseUrl} ${judge.model}`, () => probeJudge(judge)),
    searchAnswers: () => once('search', () => probeSearch(env)),
    pythonImports: (module) => hasCommand('python3') && spawnSync('python3', ['-c', `import ${module}`], { stdio: 'ignore', timeout: 60_000, env }).status === 0,
    gpu() {
      if (hasCommand('nvidia-smi')) {
        const out = spawnSync('nvidia-smi', ['-L'], { encoding: 'utf8', timeout: 10_000 });
        const gpus = out.status === 0 ? out.stdout.split('\n').filter((l) => l.startsWith('GPU ')) : [];
        if (gpus.length) return gpus.join('; ');
      }
      const devices = existsSync('/dev') ? readdirSync('/dev').filter((d) => /^nvidia\d+$/.test(d)) : [];
      return devices.length ? devices.map((d) => `/dev/${d}`).join(', ') : null;
    },
  };
}

/** Diagnoses one task: `pack` is the registered pack, undefined for an unknown task id. */
export async function diagnoseTask(task: string, pack: TaskPack | undefined, probe: MachineProbe): Promise<TaskDiagnosis> {
  if (!pack) {
    const checks: DoctorCheck[] = [{ name: 'task pack', status: 'missing', detail: 'no such task', hint: `the paper's tasks are ${PAPER_TASKS.join(', ')}; \`a2rl tasks\` lists every pack` }];
    return { task, implemented: false, checks, ready: false };
  }
  const requirements = pack.requirements ?? [];
  const checks: DoctorCheck[] = [{ name: 'task pack', status: 'ok', detail: `${pack.title} (L${pack.level}, evaluator ${pack.evaluatorVersion})` }];
  if (!requirements.length) checks.push({ name: 'machine', status: 'ok', detail: 'no requirements (reference pack, runs on CPU)' });
  for (const req of requirements) checks.push(await check(task, req, probe));
  return { task, implemented: true, checks, ready: checks.every((c) => c.status !== 'missing') };
}

const set = (env: NodeJS.ProcessEnv, name: string) => !!env[name]?.trim();

/** How checkpoints are served when the CPU engine serves them (no GPU with vLLM, or A2RL_SERVE_ENGINE), else null. */
function servingOnCpu(probe: MachineProbe): string | null {
  try {
    const choice = chooseServeEngine(probe.env, { gpu: () => probe.gpu() !== null, vllm: () => probe.hasCommand('vllm'), python: hostEngineProbe.python });
    return choice.engine === 'transformers' ? `checkpoints are served by the transformers engine (${choice.reason}: ${choice.template.split(' ')[0]})` : null;
  } catch {
    return null;
  }
}

async function check(task: string, req: TaskRequirement, probe: MachineProbe): Promise<DoctorCheck> {
  const { env } = probe;
  const external = set(env, 'A2RL_INFERENCE_URL');
  // An endpoint that cannot load the submitted checkpoints would grade the wrong model: refused.
  if (external && (req.kind === 'gpu' || (req.kind === 'command' && req.name === 'vllm')) && env.A2RL_INFERENCE_LORA?.trim() !== 'runtime') {
    return { name: req.kind === 'gpu' ? 'GPU' : 'vllm', status: 'missing', detail: `A2RL_INFERENCE_URL: ${INFERENCE_URL_REFUSAL}`, hint: 'unset A2RL_INFERENCE_URL, or set A2RL_INFERENCE_LORA=runtime (docs/grading-api.md)' };
  }
  const cpuEngine = !external && (req.kind === 'gpu' || (req.kind === 'command' && req.name === 'vllm')) ? servingOnCpu(probe) : null;
  if (cpuEngine) return { name: req.kind === 'gpu' ? 'GPU' : 'vllm', status: 'ok', detail: `not needed here: ${cpuEngine}` };
  switch (req.kind) {
    case 'gpu': {
      if (external) return { name: 'GPU', status: 'ok', detail: `not needed here: checkpoints are served at A2RL_INFERENCE_URL (${env.A2RL_INFERENCE_URL})` };
      const gpu = probe.gpu();
      return gpu
        ? { name: 'GPU', status: 'ok', detail: gpu }
        : { name: 'GPU', status: 'missing', detail: 'no NVIDIA GPU visible (`nvidia-smi -L` failed, no /dev/nvidia*)', hint: 'run on a machine with an NVIDIA GPU and its driver, or serve models elsewhere and set A2RL_INFERENCE_URL' };
    }
    case 'command': {
      // The serving command is whatever A2RL_SERVE_COMMAND starts (vLLM by default), unless an endpoint is configured.
      if (req.name === 'vllm' && external) return { name: 'vllm', status: 'ok', detail: 'not needed here: A2RL_INFERENCE_URL is set' };
      const serve = req.name === 'vllm' && set(env, 'A2RL_SERVE_COMMAND') ? env.A2RL_SERVE_COMMAND!.trim().split(/\s+/)[0] : req.name;
      return probe.hasCommand(serve)
        ? { name: req.name, status: 'ok', detail: `\`${serve}\` found on PATH` }
        : { name: req.name, status: 'missing', detail: `\`${serve}\` not found on PATH`, hint: req.hint };
    }
    case 'dataset':
      return datasetCheck(task, probe.home);
    case 'judge': {
      const missing = ['A2RL_JUDGE_URL', 'A2RL_JUDGE_MODEL'].filter((v) => !set(env, v));
      if (missing.length) return { name: 'judge', status: 'missing', detail: `${missing.join(' and ')} not set`, hint: 'set A2RL_JUDGE_URL (OpenAI-compatible base URL), A2RL_JUDGE_MODEL and, if needed, A2RL_JUDGE_API_KEY' };
      const where = `${env.A2RL_JUDGE_MODEL} at ${env.A2RL_JUDGE_URL}${set(env, 'A2RL_JUDGE_API_KEY') ? ' (with API key)' : ''}`;
      const judge = { baseUrl: env.A2RL_JUDGE_URL!.trim().replace(/\/+$/, '').replace(/\/v1$/, ''), model: env.A2RL_JUDGE_MODEL!.trim(), ...(set(env, 'A2RL_JUDGE_API_KEY') ? { apiKey: env.A2RL_JUDGE_API_KEY!.trim() } : {}) };
      const failure = probe.judgeAnswers ? await probe.judgeAnswers(judge) : null;
      if (failure !== null) return { name: 'judge', status: 'missing', detail: `${where} failed a 1-token chat completion: ${failure}`, hint: 'check the URL, model name and API key (and that this machine can reach it)' };
      return { name: 'judge', status: 'ok', detail: `${where}${probe.judgeAnswers ? ', answered a 1-token chat completion' : ''}` };
    }
    case 'search':
      return liveSearch(configuredSearch(env), probe);
    case 'env-server':
      return await envServerCheck(req, probe);
    case 'env-var': {
      const value = env[req.name]?.trim();
      if (!value) return { name: req.name, status: 'missing', detail: `${req.name} is not set`, hint: req.hint };
      return existsSync(value) && statSync(value).isDirectory()
        ? { name: req.name, status: 'ok', detail: value }
        : { name: req.name, status: 'missing', detail: `${req.name}=${value} is not a directory`, hint: req.hint };
    }
  }
}

function configuredSearch(env: NodeJS.ProcessEnv): DoctorCheck {
  if (set(env, 'A2RL_SEARCH_API_KEY') && !set(env, 'A2RL_SEARCH_URL')) {
    return { name: 'search', status: 'missing', detail: 'A2RL_SEARCH_API_KEY is set but A2RL_SEARCH_URL is not', hint: 'set A2RL_SEARCH_URL to the search API the key belongs to' };
  }
  return set(env, 'A2RL_SEARCH_API_KEY')
    ? { name: 'search', status: 'ok', detail: 'A2RL_SEARCH_API_KEY and A2RL_SEARCH_URL are set' }
    : { name: 'search', status: 'optional', detail: 'no search API key: the keyless fallback backend will be used', hint: 'set A2RL_SEARCH_URL and A2RL_SEARCH_API_KEY for a configured search backend' };
}

/** The search check as configured, then (when it is usable) one real query: a backend that fails it is missing. */
async function liveSearch(configured: DoctorCheck, probe: MachineProbe): Promise<DoctorCheck> {
  if (configured.status === 'missing' || !probe.searchAnswers) return configured;
  const failure = await probe.searchAnswers();
  if (failure !== null) return { name: 'search', status: 'missing', detail: `a real query failed: ${failure}`, hint: configured.hint ?? 'check A2RL_SEARCH_URL and A2RL_SEARCH_API_KEY, and that this machine can reach the search service' };
  return { ...configured, detail: `${configured.detail}; a real query answered` };
}

/** A configured URL, a configured command on PATH, or the bundled Python server with the environment package importable. */
async function envServerCheck(req: Extract<TaskRequirement, { kind: 'env-server' }>, probe: MachineProbe): Promise<DoctorCheck> {
  const name = `environment server ${req.name}`;
  const prefix = `A2RL_ENV_${req.name.toUpperCase()}`;
  const { env } = probe;
  if (set(env, `${prefix}_URL`)) {
    const url = env[`${prefix}_URL`]!.trim();
    return (await probe.envServerAnswers(url))
      ? { name, status: 'ok', detail: `${prefix}_URL=${url} answers GET /health (a2rl environment protocol 1)` }
      : { name, status: 'missing', detail: `${prefix}_URL=${url} does not answer GET /health with a2rl environment protocol 1`, hint: `start the server there, or unset ${prefix}_URL to let a2rl start the bundled one` };
  }
  if (set(env, `${prefix}_COMMAND`)) {
    const first = env[`${prefix}_COMMAND`]!.trim().split(/\s+/)[0]!;
    return probe.hasCommand(first) || path.isAbsolute(first) && existsSync(first)
      ? { name, status: 'ok', detail: `started with ${prefix}_COMMAND (\`${first}\` found)` }
      : { name, status: 'missing', detail: `${prefix}_COMMAND starts \`${first}\`, which is not found on PATH`, hint: req.hint };
  }
  if (!probe.hasCommand('python3')) return { name, status: 'missing', detail: '`python3` not found on PATH (the bundled environment server is Python)', hint: req.hint };
  return probe.pythonImports(req.pythonModule)
    ? { name, status: 'ok', detail: `bundled server (tasks/${req.name}/env_backend.py); python3 imports ${req.pythonModule}` }
    : { name, status: 'missing', detail: `python3 cannot import ${req.pythonModule} (needed by tasks/${req.name}/env_backend.py)`, hint: `${req.hint}; or set ${prefix}_URL to a server you run, or ${prefix}_COMMAND` };
}

async function datasetCheck(task: string, home: string): Promise<DoctorCheck> {
  const spec = DATASETS.find((d) => d.task === task);
  if (!spec) return { name: 'dataset', status: 'missing', detail: `no dataset registered for ${task}` };
  const dir = datasetDir(home, task);
  const fix = `a2rl data fetch ${task}   (air-gapped: a2rl data fetch ${task} --from <dir>)`;
  let manifest;
  try {
    manifest = await readManifest(dir);
  } catch (err) {
    return { name: 'dataset', status: 'missing', detail: `${dir}/manifest.json is unreadable: ${err instanceof Error ? err.message : String(err)}`, hint: fix };
  }
  if (!manifest) return { name: 'dataset', status: 'missing', detail: `not fetched (no ${path.join(dir, 'manifest.json')})`, hint: fix };
  // Presence and size only (cheap); `a2rl data fetch` re-verifies the hashes.
  const wanted = [...spec.files.map((f) => f.name), ...(spec.baseModel ? manifest.files.map((e) => e.name).filter((n) => n.startsWith(`${BASE_MODEL}/`)) : [])];
  const bad = wanted.filter((name) => {
    const entry = manifest.files.find((e) => e.name === name);
    const info = existsSync(path.join(dir, name)) ? statSync(path.join(dir, name)) : null;
    return !entry || !info || info.size !== entry.size;
  });
  if (bad.length) return { name: 'dataset', status: 'missing', detail: `incomplete in ${dir}: ${bad.join(', ')}`, hint: fix };
  if (spec.baseModel && !wanted.includes(`${BASE_MODEL}/config.json`)) {
    return { name: 'dataset', status: 'missing', detail: `data fetched but no base checkpoint in ${path.join(dir, BASE_MODEL)}`, hint: `a2rl data fetch ${task} --base-model <Hugging Face checkpoint dir>` };
  }
  if (manifest.micro) {
    // Micro assets stand in for the dataset (and its base model) until the real one is fetched.
    const made = `micro assets (seed ${manifest.seed ?? '?'}, \`a2rl data micro ${task}\`): ${wanted.length} file(s) in ${dir}`;
    return { name: 'dataset', status: 'ok', detail: `${made}; scores on them are not the paper's (\`a2rl data fetch ${task} --force\` replaces them)` };
  }
  return { name: 'dataset', status: 'ok', detail: `${wanted.length} file(s) in ${dir}${spec.environmentData ? `; ${spec.environmentData}` : ''}` };
}
