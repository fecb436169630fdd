import { fstat, type BigIntStats } from 'node:fs';
import { BeneathError, DirCursor, hashOpenFile, HeldDir } from './held-dir.js';

// Listing and hashing a workspace's read-only world without following any link (the integrity check,
// modules/runs/workspace-integrity.ts): every directory and file is opened through its parent's
// descriptor (held-dir.ts), entries are lstat'ed inside the already-open directory, and files are
// hashed from such descriptors.

const STAT_CONCURRENCY = 16;

/** What stands at a path instead of a readable regular file. */
export type FoundInstead = 'symlink' | 'directory' | 'other' | 'unreadable';

/** A file's identity and change marks, as strings (bigint precision, JSON-serialisable). */
export interface Fingerprint {
  dev: string;
  ino: string;
  size: string;
  mtimeNs: string;
  ctimeNs: string;
}

export type Found = { kind: 'file'; fingerprint: Fingerprint } | { kind: FoundInstead };
export type Hashed = { sha256: string; fingerprint: Fingerprint } | { sha256: null; found?: FoundInstead };

// ---- walking without following links ----

/** Everything under the top directories, by workspace-relative path (the tops themselves included when not directories). */
export async function walkTops(rootDir: HeldDir, tops: readonly string[]): Promise<Map<string, Found>> {
  const found = new Map<string, Found>();
  for (const top of tops) {
    const name = Buffer.from(top);
    const at = await lstatIn(rootDir, name);
    if (at === null) continue;
    if (at === 'unreadable') {
      found.set(top, { kind: at });
      continue;
    }
    const kind = kindOf(at);
    if (kind !== 'directory') found.set(top, kind === 'file' ? { kind, fingerprint: fingerprintOf(at) } : { kind });
    else await walkDir(rootDir, name, top, found);
  }
  return found;
}

/**
 * Lists `name` (inside the held directory `parent`) and below; `path` is its workspace-relative
 * path. Names are handled as bytes, so a name that is not UTF-8 is still found (its path, decoded
 * lossily, then names no file to hash: it is reported without a hash, never skipped).
 */
async function walkDir(parent: HeldDir, name: Buffer, path: string, found: Map<string, Found>): Promise<void> {
  let dir: HeldDir;
  try {
    // Through the parent's descriptor: no component is looked up by its name in the workspace again.
    dir = await parent.openDir(name);
  } catch (err) {
    const refusal = err instanceof BeneathError ? err.refusal : 'unreadable';
    if (refusal === 'missing') return; // removed since it was listed
    // Swapped for a link or a file since it was listed.
    if (refusal === 'link' || refusal === 'not-directory') return void found.set(path, { kind: 'other' });
    // Not readable (EACCES, or out of descriptors in an absurdly deep tree): its files cannot be vouched for.
    return void found.set(path, { kind: 'unreadable' });
  }
  try {
    let names: Buffer[];
    try {
      names = await dir.list();
    } catch {
      return void found.set(path, { kind: 'unreadable' });
    }
    const stats = new Map<Buffer, BigIntStats | 'unreadable' | null>();
    await forEachLimit(names, STAT_CONCURRENCY, async (child) => void stats.set(child, await lstatIn(dir, child)));
    for (const child of names) {
      const st = stats.get(child);
      if (!st) continue;
      const childPath = `${path}/${child.toString('utf8')}`;
      if (st === 'unreadable') {
        found.set(childPath, { kind: st });
        continue;
      }
      const kind = kindOf(st);
      if (kind === 'directory') {
        found.set(childPath, { kind });
        await walkDir(dir, child, childPath, found);
      } else found.set(childPath, kind === 'file' ? { kind, fingerprint: fingerprintOf(st) } : { kind });
    }
  } finally {
    await dir.close();
  }
}

/** lstat of an entry of a held directory; null when it is gone, `unreadable` when it cannot be stat'ed. */
async function lstatIn(dir: HeldDir, name: Buffer): Promise<BigIntStats | 'unreadable' | null> {
  try {
    return await dir.lstat(name, { bigint: true });
  } catch {
    return 'unreadable';
  }
}

function kindOf(st: BigIntStats): Found['kind'] {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'directory';
  if (st.isSymbolicLink()) return 'symlink';
  return 'other';
}

function fingerprintOf(st: BigIntStats): Fingerprint {
  return { dev: String(st.dev), ino: String(st.ino), size: String(st.size), mtimeNs: String(st.mtimeNs), ctimeNs: String(st.ctimeNs) };
}

export function sameFingerprint(a: Fingerprint, b: Fingerprint): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}

// ---- hashing ----

/**
 * Hashes one workspace file, opened component by component from the held root (no link followed,
 * nothing outside opened), in 1 MiB steps through the threadpool. The fingerprint is taken from the
 * descriptor before reading: if the file changes while it is read, the next cheap check sees a
 * different stat and hashes it again.
 */
export async function hashFile(cursor: DirCursor, path: string): Promise<Hashed> {
  const parts = path.split('/');
  const name = parts.pop()!;
  try {
    const dir = await cursor.at(parts);
    let file;
    try {
      file = await dir.openFile(name);
    } catch (err) {
      if (!(err instanceof BeneathError) || err.refusal !== 'not-file') throw err;
      const st = await dir.lstat(name).catch(() => null);
      return { sha256: null, found: st?.isDirectory() ? 'directory' : 'other' };
    }
    try {
      const st = await fstatBig(file.fd);
      const { sha256 } = await hashOpenFile(file, Number(st.size));
      const fingerprint = fingerprintOf(st);
      return { sha256, fingerprint };
    } finally {
      await file.close();
    }
  } catch (err) {
    // Cannot be verified: a difference, never a pass.
    const refusal = err instanceof BeneathError ? err.refusal : 'unreadable';
    if (refusal === 'missing') return { sha256: null };
    if (refusal === 'link') return { sha256: null, found: 'symlink' };
    if (refusal === 'not-directory') return { sha256: null, found: 'other' };
    return { sha256: null, found: 'unreadable' };
  }
}

function fstatBig(fd: number): Promise<BigIntStats> {
  return new Promise((resolve, reject) => fstat(fd, { bigint: true }, (err, st) => (err ? reject(err) : resolve(st))));
}

/** Runs `fn` over `items`, at most `limit` at a time; `worker` (0 to limit-1) says which of them runs it. */
export async function forEachLimit<T>(items: readonly T[], limit: number, fn: (item: T, worker: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (_: unknown, id: number) => {
    while (next < items.length) await fn(items[next++], id);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
