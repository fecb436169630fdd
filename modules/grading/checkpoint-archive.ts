import { createHash } from 'node:crypto';
import { constants, createReadStream, type Dirent, type Stats } from 'node:fs';
import { link, lstat, mkdir, mkdtemp, open, opendir, readlink, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { BlobRef, ManifestEntry } from '../ledger/events/catalog.js';
import { canonicalBytes } from '../ledger/events/canonical-json.js';
import { SparseWriter } from '../artifacts/sparse-writer.js';
import { invalidCheckpoint, invalidPath, overLimit, SubmissionRefusedError } from './submission-refused.error.js';
import { isWithin, resolveInside } from './workspace-path.js';

/** Checkpoints with more files are refused: their manifest would not fit in one SubmissionReceived. */
export const MAX_CHECKPOINT_FILES = 2000;
/** The manifest travels inside SubmissionReceived, whose canonical JSON must stay under 256 KiB. */
export const MAX_MANIFEST_BYTES = 192 * 1024;
const MAX_DEPTH = 32;

export interface ArchivedCheckpoint {
  /** Files sorted by path (code-unit order), paths relative to the checkpoint, `/`-separated. */
  manifest: ManifestEntry[];
  /** The manifest's canonical JSON, stored as a blob: its sha256 identifies the checkpoint's content. */
  manifestBlob: BlobRef;
  /** A private copy of exactly the archived bytes: the evaluator grades this, not the agent's directory. */
  stagedDir: string;
}

interface FoundFile {
  rel: string;
  source: string;
}

/** A file already staged in this checkpoint, by inode: a hard link to it is staged as a link, not copied again. */
interface Staged {
  staged: string;
  sha256: string;
  size: number;
}

/**
 * Copies a checkpoint directory to a private staging directory, hashing as it copies, puts every
 * file into the artifact store and returns the manifest. Only regular files are taken; a symlink is
 * followed only to a regular file inside the workspace. Each file is opened and then checked by
 * where its descriptor really points, so swapping a path for a link between the walk and the copy
 * gains nothing.
 *
 * Size: before any byte is copied, the logical sizes of the files found (a sparse file at its full
 * size, a file reached twice through hard links or symlinks once) are summed against `maxBytes`;
 * over it, the submission is refused (413) and nothing is copied. The copy counts again as it reads
 * (a file that grows after the walk cannot slip past). Nothing is amplified: an inode reached twice
 * is copied once (staged as a hard link, its hash reused), and 64 KiB blocks of zeros stay holes in
 * the staged copy, as they do in the filesystem artifact store.
 */
export async function archiveCheckpoint(opts: {
  dir: string;
  workspaceRoot: string;
  artifacts: ArtifactStore;
  stagingRoot: string;
  /** The run's `checkpointBytes`; absent or null: not limited. */
  maxBytes?: number | null;
}): Promise<ArchivedCheckpoint> {
  const max = opts.maxBytes ?? Infinity;
  const { files, logicalBytes } = await walk(opts.dir, opts.workspaceRoot);
  if (files.length === 0) throw invalidCheckpoint('the checkpoint directory holds no files');
  if (logicalBytes > max) throw tooLarge(logicalBytes, max, files.length);
  await mkdir(opts.stagingRoot, { recursive: true });
  const stagedDir = await mkdtemp(path.join(opts.stagingRoot, 'a2rl-submission-'));
  try {
    const manifest: ManifestEntry[] = [];
    const byInode = new Map<string, Staged>();
    let copied = 0;
    for (const file of files) {
      const staged = path.join(stagedDir, ...file.rel.split('/'));
      await mkdir(path.dirname(staged), { recursive: true });
      const entry = await stageFile(file, staged, opts.workspaceRoot, byInode, { copied, max });
      if (entry.copied) {
        copied += entry.size;
        await opts.artifacts.put(createReadStream(staged), { sha256: entry.sha256, size: entry.size });
      }
      manifest.push({ path: file.rel, sha256: entry.sha256, size: entry.size });
    }
    manifest.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const bytes = canonicalBytes(manifest);
    if (bytes.length > MAX_MANIFEST_BYTES) {
      throw invalidCheckpoint(`the checkpoint's file list is ${bytes.length} bytes as JSON (limit ${MAX_MANIFEST_BYTES}); use fewer files or shorter names`);
    }
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const blob = await opts.artifacts.put(bytes, { sha256, size: bytes.length });
    return { manifest, manifestBlob: { sha256, size: bytes.length, key: blob.key }, stagedDir };
  } catch (err) {
    await rm(stagedDir, { recursive: true, force: true });
    throw err;
  }
}

/** The refusal for a checkpoint over `checkpointBytes`: names the limit and the logical size. */
function tooLarge(logicalBytes: number, max: number, files: number | null): SubmissionRefusedError {
  const what =
    files === null
      ? `the checkpoint grew while it was being copied, to at least ${logicalBytes} bytes, over this run's checkpointBytes limit of ${max} bytes`
      : `the checkpoint's logical size is ${logicalBytes} bytes (${files} files; sparse files count at their full size, hard-linked files once), over this run's checkpointBytes limit of ${max} bytes; nothing was copied`;
  return overLimit(`${what}. Submit a smaller checkpoint.`, {
    limit: 'checkpointBytes',
    value: logicalBytes,
    max,
    observedAt: new Date().toISOString(),
  });
}

/** The checkpoint's files (at most MAX_CHECKPOINT_FILES) and their total logical size, each inode counted once. */
async function walk(dir: string, workspaceRoot: string): Promise<{ files: FoundFile[]; logicalBytes: number }> {
  const found: FoundFile[] = [];
  const inodes = new Set<string>();
  let logicalBytes = 0;
  const visit = async (abs: string, rel: string, depth: number): Promise<void> => {
    if (depth > MAX_DEPTH) throw invalidCheckpoint(`the checkpoint is nested more than ${MAX_DEPTH} directories deep`);
    for await (const entry of await opendir(abs)) {
      const childAbs = path.join(abs, entry.name);
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        await visit(childAbs, childRel, depth + 1);
        continue;
      }
      const st = await fileStat(entry, childAbs, childRel, workspaceRoot);
      const inode = `${st.dev}:${st.ino}`;
      if (!inodes.has(inode)) {
        inodes.add(inode);
        logicalBytes += st.size;
      }
      found.push({ rel: childRel, source: childAbs });
      if (found.length > MAX_CHECKPOINT_FILES) {
        throw invalidCheckpoint(`the checkpoint has more than ${MAX_CHECKPOINT_FILES} files; submit a directory with at most ${MAX_CHECKPOINT_FILES}`);
      }
    }
  };
  await visit(dir, '', 0);
  return { files: found, logicalBytes };
}

