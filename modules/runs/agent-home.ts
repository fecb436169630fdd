import { createHash } from 'node:crypto';
import { constants, type BigIntStats } from 'node:fs';
import { chown, lstat, mkdir, open, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';

/**
 * The agent's home: a fresh directory per run, outside the workspace, where its CLI keeps config,
 * sessions and caches. The harness writes the adapter's config files into it before the agent starts,
 * archives what changed while the agent runs (watchAgentHome: a CLI's session then survives a SIGKILL
 * of the harness) and archives it whole after the agent has gone; on resume elsewhere it is restored
 * from those archives (restoreAgentHome). Everything in it is the agent's: read it as hostile.
 */

/** Writes the adapter's files (paths relative to `home`, checked by the agent registry), owned by the agent. */
export async function writeAgentHomeFiles(home: string, files: Record<string, string>, uid?: number): Promise<void> {
  for (const [rel, content] of Object.entries(files)) {
    const file = path.join(home, rel);
    if (!file.startsWith(`${home}${path.sep}`)) throw new Error(`agent home file "${rel}" is outside the home`);
    for (let dir = path.dirname(file); dir !== home; dir = path.dirname(dir)) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    }
    await writeFile(file, content, { mode: 0o600 });
    if (uid !== undefined) await chownUpTo(home, file, uid);
  }
}

async function chownUpTo(home: string, file: string, uid: number): Promise<void> {
  for (let p = file; p !== home; p = path.dirname(p)) await chown(p, uid, uid);
}

export interface ArchivedHome {
  files: Array<{ path: string; sha256: string; size: number }>;
  skipped: number;
  skippedReason?: string;
  /** Set by watchAgentHome: `files` (and `chunked`) list only what changed since its previous pass. */
  changedOnly?: true;
  /** With changedOnly: files archived by an earlier pass that are gone now. */
  removed?: string[];
  /** With changedOnly: files larger than a chunk, stored in pieces (see chunksOf). */
  chunked?: ChunkedHomeFile[];
}

/** A piece of a file, as stored (after redaction). */
export interface HomeChunk {
  sha256: string;
  size: number;
}

/**
 * A file archived in pieces: `chunks` in order, `size` their total, `sha256` the hash of the list
 * (chunkListHash), not of the bytes. Pieces already stored by an earlier pass are not stored again, so
 * a transcript that grows or a database that changes a page costs what changed, not the whole file.
 */
export interface ChunkedHomeFile {
  path: string;
  sha256: string;
  size: number;
  chunks: HomeChunk[];
}

/** A file of the home as of an archive: whole (`sha256` is its blob) or in `chunks`. */
export type HomeFile = { path: string; sha256: string; size: number; chunks?: HomeChunk[] };

export interface HomeLimits {
  maxFiles: number;
  maxFileBytes: number;
  /** The watcher stores a file larger than this in pieces of about this size. Default 1 MiB. */
  chunkBytes?: number;
}

const DEFAULT_CHUNK_BYTES = 1 << 20;
/** Bounds that keep an AgentHomeArchived event far below the ledger's 256 KiB (a piece is about 90 bytes of it). */
const MAX_PIECES_PER_FILE = 256;
const MAX_PIECES_PER_PASS = 1500;

/**
 * Stores each regular file of the home (sorted by path, at most `maxFiles`, each at most
 * `maxFileBytes`) through `store` — the run's redacting store, so credentials a CLI wrote into its
 * state never reach the archive. Links, devices and FIFOs are skipped and counted; files are opened
 * without following links, so a link swapped in meanwhile is not read either.
 */
export async function archiveAgentHome(home: string, store: ArtifactStore, limits: HomeLimits): Promise<ArchivedHome> {
  const tree = await walkHome(home);
  const files: ArchivedHome['files'] = [];
  const reasons = new Set<string>();
  let skipped = tree.others.length;
  if (skipped) reasons.add('not a regular file');
  for (const [i, rel] of tree.files.entries()) {
    const read = i < limits.maxFiles ? await readNoFollow(path.join(home, rel), limits.maxFileBytes) : `more than ${limits.maxFiles} files`;
    if (typeof read === 'string') {
      skipped++;
      reasons.add(read);
      continue;
    }
    files.push(await storeFile(store, rel, read.bytes));
  }
  return { files, skipped, ...reasonsOf(reasons) };
}

