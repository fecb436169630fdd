import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, chown, cp, mkdir, readdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import PQueue from 'p-queue';
import type { TaskPack } from '../../tasks/task-pack.js';
import { keyHash, taskCacheKey } from '../grading/cache-key.js';
import { HashMemo } from '../grading/content-hash.js';
import type { WorkspaceLayout } from './run-context.js';

export interface ManifestEntry {
  /** Workspace-relative, posix separators: `data/...` or `models/<baseModel>/...`. */
  path: string;
  sha256: string;
  size: number;
}

export interface PrepareWorkspaceOptions {
  workspacesRoot: string;
  runId: string;
  task: TaskPack;
  /** Materialised packs, one directory per task id; holds the private sets, so never mounted. */
  taskCacheDir: string;
  /** Text of `instructions.md`. */
  instructions: string;
  /** Where `a2rl data fetch` stores paper-task datasets (`<datasetsDir>/<task>/`). */
  datasetsDir?: string;
  /** Written as `timeout_s` in run_meta.json. */
  budgetSeconds?: number;
  /**
   * The run's harness-owned directory, outside every workspace: run_meta.json is written there (never
   * through a path in the workspace, which the agent controls) and the workspace's `run_meta.json` is a
   * link to it (`runMetaLink`: its path as the agent sees it). Default: `<workspace>/../.<run>.run`.
   */
  runDir?: string;
  /** Where the agent finds the run directory's run_meta.json (default: its host path). */
  runMetaLink?: string;
  /** The agent's unprivileged uid/gid (root harness): owns the workspace root, code/ and output/. */
  agentOwner?: { uid: number; gid: number };
}

export interface PreparedWorkspace {
  layout: WorkspaceLayout;
  /** The task's held-out data, inside the task cache (outside every workspace). */
  privateDir: string;
  /** Every file given to the agent (data and base model), sorted by path. */
  dataManifest: ManifestEntry[];
  runMeta: RunMeta;
  /** The run's harness-owned directory (run_meta.json, the sandbox's sockets). */
  runDir: string;
  /** keyHash of the task's TaskCacheKey (modules/grading/cache-key.ts): what the baseline cache is keyed on besides the model. */
  cacheKey: string;
}

export interface MaterializedTask {
  dataDir: string;
  modelDir: string;
  privateDir: string;
  manifest: ManifestEntry[];
  /** keyHash of the TaskCacheKey it was materialised under. */
  cacheKey: string;
}

export class WorkspaceError extends Error {
  override readonly name = 'WorkspaceError';
}

/** Files the harness puts into the workspace itself (the file watcher ignores them). */
const HARNESS_FILES = new Set(['description.md', 'instructions.md', 'run_meta.json']);

export function isHarnessFile(workspaceRelativePath: string): boolean {
  return HARNESS_FILES.has(workspaceRelativePath);
}

const MARKER = '.complete.json';
const SAFE_SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,200}$/;

export function workspaceLayout(workspacesRoot: string, runId: string, baseModel: string): WorkspaceLayout {
  assertSegment('run id', runId);
  assertSegment('base model', baseModel);
  const root = join(workspacesRoot, runId);
  return {
    root,
    codeDir: join(root, 'code'),
    dataDir: join(root, 'data'),
    modelsDir: join(root, 'models'),
    baseModelDir: join(root, 'models', baseModel),
    outputDir: join(root, 'output'),
    descriptionFile: join(root, 'description.md'),
    instructionsFile: join(root, 'instructions.md'),
    runMetaFile: join(root, 'run_meta.json'),
  };
}

/**
 * Creates a fresh workspace for a run: copies of the task's data and base model (read-only), empty
 * `code/` and `output/`, description.md, instructions.md and run_meta.json. Read-only here means
 * file modes only; against an agent running as root it is the sandbox's read-only binds that hold.
 */
