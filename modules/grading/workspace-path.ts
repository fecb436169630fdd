import { lstat, readlink, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { WorkspaceLayout } from '../runs/run-context.js';
import { invalidPath } from './submission-refused.error.js';

export interface ResolvedCheckpointDir {
  /** Real path (symlinks resolved) of the checkpoint directory. */
  abs: string;
  /** The same, relative to the workspace root. */
  rel: string;
  /** Real path of the workspace root. */
  root: string;
}

/** True when `child` is `parent` or below it (both absolute and normalised). */
export function isWithin(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/** Symlinks followed in one resolution at most (as the kernel's ELOOP limit). */
const MAX_LINKS = 40;

/**
 * Turns the agent's `model_path` into a checkpoint directory it may submit, or refuses it with the
 * status to answer: the path must name an existing directory inside the workspace, neither inside nor
 * above the read-only data and base-model directories. Relative paths are taken from the workspace
 * root; absolute ones must name a place in the workspace (the sandbox mounts it at the same path).
 * Links are followed one component at a time and only while they stay inside the workspace: a path
 * that leads outside is refused before anything outside is looked at, so the answer never tells the
 * agent whether some host path exists.
 */
export async function resolveCheckpointDir(ws: WorkspaceLayout, modelPath: string): Promise<ResolvedCheckpointDir> {
  if (modelPath.includes('\0')) throw invalidPath(400, 'model_path contains a NUL byte');
  if (modelPath.split(/[\\/]/).includes('..')) {
    throw invalidPath(400, `model_path must not contain '..' segments: "${modelPath}"`);
  }
  const root = path.resolve(ws.root);
  const realRoot = await realpath(root);
  const candidate = path.resolve(root, modelPath);
  const start = isWithin(root, candidate) ? path.relative(root, candidate) : isWithin(realRoot, candidate) ? path.relative(realRoot, candidate) : null;
  if (start === null) {
    throw invalidPath(403, `model_path "${modelPath}" is outside the workspace ${root}; submit a checkpoint directory under ${ws.outputDir}`);
  }
  const real = await resolveInside(realRoot, start, modelPath, root);
  for (const [label, dir] of [
    ['the read-only base model directory', ws.baseModelDir],
    ['the read-only data directory', ws.dataDir],
  ] as const) {
    const realDir = path.join(realRoot, path.relative(root, path.resolve(dir)));
    if (isWithin(realDir, real)) {
      throw invalidPath(403, `model_path "${modelPath}" is inside ${label} (${path.relative(realRoot, realDir)}); submit a checkpoint you wrote under output/`);
    }
    if (isWithin(real, realDir)) {
      throw invalidPath(403, `model_path "${modelPath}" contains ${label} (${path.relative(realRoot, realDir)}); submit the checkpoint directory itself`);
    }
  }
  if (!(await stat(real)).isDirectory()) {
    throw invalidPath(422, `model_path "${modelPath}" is not a directory; a checkpoint is a directory holding manifest.json and its weights`);
  }
  return { abs: real, rel: path.relative(realRoot, real) || '.', root: realRoot };
}

/**
 * The real path of `rel` (relative to `realRoot`), resolving links component by component without
 * ever looking outside `realRoot`: a link whose target leads out is refused as such, whether or not
 * the target exists. `shown` is the path as the agent gave it, for messages; `root` is the
 * workspace's path as configured (links naming it are taken as naming `realRoot`).
 */
export async function resolveInside(realRoot: string, rel: string, shown: string, root = realRoot): Promise<string> {
  const pending = rel.split(path.sep).filter((part) => part !== '' && part !== '.');
  let current = realRoot;
  for (let links = 0; pending.length > 0; ) {
    const next = path.join(current, pending.shift()!);
    let st;
    try {
      st = await lstat(next);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') throw invalidPath(404, `model_path "${shown}" does not exist (or is a dangling symlink)`);
      if (code === 'EACCES') throw invalidPath(403, `model_path "${shown}" is not accessible`);
      throw err;
    }
    if (!st.isSymbolicLink()) {
      current = next;
      continue;
    }
    if (++links > MAX_LINKS) throw invalidPath(400, `model_path "${shown}" is a symlink loop`);
    let target = path.resolve(current, await readlink(next));
    if (realRoot !== root && isWithin(root, target)) target = path.join(realRoot, path.relative(root, target));
    if (!isWithin(realRoot, target)) throw invalidPath(403, `model_path "${shown}" leads (through a symlink) outside the workspace`);
    pending.unshift(...path.relative(realRoot, target).split(path.sep).filter((part) => part !== ''));
    current = realRoot;
  }
  return current;
}