/** The stat of a regular file, or of the regular file inside the workspace a symlink leads to; refuses anything else. */
async function fileStat(entry: Dirent, abs: string, rel: string, workspaceRoot: string): Promise<Stats> {
  if (entry.isSymbolicLink()) {
    // Resolved without looking outside the workspace: whether a host path exists is never told.
    let target: string;
    try {
      target = await resolveInside(workspaceRoot, path.relative(workspaceRoot, abs), rel);
    } catch (err) {
      if (err instanceof SubmissionRefusedError && err.status === 403) throw invalidPath(403, `checkpoint file ${rel} is a symlink leading outside the workspace`);
      throw invalidPath(404, `checkpoint file ${rel} is a dangling symlink`);
    }
    const st = await stat(target);
    if (!st.isFile()) throw invalidCheckpoint(`checkpoint entry ${rel} is a symlink to something other than a regular file`);
    return st;
  }
  if (!entry.isFile()) throw invalidCheckpoint(`checkpoint entry ${rel} is not a regular file or directory`);
  try {
    return await lstat(abs);
  } catch (err) {
    throw invalidCheckpoint(`cannot read checkpoint file ${rel} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/**
 * Stages one file: copied (hashed, holes kept) unless its inode was staged already, in which case
 * it is staged as a hard link to that copy with the same hash. `limit`: bytes copied so far and the most allowed.
 */
async function stageFile(
  file: FoundFile,
  staged: string,
  workspaceRoot: string,
  byInode: Map<string, Staged>,
  limit: { copied: number; max: number },
): Promise<{ sha256: string; size: number; copied: boolean }> {
  let handle;
  try {
    // O_NONBLOCK: a FIFO swapped in after the walk must not hang the grading server.
    handle = await open(file.source, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw invalidCheckpoint(`cannot read checkpoint file ${file.rel} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  try {
    const opened = await descriptorPath(handle.fd);
    if (opened !== null && !isWithin(workspaceRoot, opened)) {
      throw invalidPath(403, `checkpoint file ${file.rel} leads outside the workspace`);
    }
    const st = await handle.stat();
    if (!st.isFile()) throw invalidCheckpoint(`checkpoint entry ${file.rel} is not a regular file`);
    const inode = `${st.dev}:${st.ino}`;
    const same = byInode.get(inode);
    if (same) {
      await link(same.staged, staged);
      return { sha256: same.sha256, size: same.size, copied: false };
    }
    const { sha256, size } = await copyHashed(handle, staged, limit);
    byInode.set(inode, { staged, sha256, size });
    return { sha256, size, copied: true };
  } finally {
    await handle.close();
  }
}

/** Copies the open file to `staged` (64 KiB blocks of zeros left as holes), hashing its full content; refuses past the limit. */
async function copyHashed(handle: FileHandle, staged: string, limit: { copied: number; max: number }): Promise<{ sha256: string; size: number }> {
  // A plain read/write loop rather than FileHandle streams: a FileHandle whose stream has ended
  // can make a later close() wait forever, which would hang the grading request.
  const hash = createHash('sha256');
  const out = await open(staged, 'wx', 0o444);
  try {
    const sparse = new SparseWriter(out);
    const buffer = Buffer.allocUnsafe(1024 * 1024);
    for (let position = 0; ; ) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      if (limit.copied + position > limit.max) throw tooLarge(limit.copied + position, limit.max, null);
      const chunk = buffer.subarray(0, bytesRead);
      hash.update(chunk);
      await sparse.write(chunk);
    }
    return { sha256: hash.digest('hex'), size: await sparse.end() };
  } finally {
    await out.close();
  }
}

/** Where an open descriptor really points (Linux /proc); null where that cannot be asked. */
async function descriptorPath(fd: number): Promise<string | null> {
  try {
    return await readlink(`/proc/self/fd/${fd}`);
  } catch {
    return null;
  }
}