async function storeFile(store: ArtifactStore, rel: string, bytes: Buffer): Promise<ArchivedHome['files'][number]> {
  const put = await store.put(bytes, { sha256: createHash('sha256').update(bytes).digest('hex'), size: bytes.length });
  return { path: rel, sha256: put.sha256, size: put.size };
}

function reasonsOf(reasons: Set<string>): { skippedReason?: string } {
  return reasons.size ? { skippedReason: [...reasons].sort().join('; ').slice(0, 1000) } : {};
}

/** The home's regular files and its other entries (links, FIFOs, devices), sorted by path; links are never followed. */
async function walkHome(home: string): Promise<{ files: string[]; others: string[] }> {
  const files: string[] = [];
  const others: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    const entries = await readdir(path.join(home, rel), { withFileTypes: true }).catch(() => []);
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const child = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) await walk(child);
      else (entry.isFile() ? files : others).push(child);
    }
  };
  if ((await lstat(home).catch(() => null))?.isDirectory()) await walk('');
  return { files, others };
}

/** The file's bytes and the status of what was read, or why it was not read. */
async function readNoFollow(file: string, maxBytes: number): Promise<{ bytes: Buffer; stat: BigIntStats } | string> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return 'unreadable or replaced by a link';
  }
  try {
    const stat = await handle.stat({ bigint: true });
    if (!stat.isFile()) return 'not a regular file';
    if (stat.size > BigInt(maxBytes)) return `larger than ${maxBytes} bytes`;
    return { bytes: await handle.readFile(), stat };
  } finally {
    await handle.close();
  }
}

/** What tells a file's version apart without reading it: size, inode and nanosecond times. */
function versionOf(stat: BigIntStats): string {
  return `${stat.size}:${stat.ino}:${stat.mtimeNs}:${stat.ctimeNs}`;
}

/**
 * Archives the home as it changes, so the CLI's session survives a SIGKILL of the harness: every
 * `everyMs` (passes never overlap), the regular files whose size, inode or times changed since the
 * previous pass are stored through `store` (the run's redacting store) with archiveAgentHome's care
 * (no links followed, `maxFiles` over the whole home, `maxFileBytes` each); one larger than
 * `chunkBytes` in pieces (`chunked`), so a 12-hour session's growing transcript is not stored whole
 * every pass. A pass that found changes
 * calls `onArchived` with those files only (`changedOnly`), the archived files since gone (`removed`),
 * and the entries it skipped for the first time. A failed pass is reported to `onError` and retried by
 * the next. The returned stop() ends the passes, waiting for one in flight (and for its onArchived).
 */
export function watchAgentHome(
  home: string,
  store: ArtifactStore,
  limits: HomeLimits,
  onArchived: (archived: ArchivedHome) => void | Promise<void>,
  options: { everyMs: number; onError?: (err: unknown) => void },
): () => Promise<void> {
  const state = newHomeWatchState();
  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    timer = setTimeout(() => {
      inFlight = archiveChanges(home, store, limits, state)
        .then(async (archived) => (archived && !stopped ? onArchived(archived) : undefined))
        .catch((err: unknown) => options.onError?.(err))
        .finally(() => (stopped ? undefined : schedule()));
    }, options.everyMs);
    timer.unref();
  };
  schedule();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await inFlight;
  };
}

/** What the watcher remembers between passes: each archived file's version, and the entries already reported skipped. */
export interface HomeWatchState {
  versions: Map<string, string>;
  skipped: Set<string>;
}

export function newHomeWatchState(): HomeWatchState {
  return { versions: new Map(), skipped: new Set() };
}

