import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { canonicalJson } from '../../ledger/events/canonical-json.js';
import { agentPython } from '../../sandbox/agent-python.js';
import { packageRoot } from '../../settings/package-root.js';
import { datasetDir } from '../dataset-registry.js';
import { MANIFEST, readManifest, sha256OfFile, type DatasetManifest, type ManifestEntry } from '../fetch-dataset.js';

/**
 * `a2rl data micro <task>`: small synthetic assets for a paper task, made offline and
 * deterministically by generate.py beside this file — the dataset files in the formats `a2rl data
 * fetch` stores, and `base-model/`, a tiny Hugging Face checkpoint trained briefly on the task. They
 * install where fetched data goes (`$A2RL_HOME/datasets/<task>/`) with `micro: true` and the seed in
 * the manifest, so the packs read them unchanged; `a2rl data fetch` replaces them only with --force.
 */
export const MICRO_TASKS = ['gsm8k', 'humaneval', 'alfworld'] as const;
export type MicroTask = (typeof MICRO_TASKS)[number];

/** Files generate.py reads: a change to any of them makes different assets (the manifest's `generator`). */
const GENERATOR_FILES = ['modules/datasets/micro/generate.py', 'modules/datasets/micro/micro_data.py', 'modules/datasets/micro/micro_model.py', 'tasks/alfworld/env_backend.py'];

export interface MicroOptions {
  home: string;
  seed: number;
  /** Replace a fetched (non-micro) dataset. */
  force?: boolean;
  env?: NodeJS.ProcessEnv;
  /** Lines generate.py prints while it works (training loss). */
  log?: (line: string) => void;
}

export interface MicroResult {
  dir: string;
  manifest: DatasetManifest;
  /** The assets of this seed and generator were already installed and verified: nothing was generated. */
  present: boolean;
  /** generate.py's summary (row counts, model facts, seconds); null when present. */
  summary: Record<string, unknown> | null;
}

export class MicroAssetsError extends Error {
  override readonly name = 'MicroAssetsError';
}

export function isMicroTask(task: string): task is MicroTask {
  return (MICRO_TASKS as readonly string[]).includes(task);
}

/** The hash of the generator's sources: assets are the same when seed and generator are. */
export async function generatorVersion(root = packageRoot()): Promise<string> {
  const hash = createHash('sha256');
  for (const file of GENERATOR_FILES) hash.update(file).update('\0').update((await sha256OfFile(path.join(root, file))) ?? 'absent').update('\0');
  return hash.digest('hex').slice(0, 16);
}

/** Generates (unless already installed and intact) and installs the micro assets of `task`. */
export async function installMicroAssets(task: string, options: MicroOptions): Promise<MicroResult> {
  if (!isMicroTask(task)) throw new MicroAssetsError(`a2rl makes micro assets for ${MICRO_TASKS.join(', ')}, not "${task}"`);
  if (!Number.isSafeInteger(options.seed) || options.seed < 0) throw new MicroAssetsError(`--seed must be a non-negative integer, not ${options.seed}`);
  const dir = datasetDir(options.home, task);
  const generator = await generatorVersion();
  const previous = await readManifest(dir);
  if (previous && !previous.micro && !options.force) {
    throw new MicroAssetsError(`${dir} holds the fetched ${task} dataset: \`a2rl data micro ${task} --force\` replaces it with micro assets`);
  }
  if (previous?.micro && previous.seed === options.seed && previous.generator === generator && (await intact(dir, previous))) {
    return { dir, manifest: previous, present: true, summary: null };
  }
  await mkdir(path.dirname(dir), { recursive: true, mode: 0o700 });
  const staging = `${dir}.micro-${randomBytes(4).toString('hex')}`;
  try {
    const summary = await runGenerator(task, options.seed, staging, options);
    const manifest: DatasetManifest = { task, complete: true, micro: true, seed: options.seed, generator, files: await entries(staging) };
    await writeManifest(staging, manifest);
    await rm(dir, { recursive: true, force: true });
    await rename(staging, dir);
    return { dir, manifest, present: false, summary };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** generate.py with the task's agent Python (it holds torch, transformers and tokenizers); its last stdout line is the summary. */
async function runGenerator(task: MicroTask, seed: number, out: string, options: MicroOptions): Promise<Record<string, unknown>> {
  const env = options.env ?? process.env;
  const python = pythonFor(task, env);
  const root = packageRoot();
  const args = [path.join(root, 'modules/datasets/micro/generate.py'), task, '--seed', String(seed), '--out', out, '--protocol', path.join(root, 'tasks', task, 'protocol.json')];
  const child = spawn(python, args, {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Offline, and the same arithmetic however many cores the machine has.
    env: { ...env, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', TOKENIZERS_PARALLELISM: 'false', OMP_NUM_THREADS: '1', MKL_NUM_THREADS: '1', PYTHONHASHSEED: '0' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    for (const line of chunk.toString().split('\n')) if (line.trim()) options.log?.(line);
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  if (code !== 0) throw new MicroAssetsError(`generate.py ${task} failed (exit ${code}) with ${python}: ${stderr.trim().split('\n').slice(-5).join(' | ')}`);
  const last = stdout.trim().split('\n').at(-1) ?? '';
  try {
    return JSON.parse(last) as Record<string, unknown>;
  } catch {
    throw new MicroAssetsError(`generate.py ${task} printed no summary: ${last.slice(0, 200)}`);
  }
}

/** The agent Python of the task (A2RL_AGENT_PYTHON_<TASK>, A2RL_AGENT_PYTHON, then the managed environment). */
function pythonFor(task: string, env: NodeJS.ProcessEnv): string {
  const found = agentPython(env, task);
  if (!found) throw new MicroAssetsError('micro assets are made with torch and transformers: run `a2rl agents python install` (or set A2RL_AGENT_PYTHON to an environment holding them)');
  return path.join(found.prefix, 'bin', 'python');
}

/** Every file under `dir` (the manifest aside), sorted by name, with its hash and size. */
async function entries(dir: string): Promise<ManifestEntry[]> {
  const files = (await readdir(dir, { recursive: true, withFileTypes: true })).filter((d) => d.isFile())
    .map((d) => path.relative(dir, path.join(d.parentPath, d.name)).split(path.sep).join('/')).filter((name) => name !== MANIFEST).sort();
  const out: ManifestEntry[] = [];
  for (const name of files) {
    const file = path.join(dir, name);
    out.push({ name, sha256: (await sha256OfFile(file))!, size: (await stat(file)).size, source: null, check: 'generated' });
  }
  return out;
}

/** Every file the manifest lists is there with its hash. */
async function intact(dir: string, manifest: DatasetManifest): Promise<boolean> {
  for (const f of manifest.files) if ((await sha256OfFile(path.join(dir, f.name))) !== f.sha256) return false;
  return true;
}

async function writeManifest(dir: string, manifest: DatasetManifest): Promise<void> {
  const handle = await open(path.join(dir, MANIFEST), 'wx', 0o600);
  try {
    await handle.writeFile(`${canonicalJson(manifest)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
}