export async function prepareWorkspace(opts: PrepareWorkspaceOptions): Promise<PreparedWorkspace> {
  const { task } = opts;
  const layout = workspaceLayout(opts.workspacesRoot, opts.runId, task.baseModel);
  const [workspaces, cache] = [resolve(opts.workspacesRoot), resolve(opts.taskCacheDir)];
  if (isWithin(cache, workspaces) || isWithin(workspaces, cache)) {
    throw new WorkspaceError(`the task cache ${cache} (held-out data) and the workspaces ${workspaces} must not overlap`);
  }
  const pack = await materializeTask(task, opts.taskCacheDir, opts.datasetsDir);

  await mkdir(opts.workspacesRoot, { recursive: true });
  try {
    await mkdir(layout.root);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new WorkspaceError(`workspace ${layout.root} already exists: run ids must be unique`, { cause: err });
    }
    throw err;
  }
  try {
    // dereference: nothing in the workspace may link back into the task cache.
    await cp(pack.dataDir, layout.dataDir, { recursive: true, dereference: true, errorOnExist: true });
    await mkdir(layout.modelsDir);
    await cp(pack.modelDir, layout.baseModelDir, { recursive: true, dereference: true, errorOnExist: true });
    await mkdir(layout.codeDir);
    await mkdir(layout.outputDir);
    await writeFile(layout.descriptionFile, task.description);
    await writeFile(layout.instructionsFile, opts.instructions);
    const runDir = opts.runDir ?? join(opts.workspacesRoot, `.${opts.runId}.run`);
    await prepareRunDir(runDir, opts.agentOwner);
    const runMeta = await RunMeta.create(join(runDir, 'run_meta.json'), { timeout_s: opts.budgetSeconds ?? null });
    await symlink(opts.runMetaLink ?? runMeta.file, layout.runMetaFile);
    await makeReadOnly(layout.dataDir);
    await makeReadOnly(layout.modelsDir);
    if (opts.agentOwner) {
      for (const dir of [layout.root, layout.codeDir, layout.outputDir]) await chown(dir, opts.agentOwner.uid, opts.agentOwner.gid);
    }
    return { layout, privateDir: pack.privateDir, dataManifest: pack.manifest, runMeta, runDir, cacheKey: pack.cacheKey };
  } catch (err) {
    await rm(layout.root, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Materialises a task pack once into `<taskCacheDir>/<taskId>/{data,model,private}` and reuses it
 * while the completion marker's key matches the pack's TaskCacheKey (id, base model name and content,
 * evaluator version, protocol, data parameters, fetched dataset; the base model's file hashes are
 * memoised in `<taskCacheDir>/.hash-memo.json` by path, mtime and size). The pack is
 * written into a temporary sibling and renamed into place with the marker already inside, so a
 * crash never leaves a directory that looks complete; concurrent preparers converge on one copy.
 * Packs must therefore not embed their target paths in the files they write.
 */
export async function materializeTask(task: TaskPack, taskCacheDir: string, datasetsDir?: string): Promise<MaterializedTask> {
  assertSegment('task id', task.id);
  const dir = join(taskCacheDir, task.id);
  const key = keyHash(await taskCacheKey(task, datasetsDir, { memo: new HashMemo(join(taskCacheDir, '.hash-memo.json')) }));
  const cached = await readMarker(dir, task, key);
  if (cached) return cached;

  await mkdir(taskCacheDir, { recursive: true });
  const temp = join(taskCacheDir, `.${task.id}.${randomUUID()}.tmp`);
  const dirs = { dataDir: join(temp, 'data'), modelDir: join(temp, 'model'), privateDir: join(temp, 'private') };
  const paths = { ...dirs, ...(datasetsDir ? { datasetDir: join(datasetsDir, task.id) } : {}) };
  try {
    for (const p of Object.values(dirs)) await mkdir(p, { recursive: true });
    await task.materialize(paths);
    const manifest = [
      ...(await hashTree(paths.dataDir, 'data')),
      ...(await hashTree(paths.modelDir, `models/${task.baseModel}`)),
    ].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const marker: Marker = { taskId: task.id, baseModel: task.baseModel, evaluatorVersion: task.evaluatorVersion, cacheKey: key, manifest };
    await writeFile(join(temp, MARKER), JSON.stringify(marker));

    const stale = join(taskCacheDir, `.${task.id}.${randomUUID()}.stale`);
    if (await exists(dir)) {
      const winner = await readMarker(dir, task, key);
      if (winner) return winner; // another preparer finished first
      await rename(dir, stale);
    }
    try {
      await rename(temp, dir);
    } catch (err) {
      const winner = await readMarker(dir, task, key);
      if (winner) return winner;
      throw new WorkspaceError(`cannot install materialised task ${task.id} into ${dir}`, { cause: err });
    }
    await rm(stale, { recursive: true, force: true });
    return { ...cachePaths(dir), manifest, cacheKey: key };
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
}

interface Marker {
  taskId: string;
  baseModel: string;
  evaluatorVersion: string;
  /** Absent in markers written before it was kept: such a copy is materialised again. */
  cacheKey?: string;
  manifest: ManifestEntry[];
}

async function readMarker(dir: string, task: TaskPack, key: string): Promise<MaterializedTask | null> {
  let marker: Marker;
  try {
    marker = JSON.parse(await readFile(join(dir, MARKER), 'utf8')) as Marker;
  } catch {
    return null; // absent or torn: not complete
  }
  const current =
    marker.taskId === task.id && marker.baseModel === task.baseModel && marker.evaluatorVersion === task.evaluatorVersion && marker.cacheKey === key;
  return current ? { ...cachePaths(dir), manifest: marker.manifest, cacheKey: key } : null;
}

function cachePaths(dir: string): Omit<MaterializedTask, 'manifest' | 'cacheKey'> {
  return { dataDir: join(dir, 'data'), modelDir: join(dir, 'model'), privateDir: join(dir, 'private') };
}

async function hashTree(root: string, prefix: string): Promise<ManifestEntry[]> {
  const entries: ManifestEntry[] = [];
  for (const file of await listFiles(root)) {
    const hash = createHash('sha256');
    await pipeline(createReadStream(file), hash);
    entries.push({
      path: `${prefix}/${relative(root, file).split(sep).join('/')}`,
      sha256: hash.digest('hex'),
      size: (await stat(file)).size,
    });
  }
  return entries;
}

async function listFiles(dir: string): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...(await listFiles(path)));
    else if (entry.isFile()) files.push(path);
  }
  return files;
}

