import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { TaskPack } from '../../tasks/task-pack.js';
import { assertSegment, WorkspaceError, type ManifestEntry } from '../workspace-fs/layout.js';
import { keyHash, taskCacheKey } from './cache-key.js';
import { HashMemo } from '../workspace-fs/content-hash.js';

export interface MaterializedTask {
  dataDir: string;
  modelDir: string;
  privateDir: string;
  manifest: ManifestEntry[];
  /** keyHash of the TaskCacheKey it was materialised under. */
  cacheKey: string;
}

const MARKER = '.complete.json';

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

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
