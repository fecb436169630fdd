import { chmod, chown, cp, mkdir, readdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import PQueue from 'p-queue';
import type { TaskPack } from '../../tasks/task-pack.js';
import { materializeTask } from '../grading/task-cache.js';
import { WorkspaceError, workspaceLayout, type ManifestEntry, type RunMetaFields, type WorkspaceLayout } from '../workspace-fs/layout.js';

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

function isWithin(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
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
