import { createHash } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import { mkdir, mkdtemp, open, opendir, readlink, realpath, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { BlobRef, ManifestEntry } from '../ledger/events/catalog.js';
import { canonicalBytes } from '../ledger/events/canonical-json.js';
import { invalidCheckpoint, invalidPath } from './submission-refused.error.js';
import { isWithin } from './workspace-path.js';

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

/**
 * Copies a checkpoint directory to a private staging directory, hashing as it copies, puts every
 * file into the artifact store and returns the manifest. Only regular files are taken; a symlink is
 * followed only to a regular file inside the workspace. Each file is opened and then checked by
 * where its descriptor really points, so swapping a path for a link between the walk and the copy
 * gains nothing.
 */
export async function archiveCheckpoint(opts: {
  dir: string;
  workspaceRoot: string;
  artifacts: ArtifactStore;
  stagingRoot: string;
}): Promise<ArchivedCheckpoint> {
  const files = await walk(opts.dir, opts.workspaceRoot);
  if (files.length === 0) throw invalidCheckpoint('the checkpoint directory holds no files');
  await mkdir(opts.stagingRoot, { recursive: true });
  const stagedDir = await mkdtemp(path.join(opts.stagingRoot, 'a2rl-submission-'));
  try {
    const manifest: ManifestEntry[] = [];
    for (const file of files) {
      const staged = path.join(stagedDir, ...file.rel.split('/'));
      await mkdir(path.dirname(staged), { recursive: true });
      const { sha256, size } = await copyHashed(file, staged, opts.workspaceRoot);
      await opts.artifacts.put(createReadStream(staged), { sha256, size });
      manifest.push({ path: file.rel, sha256, size });
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

async function walk(dir: string, workspaceRoot: string): Promise<FoundFile[]> {
  const found: FoundFile[] = [];
  const visit = async (abs: string, rel: string, depth: number): Promise<void> => {
    if (depth > MAX_DEPTH) throw invalidCheckpoint(`the checkpoint is nested more than ${MAX_DEPTH} directories deep`);
    for await (const entry of await opendir(abs)) {
      const childAbs = path.join(abs, entry.name);
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        await visit(childAbs, childRel, depth + 1);
        continue;
      }
      if (entry.isSymbolicLink()) {
        let target: string;
        try {
          target = await realpath(childAbs);
        } catch {
          throw invalidPath(404, `checkpoint file ${childRel} is a dangling symlink`);
        }
        if (!isWithin(workspaceRoot, target)) {
          throw invalidPath(403, `checkpoint file ${childRel} is a symlink leading outside the workspace`);
        }
        if (!(await stat(target)).isFile()) {
          throw invalidCheckpoint(`checkpoint entry ${childRel} is a symlink to something other than a regular file`);
        }
      } else if (!entry.isFile()) {
        throw invalidCheckpoint(`checkpoint entry ${childRel} is not a regular file or directory`);
      }
      found.push({ rel: childRel, source: childAbs });
      if (found.length > MAX_CHECKPOINT_FILES) {
        throw invalidCheckpoint(`the checkpoint has more than ${MAX_CHECKPOINT_FILES} files; submit a directory with at most ${MAX_CHECKPOINT_FILES}`);
      }
    }
  };
  await visit(dir, '', 0);
  return found;
}

async function copyHashed(file: FoundFile, staged: string, workspaceRoot: string): Promise<{ sha256: string; size: number }> {
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
    if (!(await handle.stat()).isFile()) throw invalidCheckpoint(`checkpoint entry ${file.rel} is not a regular file`);
    // A plain read/write loop rather than FileHandle streams: a FileHandle whose stream has ended
    // can make a later close() wait forever, which would hang the grading request.
    const hash = createHash('sha256');
    let size = 0;
    const out = await open(staged, 'wx', 0o444);
    try {
      const buffer = Buffer.allocUnsafe(1024 * 1024);
      for (;;) {
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
        if (bytesRead === 0) break;
        const chunk = buffer.subarray(0, bytesRead);
        hash.update(chunk);
        size += bytesRead;
        for (let offset = 0; offset < bytesRead; ) offset += (await out.write(chunk, offset, bytesRead - offset)).bytesWritten;
      }
    } finally {
      await out.close();
    }
    return { sha256: hash.digest('hex'), size };
  } finally {
    await handle.close();
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
