import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { hashOpenFile, HeldDir, utf8Name } from './held-dir.js';

export interface FileDigest {
  /** Relative to the hashed directory, posix separators. */
  path: string;
  size: number;
  sha256: string;
}

interface MemoEntry {
  mtimeMs: number;
  size: number;
  sha256: string;
}

/**
 * File digests remembered by (absolute path, mtime, size): a file whose stat is unchanged is not read
 * again. Kept in memory and, with `file`, in a JSON file shared by later processes (a base model of
 * several GB is hashed once, not once per run or grading). A lost write race only costs a re-hash.
 */
export class HashMemo {
  private entries: Map<string, MemoEntry> | null = null;
  private dirty = false;

  constructor(readonly file?: string) {}

  async digest(abs: string, info: { mtimeMs: number; size: number }): Promise<string> {
    const entries = await this.load();
    const known = entries.get(abs);
    if (known && known.mtimeMs === info.mtimeMs && known.size === info.size) return known.sha256;
    const hash = createHash('sha256');
    await pipeline(createReadStream(abs), hash);
    const sha256 = hash.digest('hex');
    entries.set(abs, { mtimeMs: info.mtimeMs, size: info.size, sha256 });
    this.dirty = true;
    return sha256;
  }

  /** Writes the memo file (when there is one and something changed); atomic replace. */
  async save(): Promise<void> {
    if (!this.file || !this.dirty || !this.entries) return;
    await mkdir(path.dirname(this.file), { recursive: true });
    const temp = `${this.file}.${randomUUID()}.tmp`;
    try {
      await writeFile(temp, JSON.stringify({ version: 1, files: Object.fromEntries(this.entries) }));
      await rename(temp, this.file);
      this.dirty = false;
    } catch {
      await rm(temp, { force: true });
    }
  }

  private async load(): Promise<Map<string, MemoEntry>> {
    if (this.entries) return this.entries;
    this.entries = new Map();
    if (!this.file) return this.entries;
    try {
      const parsed = JSON.parse(await readFile(this.file, 'utf8')) as { files?: Record<string, MemoEntry> };
      for (const [k, v] of Object.entries(parsed.files ?? {})) {
        if (typeof v?.sha256 === 'string' && typeof v.mtimeMs === 'number' && typeof v.size === 'number') this.entries.set(k, v);
      }
    } catch {
      // absent or torn: start empty
    }
    return this.entries;
  }
}

/** One memo per process for callers that keep none of their own. */
const processMemo = new HashMemo();

/**
 * Every regular file under `dir` (symlinks followed, as the pack's copy dereferences them), sorted by
 * path. Only for trees the harness or the operator made (task sources, base models, staged copies);
 * a tree the agent could have written goes through agentDirectoryDigests.
 */
export async function directoryDigests(dir: string, memo: HashMemo = processMemo): Promise<FileDigest[]> {
  const out: FileDigest[] = [];
  const walk = async (abs: string, rel: string): Promise<void> => {
    for (const name of (await readdir(abs)).sort()) {
      const child = path.join(abs, name);
      const childRel = rel ? `${rel}/${name}` : name;
      const info = await stat(child);
      if (info.isDirectory()) await walk(child, childRel);
      else if (info.isFile()) out.push({ path: childRel, size: info.size, sha256: await memo.digest(child, info) });
    }
  };
  await walk(dir, '');
  await memo.save();
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * Every regular file under `dir`, a tree the agent could have written (a workspace's models/, say),
 * sorted by path: walked and read through directory descriptors (modules/workspace-fs), so no link is
 * followed and nothing outside `dir` is opened or listed, whatever is swapped meanwhile. Links,
 * special files and names that are not UTF-8 are left out (a file replaced by a link then hashes
 * differently). No memo: the owner of a file can set its mtime back.
 */
export async function agentDirectoryDigests(dir: string): Promise<FileDigest[]> {
  const out: FileDigest[] = [];
  const walk = async (held: HeldDir, rel: string): Promise<void> => {
    for (const raw of await held.list()) {
      const name = utf8Name(raw);
      if (name === null) continue;
      const childRel = rel ? `${rel}/${name}` : name;
      const info = await held.lstat(name);
      if (info?.isDirectory()) {
        const sub = await held.openDir(name);
        try {
          await walk(sub, childRel);
        } finally {
          await sub.close();
        }
      } else if (info?.isFile()) {
        const file = await held.openFile(name);
        try {
          out.push({ path: childRel, ...(await hashOpenFile(file, info.size)) });
        } finally {
          await file.close();
        }
      }
    }
  };
  const root = await HeldDir.open(dir);
  try {
    await walk(root, '');
  } finally {
    await root.close();
  }
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The content hash of a tree the agent could have written (see agentDirectoryDigests); comparable with directoryHash of the same files. */
export async function agentDirectoryHash(dir: string): Promise<string> {
  return digestListHash(await agentDirectoryDigests(dir));
}

/** A stable hash of a file list: sha256 over `path NUL size NUL sha256 LF` lines in path order. */
export function digestListHash(files: readonly FileDigest[]): string {
  const hash = createHash('sha256');
  for (const f of [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) hash.update(`${f.path}\0${f.size}\0${f.sha256}\n`);
  return hash.digest('hex');
}

/** The content hash of a directory (file paths, sizes and contents; not times or modes). */
export async function directoryHash(dir: string, memo?: HashMemo): Promise<string> {
  return digestListHash(await directoryDigests(dir, memo));
}
