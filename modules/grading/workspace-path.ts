import { realpath, stat } from 'node:fs/promises';
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

/**
 * Turns the agent's `model_path` into a checkpoint directory it may submit, or refuses it with the
 * status to answer: the path must name an existing directory whose real location (symlinks
 * followed) is inside the workspace and neither inside nor above the read-only data and base-model
 * directories. Relative paths are taken from the workspace root; absolute ones are interpreted on
 * the host, so the sandbox must mount the workspace at the same path.
 */
export async function resolveCheckpointDir(ws: WorkspaceLayout, modelPath: string): Promise<ResolvedCheckpointDir> {
  if (modelPath.includes('\0')) throw invalidPath(400, 'model_path contains a NUL byte');
  if (modelPath.split(/[\\/]/).includes('..')) {
    throw invalidPath(400, `model_path must not contain '..' segments: "${modelPath}"`);
  }
  const root = path.resolve(ws.root);
  const realRoot = await realpath(root);
  const candidate = path.resolve(root, modelPath);
  if (path.isAbsolute(modelPath) && !isWithin(root, candidate) && !isWithin(realRoot, candidate)) {
    throw invalidPath(403, `model_path "${modelPath}" is outside the workspace ${root}; submit a checkpoint directory under ${ws.outputDir}`);
  }
  let real: string;
  try {
    real = await realpath(candidate);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw invalidPath(404, `model_path "${modelPath}" does not exist (or is a dangling symlink)`);
    if (code === 'ELOOP') throw invalidPath(400, `model_path "${modelPath}" is a symlink loop`);
    if (code === 'EACCES') throw invalidPath(403, `model_path "${modelPath}" is not accessible`);
    throw err;
  }
  if (!isWithin(realRoot, real)) {
    throw invalidPath(403, `model_path "${modelPath}" resolves (following symlinks) to ${real}, outside the workspace`);
  }
  for (const [label, dir] of [
    ['the read-only base model directory', ws.baseModelDir],
    ['the read-only data directory', ws.dataDir],
  ] as const) {
    const realDir = await realpathOrSelf(dir);
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

async function realpathOrSelf(p: string): Promise<string> {
  try {
    return await realpath(p);
  } catch {
    return path.resolve(p);
  }
}
