import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lchown, mkdir, open, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ArtifactNotFoundError, type ArtifactStore } from '../artifacts/artifact-store.port.js';
import { HeldDir, DirCursor } from '../workspace-fs/held-dir.js';
import { isHarnessFile } from '../workspace-fs/layout.js';
import { forEachLimit, hashFile, walkTops } from '../workspace-fs/workspace-scan.js';
import type { WorkspaceFile } from '../replay/workspace-state.js';

// A resumed run's workspace against its ledger (docs/resume.md): still on disk, the agent's files are
// compared with their last recorded state without following any link; gone, they are written back
// from the artifact store into a freshly prepared workspace, each blob checked against its hash.

/** Where the file observer does not look (data/, models/, output/, the harness's files): not compared. */
function watched(relPath: string): boolean {
  const top = relPath.split('/', 1)[0];
  return top !== 'data' && top !== 'models' && top !== 'output' && !isHarnessFile(relPath) && !top.startsWith('.a2rl-fence-');
}

/** One file of the agent's that differs from the ledger: what the file observer would have recorded. */
export interface FileDifference {
  path: string;
  op: 'create' | 'modify' | 'delete';
  /** On disk now (create, modify). */
  sha256?: string;
  size?: number;
  /** As last recorded (modify, delete). */
  previousSha256?: string;
}

/**
 * The agent's watched files on disk compared with `recorded` (the ledger's last state), sorted by
 * path. Something other than a readable regular file where a file was recorded is a delete, as the
 * file observer records it; links and other non-files are never read.
 */
export async function compareWithLedger(root: string, recorded: readonly WorkspaceFile[]): Promise<FileDifference[]> {
  const rootDir = await HeldDir.open(root);
  try {
    const tops = (await readdir(root)).filter(watched);
    const found = await walkTops(rootDir, tops);
    const before = new Map(recorded.filter((f) => watched(f.path)).map((f) => [f.path, f]));
    const onDisk = [...found].filter(([p, f]) => f.kind === 'file' && watched(p)).map(([p]) => p);
    const hashed = new Map<string, { sha256: string; size: number }>();
    const cursors = [new DirCursor(rootDir), new DirCursor(rootDir), new DirCursor(rootDir), new DirCursor(rootDir)];
    try {
      await forEachLimit(onDisk, cursors.length, async (p, worker) => {
        const h = await hashFile(cursors[worker], p);
        if (h.sha256 !== null) hashed.set(p, { sha256: h.sha256, size: Number(h.fingerprint.size) });
      });
    } finally {
      for (const cursor of cursors) await cursor.close();
    }
    const differences: FileDifference[] = [];
    for (const p of [...new Set([...before.keys(), ...hashed.keys()])].sort()) {
      const was = before.get(p);
      const now = hashed.get(p);
      if (now && !was) differences.push({ path: p, op: 'create', ...now });
      else if (now && was && now.sha256 !== was.sha256) differences.push({ path: p, op: 'modify', ...now, ...(was.sha256 ? { previousSha256: was.sha256 } : {}) });
      else if (!now && was) differences.push({ path: p, op: 'delete', ...(was.sha256 ? { previousSha256: was.sha256 } : {}) });
    }
    return differences;
  } finally {
    await rootDir.close();
  }
}

/** Reads a workspace file for the record without following a link, or null when it is not a regular file (or over `maxBytes`). */
export async function readAgentFile(root: string, relPath: string, maxBytes: number): Promise<Buffer | null> {
  const rootDir = await HeldDir.open(root);
  const cursor = new DirCursor(rootDir);
  try {
    const parts = relPath.split('/');
    const name = parts.pop()!;
    const handle = await (await cursor.at(parts)).openFile(name);
    try {
      const st = await handle.stat();
      return st.isFile() && st.size <= maxBytes ? await handle.readFile() : null;
    } finally {
      await handle.close();
    }
  } catch {
    return null;
  } finally {
    await cursor.close();
    await rootDir.close();
  }
}

/** What restoring the agent's files into a fresh workspace came to. */
export interface RestoredFiles {
  restored: number;
  /** Files the ledger holds without content, or whose blob the store no longer has. */
  unrestorable: string[];
}

/**
 * Writes `files` (the ledger's last state of the agent's files, checkpoints of submissions included)
 * into the fresh workspace `root`, each checked against its sha256, owned by the agent's uid. The
 * workspace was just prepared by the harness and no agent has run in it, so no link can stand in the
 * way; the paths come from the ledger (the agent chose them) and are checked to stay inside it.
 */
export async function restoreAgentFiles(root: string, files: readonly WorkspaceFile[], store: ArtifactStore, owner?: { uid: number; gid: number }): Promise<RestoredFiles> {
  const unrestorable: string[] = [];
  let restored = 0;
  // One at a time, in path order: which of two clashing paths is restored never depends on timing.
  for (const file of files) {
    const target = safeTarget(root, file.path);
    if (!target || file.sha256 === null) {
      unrestorable.push(file.path);
      continue;
    }
    try {
      await writeBlob(root, target, file.sha256, store, owner);
      restored++;
    } catch (error) {
      if (!(error instanceof ArtifactNotFoundError) && !(error instanceof BlobMismatchError) && !PATH_CLASHES.has((error as NodeJS.ErrnoException).code ?? '')) throw error;
      unrestorable.push(file.path); // no content, or its path clashes with another recorded file (a file where a directory is needed)
    }
  }
  return { restored, unrestorable: unrestorable.sort() };
}

class BlobMismatchError extends Error {}

/** A recorded path that cannot be written beside the others (`a` a file and `a/b` a file too). */
const PATH_CLASHES = new Set(['ENOTDIR', 'EEXIST', 'EISDIR', 'ELOOP']);

/** The absolute path for a workspace-relative `relPath`, or null when it would leave the workspace or name a harness file. */
function safeTarget(root: string, relPath: string): string | null {
  const parts = relPath.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..' || p.includes('\0')) || isHarnessFile(relPath)) return null;
  return path.join(root, ...parts);
}

async function writeBlob(root: string, target: string, sha256: string, store: ArtifactStore, owner?: { uid: number; gid: number }): Promise<void> {
  await makeDirs(root, path.dirname(target), owner);
  const handle = await open(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  const hash = createHash('sha256');
  try {
    let at = 0;
    for await (const chunk of await store.get(sha256)) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      hash.update(bytes);
      for (let done = 0; done < bytes.length; ) done += (await handle.write(bytes, done, bytes.length - done, at + done)).bytesWritten;
      at += bytes.length;
    }
    if (owner) await handle.chown(owner.uid, owner.gid);
  } finally {
    await handle.close();
  }
  if (hash.digest('hex') !== sha256) {
    await rm(target, { force: true });
    throw new BlobMismatchError(`blob ${sha256} does not hash to itself`);
  }
}

/** Creates the directories from `root` down to `dir`, each owned by the agent. */
async function makeDirs(root: string, dir: string, owner?: { uid: number; gid: number }): Promise<void> {
  const rel = path.relative(root, dir);
  if (!rel) return;
  let at = root;
  for (const part of rel.split(path.sep)) {
    at = path.join(at, part);
    const made = await mkdir(at, { mode: 0o755 }).then(() => true, (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
      return false;
    });
    if (made && owner) await lchown(at, owner.uid, owner.gid);
  }
}
