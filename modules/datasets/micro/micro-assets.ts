import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { cp, mkdir, mkdtemp, open, readdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cachePath } from '../../agents/agent-python-env.js';
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
 * Assets made once are kept in the machine cache (`<cache>/micro/`, see microCacheEntry) and copied from
 * there into any other home: the same task, seed, generator and Python make the same bytes, and the
 * generation is minutes of one CPU thread (micro ALFWorld: about five).
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
  /** Generate afresh: neither copy from the machine cache nor leave the result there. */
  noCache?: boolean;
}

export interface MicroResult {
  dir: string;
  manifest: DatasetManifest;
  /** The assets of this seed and generator were already installed and verified: nothing was generated. */
  present: boolean;
  /** Copied from the machine cache rather than generated (summary: the one recorded when they were made). */
  cached: boolean;
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
    return { dir, manifest: previous, present: true, cached: false, summary: null };
  }
  const cache = options.noCache ? null : await microCacheEntry(task, options.seed, generator, options.env ?? process.env);
  await mkdir(path.dirname(dir), { recursive: true, mode: 0o700 });
  const staging = `${dir}.micro-${randomBytes(4).toString('hex')}`;
  try {
    const copied = cache ? await fromCache(cache, staging, { task, seed: options.seed, generator }) : null;
    const summary = copied?.summary ?? (await runGenerator(task, options.seed, staging, options));
    const manifest: DatasetManifest = copied?.manifest ?? { task, complete: true, micro: true, seed: options.seed, generator, files: await entries(staging) };
    if (!copied) await writeManifest(staging, manifest);
    if (cache && !copied) await toCache(staging, summary, cache, options.log);
    await rm(dir, { recursive: true, force: true });
    await rename(staging, dir);
    return { dir, manifest, present: false, cached: copied !== null, summary };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/**
 * The machine cache's entry for these assets, `<cache>/micro/<task>-seed<seed>-<generator>-<python>`
 * (null where the environment names no cache). `python` hashes the resolved prefix of the Python that
 * generates them: the managed environment's prefix carries the hash of its pinned requirements, so
 * another torch makes another entry.
 */
async function microCacheEntry(task: MicroTask, seed: number, generator: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  let prefix = 'none';
  try {
    const found = agentPython(env, task);
    if (found) prefix = await realpath(found.prefix).catch(() => found.prefix);
  } catch {
    // No usable Python: the generator says so when it is asked to run.
  }
  const python = createHash('sha256').update(prefix).digest('hex').slice(0, 12);
  return cachePath(env, 'micro', `${task}-seed${seed}-${generator}-${python}`);
}

/** Copies a cache entry into `staging`, checked file by file against its manifest; null (nothing copied) where the entry is missing or damaged. */
async function fromCache(entry: string, staging: string, wanted: Pick<DatasetManifest, 'task' | 'seed' | 'generator'>): Promise<{ manifest: DatasetManifest; summary: Record<string, unknown> } | null> {
  const manifest = await readManifest(path.join(entry, 'assets')).catch(() => null);
  const summary = await readFile(path.join(entry, 'summary.json'), 'utf8').then((t) => JSON.parse(t) as Record<string, unknown>, () => null);
  if (!manifest?.micro || manifest.task !== wanted.task || manifest.seed !== wanted.seed || manifest.generator !== wanted.generator || !summary) return null;
  const exactly = async () => (await fileNames(staging)).join('\0') === manifest.files.map((f) => f.name).join('\0') && (await intact(staging, manifest));
  const copied = await cp(path.join(entry, 'assets'), staging, { recursive: true }).then(exactly, () => false);
  if (copied) return { manifest, summary: { ...summary, cached: true } };
  await rm(staging, { recursive: true, force: true });
  return null;
}

/** Leaves a copy of freshly made assets in the cache (whole or not at all: renamed in); a cache that cannot be written is only reported. */
async function toCache(staging: string, summary: Record<string, unknown>, entry: string, log?: (line: string) => void): Promise<void> {
  const temp = `${entry}.tmp-${randomBytes(4).toString('hex')}`;
  try {
    await cp(staging, path.join(temp, 'assets'), { recursive: true });
    await writeFile(path.join(temp, 'summary.json'), `${canonicalJson(summary)}\n`);
    await rm(entry, { recursive: true, force: true });
    await rename(temp, entry);
  } catch (err) {
    log?.(`micro assets: not kept in the machine cache (${(err as Error).message})`);
  } finally {
    await rm(temp, { recursive: true, force: true });
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
  const out: ManifestEntry[] = [];
  for (const name of await fileNames(dir)) {
    const file = path.join(dir, name);
    out.push({ name, sha256: (await sha256OfFile(file))!, size: (await stat(file)).size, source: null, check: 'generated' });
  }
  return out;
}

/** The names of the files under `dir` (the manifest aside), '/'-separated, sorted; anything not a plain file counts as a file too. */
async function fileNames(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((d) => !d.isDirectory())
    .map((d) => path.relative(dir, path.join(d.parentPath, d.name)).split(path.sep).join('/')).filter((name) => name !== MANIFEST).sort();
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

/**
 * Makes the micro assets of `tasks` (seed `seed`) into the machine cache, through a throwaway home, so
 * that a later `a2rl data micro` of any home copies them (npm test's pretest warms the ones the
 * end-to-end specs train on). Assets the cache holds already are only copied and checked.
 */
export async function warmMicroCache(options: { tasks?: readonly MicroTask[]; seed?: number; env?: NodeJS.ProcessEnv; log?: (line: string) => void } = {}): Promise<void> {
  const { tasks = ['gsm8k', 'alfworld'], seed = 1, env = process.env, log } = options;
  for (const task of tasks) {
    const home = await mkdtemp(path.join(tmpdir(), 'a2rl-micro-warm-'));
    try {
      const made = await installMicroAssets(task, { home, seed, env, log });
      log?.(`micro ${task} (seed ${seed}): ${made.cached ? 'in the machine cache already' : `made in ${made.summary?.seconds ?? '?'} s and kept in the machine cache`}`);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  }
}