/** One pass of watchAgentHome: the changes since the last pass (null when none), `state` updated for what was stored. */
export async function archiveChanges(home: string, store: ArtifactStore, limits: HomeLimits, state: HomeWatchState): Promise<ArchivedHome | null> {
  const tree = await walkHome(home);
  const files: ArchivedHome['files'] = [];
  const chunked: ChunkedHomeFile[] = [];
  let piecesInPass = 0;
  const reasons = new Set<string>();
  let skipped = 0;
  const skip = (rel: string, reason: string) => {
    if (state.skipped.has(`${rel}\0${reason}`)) return;
    state.skipped.add(`${rel}\0${reason}`);
    skipped++;
    reasons.add(reason);
  };
  for (const rel of tree.others) skip(rel, 'not a regular file');
  for (const [i, rel] of tree.files.entries()) {
    if (i >= limits.maxFiles) {
      skip(rel, `more than ${limits.maxFiles} files`);
      continue;
    }
    const now = await lstat(path.join(home, rel), { bigint: true }).catch(() => null);
    if (now && state.versions.get(rel) === versionOf(now)) continue;
    const read = await readNoFollow(path.join(home, rel), limits.maxFileBytes);
    if (typeof read === 'string') {
      skip(rel, read);
      continue;
    }
    const chunkBytes = pieceSize(read.bytes.length, limits.chunkBytes ?? DEFAULT_CHUNK_BYTES);
    if (read.bytes.length <= chunkBytes) files.push(await storeFile(store, rel, read.bytes));
    else {
      const pieces = chunksOf(read.bytes, chunkBytes);
      // The event stays small: what does not fit in this pass waits for the next (its version unrecorded).
      if (piecesInPass + pieces.length > MAX_PIECES_PER_PASS) continue;
      piecesInPass += pieces.length;
      chunked.push(await storeChunked(store, rel, pieces));
    }
    state.versions.set(rel, versionOf(read.stat));
  }
  const present = new Set(tree.files);
  const removed = [...state.versions.keys()].filter((rel) => !present.has(rel)).sort();
  for (const rel of removed) state.versions.delete(rel);
  if (!files.length && !chunked.length && !removed.length && !skipped) return null;
  return { files, skipped, ...reasonsOf(reasons), changedOnly: true, ...(removed.length ? { removed } : {}), ...(chunked.length ? { chunked } : {}) };
}

/**
 * Cut points of a file's pieces: each piece ends just after the first newline at or past a multiple of
 * `chunkBytes` (the end of the file if none). A cut depends only on the bytes near it, so appending to
 * a file or changing a region of it leaves the other pieces as they were; and no cut falls inside a
 * line, so a credential (which has no newline) is never split between two pieces, where the redacting
 * store would see neither half as the credential.
 */
export function chunksOf(bytes: Buffer, chunkBytes: number): Buffer[] {
  const pieces: Buffer[] = [];
  let start = 0;
  while (start < bytes.length) {
    const target = Math.max(start + 1, (Math.floor(start / chunkBytes) + 1) * chunkBytes);
    const newline = target >= bytes.length ? -1 : bytes.indexOf(0x0a, target - 1);
    const end = newline < 0 ? bytes.length : newline + 1;
    pieces.push(bytes.subarray(start, end));
    start = end;
  }
  return pieces;
}

/** The hash that names a chunked file: sha256 of its pieces' `sha256:size` lines. */
export function chunkListHash(chunks: readonly HomeChunk[]): string {
  return createHash('sha256').update(chunks.map((c) => `${c.sha256}:${c.size}\n`).join('')).digest('hex');
}

/**
 * The piece size for a file of `size` bytes: `chunkBytes` doubled until the file is at most
 * MAX_PIECES_PER_FILE pieces. Doubling keeps every other cut, so a growing file re-stores its pieces
 * once per doubling, not at every pass.
 */
function pieceSize(size: number, chunkBytes: number): number {
  let bytes = chunkBytes;
  while (size / bytes > MAX_PIECES_PER_FILE) bytes *= 2;
  return bytes;
}

async function storeChunked(store: ArtifactStore, rel: string, pieces: Buffer[]): Promise<ChunkedHomeFile> {
  const chunks: HomeChunk[] = [];
  for (const piece of pieces) {
    const put = await store.put(piece, { sha256: createHash('sha256').update(piece).digest('hex'), size: piece.length });
    chunks.push({ sha256: put.sha256, size: put.size });
  }
  return { path: rel, sha256: chunkListHash(chunks), size: chunks.reduce((n, c) => n + c.size, 0), chunks };
}

