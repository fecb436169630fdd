import { createHash } from 'node:crypto';
import { createReadStream, type Stats } from 'node:fs';
import { link, mkdir, mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { BeneathError, DirCursor, type HeldDir, utf8Name } from '../workspace-fs/held-dir.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { BlobRef, ManifestEntry } from '../ledger/events/catalog.js';
import { canonicalBytes } from '../ledger/events/canonical-json.js';
import { SparseWriter } from '../artifacts/sparse-writer.js';
import { invalidCheckpoint, invalidPath, overLimit, SubmissionRefusedError } from './submission-refused.error.js';
import { type HeldCheckpoint, type Resolved, resolveInside, UnresolvedPath } from './workspace-path.js';

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

/** A file the walk found: where it is in the checkpoint (directories and name); `link` when it is a symlink there. */
interface FoundFile {
  rel: string;
  dirs: string[];
  name: string;
  link: boolean;
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
 * taken only when it leads to a regular file inside the workspace (its text interpreted, never
 * followed: see resolveInside). The walk and the copy go from the held checkpoint directory one
 * component at a time through directory descriptors (modules/workspace-fs), refusing links: swapping
 * a sub-directory for a link at any moment makes the harness refuse the checkpoint, never open or
 * list what the link points to. Refusals name entries by their path inside the checkpoint only.
 *
 * Size: before any byte is copied, the logical sizes of the files found (a sparse file at its full
 * size, a file reached twice through hard links or symlinks once) are summed against `maxBytes`;
 * over it, the submission is refused (413) and nothing is copied. The copy counts again as it reads
 * (a file that grows after the walk cannot slip past). Nothing is amplified: an inode reached twice
 * is copied once (staged as a hard link, its hash reused), and 64 KiB blocks of zeros stay holes in
 * the staged copy, as they do in the filesystem artifact store.
 */
export async function archiveCheckpoint(opts: {
  /** From resolveCheckpointDir / openCheckpointDir; the caller closes it. */
  checkpoint: HeldCheckpoint;
  artifacts: ArtifactStore;
  stagingRoot: string;
  /** The run's `checkpointBytes`; absent or null: not limited. */
  maxBytes?: number | null;
}): Promise<ArchivedCheckpoint> {
  const max = opts.maxBytes ?? Infinity;
  const { files, logicalBytes } = await walk(opts.checkpoint);
  if (files.length === 0) throw invalidCheckpoint('the checkpoint directory holds no files');
  if (logicalBytes > max) throw tooLarge(logicalBytes, max, files.length);
  await mkdir(opts.stagingRoot, { recursive: true });
  const stagedDir = await mkdtemp(path.join(opts.stagingRoot, 'a2rl-submission-'));
  try {
    const manifest: ManifestEntry[] = [];
    const byInode = new Map<string, Staged>();
    let copied = 0;
    // Files come in walk order: the cursor opens each directory of the checkpoint about once.
    const cursor = new DirCursor(opts.checkpoint.dir);
    try {
      for (const file of files) {
        const staged = path.join(stagedDir, ...file.rel.split('/'));
        await mkdir(path.dirname(staged), { recursive: true });
        const source = file.link ? await openLinked(opts.checkpoint, file) : await openPlain(cursor, file);
        const entry = await stageFile(source, staged, byInode, { copied, max });
        if (entry.copied) {
          copied += entry.size;
          await storeStaged(opts.artifacts, staged, { sha256: entry.sha256, size: entry.size });
        }
        manifest.push({ path: file.rel, sha256: entry.sha256, size: entry.size });
      }
    } finally {
      await cursor.close();
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

/**
 * Puts a staged file into the artifact store: linked in where the store can (the filesystem store:
 * its bytes are written once, not copied again, nor read again: copyHashed hashed exactly what it
 * wrote, into a private directory; nothing writes to a staged file after this), streamed in 1 MiB
 * reads otherwise (64 KiB stream chunks cost twice the CPU per byte).
 */
function storeStaged(artifacts: ArtifactStore, staged: string, declared: { sha256: string; size: number }): Promise<unknown> {
  if (artifacts.putFile) return artifacts.putFile(staged, declared, { hashedAsWritten: true });
  return artifacts.put(createReadStream(staged, { highWaterMark: 1024 * 1024 }), declared);
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
async function walk(ck: HeldCheckpoint): Promise<{ files: FoundFile[]; logicalBytes: number }> {
  const found: FoundFile[] = [];
  const inodes = new Set<string>();
  let logicalBytes = 0;
  let dirCount = 0;
  const visit = async (dir: HeldDir, dirs: string[], depth: number): Promise<void> => {
    if (depth > MAX_DEPTH) throw invalidCheckpoint(`the checkpoint is nested more than ${MAX_DEPTH} directories deep`);
    for (const raw of await listed(dir, dirs)) {
      const name = utf8Name(raw);
      const rel = [...dirs, name ?? raw.toString('utf8')].join('/');
      if (name === null) throw invalidCheckpoint(`checkpoint entry ${rel} has a name that is not UTF-8`);
      const st = await dir.lstat(name).catch(() => unreadable(rel));
      if (st === null) continue; // removed since it was listed
      if (st.isDirectory()) {
        if (++dirCount > MAX_CHECKPOINT_FILES) throw invalidCheckpoint(`the checkpoint has more than ${MAX_CHECKPOINT_FILES} directories`);
        const sub = await dir.openDir(name).catch((err: unknown) => refused(err, rel));
        try {
          await visit(sub, [...dirs, name], depth + 1);
        } finally {
          await sub.close();
        }
        continue;
      }
      const file: FoundFile = { rel, dirs, name, link: st.isSymbolicLink() };
      if (!file.link && !st.isFile()) throw invalidCheckpoint(`checkpoint entry ${rel} is not a regular file or directory`);
      const size = file.link ? await linkedFileSize(ck, file, inodes) : countOnce(inodes, st);
      logicalBytes += size;
      found.push(file);
      if (found.length > MAX_CHECKPOINT_FILES) {
        throw invalidCheckpoint(`the checkpoint has more than ${MAX_CHECKPOINT_FILES} files; submit a directory with at most ${MAX_CHECKPOINT_FILES}`);
      }
    }
  };
  await visit(ck.dir, [], 0);
  return { files: found, logicalBytes };
}

/** The names in a held checkpoint directory; `dirs` is where it is in the checkpoint, for the message. */
async function listed(dir: HeldDir, dirs: string[]): Promise<Buffer[]> {
  return dir.list().catch(() => unreadable(dirs.join('/') || '.'));
}

/** The size of a file not yet counted (by inode), else 0. */
function countOnce(inodes: Set<string>, st: Stats): number {
  const inode = `${st.dev}:${st.ino}`;
  if (inodes.has(inode)) return 0;
  inodes.add(inode);
  return st.size;
}

/** A symlink in the checkpoint: the size of the regular file inside the workspace it leads to (counted once). */
async function linkedFileSize(ck: HeldCheckpoint, file: FoundFile, inodes: Set<string>): Promise<number> {
  const handle = await openLinked(ck, file);
  try {
    return countOnce(inodes, await handle.stat());
  } finally {
    await handle.close();
  }
}

/**
 * Opens a regular file the walk found, through the held directories below the checkpoint (never by
 * path), refusing a link (a swap since the walk). Refusals name the file by its path in the checkpoint.
 */
async function openPlain(cursor: DirCursor, file: FoundFile): Promise<FileHandle> {
  try {
    return await (await cursor.at(file.dirs)).openFile(file.name);
  } catch (err) {
    return refused(err, file.rel);
  }
}

/** Opens the regular file a symlink the walk found leads to, resolved inside the workspace only (resolveInside). */
async function openLinked(ck: HeldCheckpoint, file: FoundFile): Promise<FileHandle> {
  let target: Resolved;
  try {
    target = await resolveInside(ck.root, [...ck.names, ...file.dirs, file.name], ck.paths);
  } catch (err) {
    if (!(err instanceof UnresolvedPath)) throw err;
    if (err.kind === 'outside') throw invalidPath(403, `checkpoint file ${file.rel} is a symlink leading outside the workspace`);
    if (err.kind === 'special') throw invalidCheckpoint(`checkpoint entry ${file.rel} is a symlink to something other than a regular file`);
    if (err.kind === 'unreadable') unreadable(file.rel);
    throw invalidPath(404, `checkpoint file ${file.rel} is a dangling symlink`);
  }
  if ('file' in target) return target.file;
  await target.close();
  throw invalidCheckpoint(`checkpoint entry ${file.rel} is a symlink to something other than a regular file`);
}

/** A component refused while walking: the refusal names the entry by its path in the checkpoint, and nothing else. */
function refused(err: unknown, rel: string): never {
  if (!(err instanceof BeneathError)) throw err;
  switch (err.refusal) {
    case 'link':
      throw invalidCheckpoint(`checkpoint entry ${rel} was replaced by a symlink while it was being read; submit a checkpoint that is not changing`);
    case 'missing':
      throw invalidCheckpoint(`checkpoint entry ${rel} disappeared while it was being read; submit a checkpoint that is not changing`);
    case 'not-directory':
    case 'not-file':
      throw invalidCheckpoint(`checkpoint entry ${rel} changed kind while it was being read, or is not a regular file or directory`);
    default:
      return unreadable(rel);
  }
}

function unreadable(rel: string): never {
  throw invalidCheckpoint(`cannot read checkpoint entry ${rel}`);
}

/**
 * Stages one open file (closed here): copied (hashed, holes kept) unless its inode was staged already, in which case
 * it is staged as a hard link to that copy with the same hash. `limit`: bytes copied so far and the most allowed.
 */
async function stageFile(
  handle: FileHandle,
  staged: string,
  byInode: Map<string, Staged>,
  limit: { copied: number; max: number },
): Promise<{ sha256: string; size: number; copied: boolean }> {
  try {
    const st = await handle.stat();
    const inode = `${st.dev}:${st.ino}`;
    const same = byInode.get(inode);
    if (same) {
      await link(same.staged, staged);
      return { sha256: same.sha256, size: same.size, copied: false };
    }
    const { sha256, size } = await copyHashed(handle, staged, limit, st.size);
    byInode.set(inode, { staged, sha256, size });
    return { sha256, size, copied: true };
  } finally {
    await handle.close();
  }
}

/** Read size of the copy: large enough for few system calls, small enough that hashing and writing a chunk find it in cache. */
const COPY_CHUNK = 1024 * 1024;
/** Chunks in flight: one being read, one being hashed and written, one whose write may still be finishing. */
const COPY_BUFFERS = 3;
/** While a large file is copied, its bytes written so far are flushed in the background this often, so the store's fsync finds little left. */
const SYNC_EVERY = 128 * 1024 * 1024;

/**
 * Copies the open file to `staged` (64 KiB blocks of zeros left as holes), hashing its full content;
 * refuses past the limit. One pass over the bytes, three things at once: while chunk i is hashed
 * (this thread), the same buffer is written to the staged copy and chunk i + 1 is read (libuv's
 * threads), so on two cores the copy costs about its slowest part, not the sum of reading, hashing
 * and writing. The hash and the copy are of the very same buffer, so what is archived and graded is
 * exactly what was hashed, whatever the agent does to its file meanwhile; a buffer is read into
 * again only once its write is done. The bytes written are flushed in the background every
 * SYNC_EVERY (fdatasync, overlapping the copy), so the one fsync the store then makes is short.
 */
async function copyHashed(handle: FileHandle, staged: string, limit: { copied: number; max: number }, sizeHint: number): Promise<{ sha256: string; size: number }> {
  // A plain read/write loop rather than FileHandle streams: a FileHandle whose stream has ended
  // can make a later close() wait forever, which would hang the grading request.
  const hash = createHash('sha256');
  const out = await open(staged, 'wx', 0o444);
  try {
    const sparse = new SparseWriter(out);
    // Sized to the file (as stat'ed; one that grew since is still read to its end): a small file does not allocate megabytes.
    const size = Math.min(COPY_CHUNK, Math.max(sizeHint + 1, 4096));
    const buffers = Array.from({ length: sizeHint < size ? 2 : COPY_BUFFERS }, () => Buffer.allocUnsafe(size));
    /** Per buffer, the write of the last chunk read into it; the writes themselves go out in order, one after another. */
    const written: Array<Promise<void>> = buffers.map(() => Promise.resolve());
    let writing: Promise<void> = Promise.resolve();
    let syncing: Promise<void> | null = null;
    let syncedTo = 0;
    let position = 0;
    let reading = handle.read(buffers[0]!, 0, size, 0);
    try {
      for (let i = 0; ; i++) {
        const { bytesRead } = await reading;
        if (bytesRead === 0) break;
        position += bytesRead;
        if (limit.copied + position > limit.max) throw tooLarge(limit.copied + position, limit.max, null);
        const chunk = buffers[i % buffers.length]!.subarray(0, bytesRead);
        writing = writing.then(() => sparse.write(chunk));
        writing.catch(() => undefined); // awaited below; a failure must not also surface as unhandled
        written[i % buffers.length] = writing;
        const next = (i + 1) % buffers.length;
        await written[next];
        reading = handle.read(buffers[next]!, 0, size, position);
        hash.update(chunk); // while the same bytes are being written and the next ones read
        if (syncing === null && position - syncedTo >= SYNC_EVERY) {
          syncedTo = position;
          syncing = writing.then(() => out.datasync()).finally(() => void (syncing = null));
          syncing.catch(() => undefined);
        }
      }
      await writing;
      await syncing;
    } catch (err) {
      // Nothing may still be using the descriptors when they are closed.
      await Promise.allSettled([reading, writing, syncing]);
      throw err;
    }
    return { sha256: hash.digest('hex'), size: await sparse.end() };
  } finally {
    await out.close();
  }
}
