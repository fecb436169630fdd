import type { FileHandle } from 'node:fs/promises';
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { BeneathError, HeldDir } from '../workspace-fs/held-dir.js';
import type { WorkspaceLayout } from '../workspace-fs/layout.js';
import { invalidPath } from './submission-refused.error.js';

/** A checkpoint directory, held open below the held workspace root: the walk starts from descriptors, never from a path. */
export interface HeldCheckpoint {
  /** The workspace root (its real path), held. */
  root: HeldDir;
  /** The checkpoint directory, held (the root itself when the checkpoint is the root). */
  dir: HeldDir;
  /** Its real place below the root, as components (no links). */
  names: string[];
  /** The workspace root as configured and as its real path: how absolute link texts are read. */
  paths: { root: string; realRoot: string };
  /** The same, `/`-joined; `.` for the root. */
  rel: string;
  /** Closes both descriptors. */
  close(): Promise<void>;
}

/** True when `child` is `parent` or below it (both absolute and normalised). */
export function isWithin(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/** Symlinks followed in one resolution at most (as the kernel's ELOOP limit); also bounds retries after a swap. */
const MAX_LINKS = 40;

/**
 * Turns the agent's `model_path` into a checkpoint directory it may submit, held open, or refuses it
 * with the status to answer: the path must name an existing directory inside the workspace, neither
 * inside nor above the read-only data and base-model directories. Relative paths are taken from the
 * workspace root; absolute ones must name a place in the workspace (the sandbox mounts it at the same
 * path). Links are interpreted by resolveInside (never followed by the kernel), so nothing outside the
 * workspace is looked at and the answer never tells the agent whether some host path exists.
 */
export async function resolveCheckpointDir(ws: WorkspaceLayout, modelPath: string): Promise<HeldCheckpoint> {
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
  return openCheckpointDir(realRoot, start, modelPath, root, [
    ['the read-only base model directory', path.relative(root, path.resolve(ws.baseModelDir))],
    ['the read-only data directory', path.relative(root, path.resolve(ws.dataDir))],
  ]);
}

/**
 * Holds the workspace root and the directory `rel` below it (links interpreted inside the root only),
 * refusing a place inside or above any of `readOnly` ([label, root-relative path]). `shown` is the
 * path as the agent gave it, for messages; `root` is the workspace's path as configured.
 */
export async function openCheckpointDir(
  realRoot: string,
  rel: string,
  shown: string,
  root = realRoot,
  readOnly: ReadonlyArray<readonly [string, string]> = [],
): Promise<HeldCheckpoint> {
  const rootDir = await HeldDir.open(realRoot);
  let found: Resolved | undefined;
  let held: Extract<Resolved, { dir: HeldDir }>;
  try {
    found = await resolveInside(rootDir, split(rel), { root, realRoot });
    const real = found.names.join('/');
    for (const [label, dir] of readOnly) {
      const ro = split(dir).join('/');
      if (isWithin(`/${ro}`, `/${real}`)) throw invalidPath(403, `model_path "${shown}" is inside ${label} (${ro}); submit a checkpoint you wrote under output/`);
      if (isWithin(`/${real}`, `/${ro}`)) throw invalidPath(403, `model_path "${shown}" contains ${label} (${ro}); submit the checkpoint directory itself`);
    }
    if (!('dir' in found)) {
      throw invalidPath(422, `model_path "${shown}" is not a directory; a checkpoint is a directory holding manifest.json and its weights`);
    }
    held = found;
  } catch (err) {
    await found?.close();
    await rootDir.close();
    if (err instanceof UnresolvedPath) throw refusalFor(err, shown);
    throw err;
  }
  return {
    root: rootDir,
    dir: held.dir,
    names: held.names,
    paths: { root, realRoot },
    rel: held.names.join('/') || '.',
    close: async () => {
      await held.close();
      await rootDir.close();
    },
  };
}

/** The answer to the agent for a path that could not be resolved: names only what it gave. */
function refusalFor(err: UnresolvedPath, shown: string) {
  switch (err.kind) {
    case 'outside':
      return invalidPath(403, `model_path "${shown}" leads (through a symlink) outside the workspace`);
    case 'loop':
      return invalidPath(400, `model_path "${shown}" is a symlink loop`);
    case 'unreadable':
      return invalidPath(403, `model_path "${shown}" is not accessible`);
    case 'special':
      return invalidPath(422, `model_path "${shown}" is not a directory; a checkpoint is a directory holding manifest.json and its weights`);
    default:
      return invalidPath(404, `model_path "${shown}" does not exist (or is a dangling symlink)`);
  }
}

export type Unresolved = 'missing' | 'outside' | 'loop' | 'unreadable' | 'special';

/** Why a path below the root could not be resolved; carries no host path. */
export class UnresolvedPath extends Error {
  override readonly name = 'UnresolvedPath';
  constructor(readonly kind: Unresolved) {
    super(kind);
  }
}

/** What a resolution reached: a held directory or an open regular file, with its real place below the root. */
export type Resolved = ({ dir: HeldDir } | { file: FileHandle }) & { names: string[]; close(): Promise<void> };

/**
 * Resolves `names` (components below the held `root`) the way the kernel would, but never lets it
 * follow a link: each component is looked up in the directory descriptor reached so far; a link's
 * text is read and interpreted here (relative to the real place reached, or, absolute, as a path
 * of the workspace as `paths.root` or `paths.realRoot` names it) and resolution starts again from
 * the root. A target that leaves the root is refused as `outside` before anything is looked up, so
 * nothing outside is ever opened, listed or stat'ed, and whether a host path exists is never told.
 * A component swapped between its lstat and its open is looked at again (bounded, as links are).
 */
export async function resolveInside(root: HeldDir, names: readonly string[], paths: { root: string; realRoot: string }): Promise<Resolved> {
  const pending = [...names];
  const chain: HeldDir[] = [];
  let real: string[] = [];
  const at = () => chain[chain.length - 1] ?? root;
  const release = async () => {
    for (const dir of chain.splice(0)) await dir.close();
  };
  try {
    for (let turns = 0; pending.length > 0; ) {
      const name = pending.shift()!;
      const last = pending.length === 0;
      const st = await at().lstat(name).catch(() => 'unreadable' as const);
      if (st === null) throw new UnresolvedPath('missing');
      if (st === 'unreadable') throw new UnresolvedPath('unreadable');
      if (st.isSymbolicLink()) {
        if (++turns > MAX_LINKS) throw new UnresolvedPath('loop');
        const text = await at()
          .readLink(name)
          .catch(() => null); // no longer a link (EINVAL) or gone: swapped since the lstat
        if (text === null) {
          pending.unshift(name);
          continue;
        }
        const target = interpretLink(text, real, paths);
        if (target === null) throw new UnresolvedPath('outside');
        await release();
        real = [];
        pending.unshift(...target);
        continue;
      }
      if (!st.isDirectory() && !last) throw new UnresolvedPath('missing'); // a file where a directory should be (ENOTDIR)
      if (!st.isDirectory() && !st.isFile()) throw new UnresolvedPath('special');
      let opened: HeldDir | FileHandle;
      try {
        opened = st.isDirectory() ? await at().openDir(name) : await at().openFile(name);
      } catch (err) {
        if (!(err instanceof BeneathError)) throw err;
        if (err.refusal === 'unreadable') throw new UnresolvedPath('unreadable');
        // Swapped since the lstat (for a link, say): look at it again.
        if (++turns > MAX_LINKS) throw new UnresolvedPath('loop');
        pending.unshift(name);
        continue;
      }
      if (opened instanceof HeldDir) {
        chain.push(opened);
        real.push(name);
        continue;
      }
      const file = opened;
      await release();
      return { file, names: [...real, name], close: () => file.close() };
    }
  } catch (err) {
    await release();
    throw err;
  }
  const dir = chain.pop() ?? root;
  const rest = chain.splice(0);
  for (const d of rest) await d.close();
  return { dir, names: real, close: async () => void (dir !== root && (await dir.close())) };
}

/**
 * The components a link's text names below the root, or null when it leads outside. `from` is the
 * real place of the link's directory. Pure text: nothing is looked up.
 */
export function interpretLink(target: string, from: readonly string[], paths: { root: string; realRoot: string }): string[] | null {
  if (path.isAbsolute(target)) {
    const abs = path.resolve(target);
    for (const base of [paths.root, paths.realRoot]) if (isWithin(base, abs)) return split(path.relative(base, abs));
    return null;
  }
  const out = [...from];
  for (const part of target.split('/')) {
    if (part === '' || part === '.') continue;
    if (part !== '..') out.push(part);
    else if (out.pop() === undefined) return null;
  }
  return out;
}

function split(rel: string): string[] {
  return rel.split('/').filter((part) => part !== '' && part !== '.');
}