/**
 * The home's files as of the newest archive: the last whole archive (if any) with every later
 * changed-only archive applied in order (newer versions replace, `removed` drops). Pure: the
 * harness feeds it the AgentHomeArchived payloads of the run, in seq order.
 */
export function homeFilesOf(archives: readonly ArchivedHome[]): HomeFile[] {
  const files = new Map<string, HomeFile>();
  for (const archive of archives) {
    if (!archive.changedOnly) files.clear();
    for (const rel of archive.removed ?? []) files.delete(rel);
    for (const file of [...archive.files, ...(archive.chunked ?? [])]) files.set(file.path, file);
  }
  return [...files.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** A path an archive may name: relative, normalised, inside the home, no NUL, no `.`/`..` segments. */
function safeHomePath(rel: string): boolean {
  if (!rel || rel.includes('\0') || path.posix.isAbsolute(rel) || rel.includes('\\')) return false;
  return rel.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..');
}

/**
 * Writes archived files back into `home` (created if missing), for a resume on another machine: each
 * blob is read from `store` and checked against its sha256 and size; directories are made 0700 and
 * files 0600, owned by `uid` when given. Every path is checked before anything is written (relative,
 * inside the home, no `..`), and nothing is written through a link: an existing directory on the way
 * must be a real directory, and the file is opened with O_NOFOLLOW. Any refusal throws, naming the path.
 * Files that exist are overwritten; others in the home are left as they are.
 */
export async function restoreAgentHome(home: string, files: readonly HomeFile[], store: ArtifactStore, uid?: number): Promise<void> {
  const bad = files.find((f) => !safeHomePath(f.path));
  if (bad) throw new Error(`agent home file "${bad.path}" is outside the home: refusing to restore`);
  await ensureRealDir(home, uid);
  for (const file of files) {
    const bytes = await blobBytes(store, file);
    const segments = file.path.split('/');
    let dir = home;
    for (const segment of segments.slice(0, -1)) {
      dir = path.join(dir, segment);
      await ensureRealDir(dir, uid);
    }
    await writeNoFollow(path.join(home, file.path), bytes, uid);
  }
}

async function ensureRealDir(dir: string, uid: number | undefined): Promise<void> {
  const st = await lstat(dir).catch(() => null);
  if (st && !st.isDirectory()) throw new Error(`${dir} is not a directory (a link or a file): refusing to restore through it`);
  if (st) return;
  await mkdir(dir, { mode: 0o700 });
  if (uid !== undefined) await chown(dir, uid, uid);
}

/** The file's bytes: its blob, or its pieces in order; each checked against its sha256 and size. */
async function blobBytes(store: ArtifactStore, file: HomeFile): Promise<Buffer> {
  const pieces = file.chunks ?? [file];
  if (file.chunks && chunkListHash(file.chunks) !== file.sha256) throw new Error(`agent home file "${file.path}": its pieces do not match its sha256`);
  const bytes = Buffer.concat(await Promise.all(pieces.map((piece) => pieceBytes(store, file.path, piece))));
  if (bytes.length !== file.size) throw new Error(`agent home file "${file.path}": the stored blob does not match its sha256 and size`);
  return bytes;
}

async function pieceBytes(store: ArtifactStore, rel: string, piece: HomeChunk): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of await store.get(piece.sha256)) parts.push(part as Buffer);
  const bytes = Buffer.concat(parts);
  if (createHash('sha256').update(bytes).digest('hex') !== piece.sha256 || bytes.length !== piece.size) throw new Error(`agent home file "${rel}": the stored blob does not match its sha256 and size`);
  return bytes;
}

async function writeNoFollow(file: string, bytes: Buffer, uid: number | undefined): Promise<void> {
  let handle;
  try {
    handle = await open(file, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
  } catch (err) {
    throw new Error(`cannot restore ${file} without following a link or replacing what is there (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  try {
    if (!(await handle.stat()).isFile()) throw new Error(`${file} is not a regular file: refusing to restore over it`);
    await handle.writeFile(bytes);
    if (uid !== undefined) await handle.chown(uid, uid);
  } finally {
    await handle.close();
  }
}