/**
 * The run directory: only the harness writes it; the agent (its group) may read it, and only through
 * the sandbox's read-only mount.
 */
async function prepareRunDir(dir: string, owner?: { uid: number; gid: number }): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o750 });
  await chmod(dir, 0o750);
  if (owner) await chown(dir, 0, owner.gid);
}

/** Files r--/r-x, directories r-x: nothing can be added, removed or rewritten without root. */
async function makeReadOnly(path: string): Promise<void> {
  const st = await stat(path);
  if (st.isDirectory()) {
    for (const name of await readdir(path)) await makeReadOnly(join(path, name));
    await chmod(path, 0o555);
  } else {
    await chmod(path, st.mode & 0o111 ? 0o555 : 0o444);
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

function isWithin(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
}

function assertSegment(what: string, value: string): void {
  if (!SAFE_SEGMENT.test(value)) throw new WorkspaceError(`${what} "${value}" is not a safe directory name`);
}

/** run_meta.json as the paper has it; times are Unix epoch seconds (fractional), null until known. */
export interface RunMetaFields {
  start_time: number | null;
  timeout_s: number | null;
  last_submit_time: number | null;
  end_time: number | null;
}

export function epochSeconds(date: Date = new Date()): number {
  return date.getTime() / 1000;
}

/**
 * Keeps run_meta.json current, in the run directory (never in the workspace: the agent could plant a
 * link at any path there). Each update is written to a temp file and renamed over the old one, so an
 * agent reading it never sees a torn file; writes are serialised in call order.
 */
export class RunMeta {
  private readonly writes = new PQueue({ concurrency: 1 });

  private constructor(
    readonly file: string,
    private fields: RunMetaFields,
  ) {}

  static async create(file: string, initial: Partial<RunMetaFields> = {}): Promise<RunMeta> {
    const meta = new RunMeta(file, { start_time: null, timeout_s: null, last_submit_time: null, end_time: null, ...initial });
    await meta.update({});
    return meta;
  }

  get current(): Readonly<RunMetaFields> {
    return { ...this.fields };
  }

  update(patch: Partial<RunMetaFields>): Promise<void> {
    this.fields = { ...this.fields, ...patch };
    const text = `${JSON.stringify(this.fields, null, 2)}\n`;
    // A failed write rejects its caller only; later ones still run.
    return this.writes.add(async () => {
      const temp = `${this.file}.tmp`;
      await writeFile(temp, text, { mode: 0o644 });
      await rename(temp, this.file);
    });
  }
}
