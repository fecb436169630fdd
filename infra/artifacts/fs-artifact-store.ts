import { createHash, randomUUID } from 'node:crypto';
import { constants, createReadStream, readlinkSync } from 'node:fs';
import { access, chmod, link, lstat, mkdir, open, readdir, rm, stat, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  ArtifactNotFoundError,
  ArtifactStoreUnavailableError,
  artifactKey,
  type ArtifactInfo,
  type ArtifactStore,
  type PutResult,
} from '../../modules/artifacts/artifact-store.port.js';
import { SparseWriter } from '../../modules/artifacts/sparse-writer.js';
import { BlobGroupCommit, fsyncPath, type GroupCommitOptions } from './blob-group-commit.js';
import { assertDeclared, checkSize, verifyBody, verifyBuffer, VerifyingStream, type Declared } from './content-verifier.js';

const UNWRITABLE = new Set(['EACCES', 'EPERM', 'EROFS']);

/**
 * Temp files of puts that never finished (a killed finalisation can leave a checkpoint-sized one)
 * are removed when the store opens. A temp file is named `<sha256>.<writer>.<pid>.<uuid>`, where
 * `writer` identifies this machine and pid namespace: a file of this writer whose pid is not alive
 * was left by a dead process and goes at once; a live pid's file is kept (it may be being written).
 * A file of another machine or container sharing the directory, or named before writers were
 * recorded, goes once it has not been modified for STALE_TEMP_MS: a live put writes continuously.
 */
export const STALE_TEMP_MS = 60 * 60 * 1000;
const TEMP_NAME = /^[0-9a-f]{64}\.([0-9a-f]{12})\.(\d+)\.[0-9a-f-]{36}$/;
/** tmp/'s subdirectories: the first two hex digits of the content's sha256, as the blobs' shards. */
const TEMP_SHARD = /^[0-9a-f]{2}$/;

export interface TempSweepOptions {
  /** Whether a pid of this writer is alive (default: signal 0). */
  alive?: (pid: number) => boolean;
  /** Now, in ms since the epoch (default: the clock), for the age of other writers' files. */
  now?: number;
  staleAfterMs?: number;
}

/** This machine and pid namespace, hashed: pids are only comparable within one. */
export const TEMP_WRITER = createHash('sha256').update(`${hostname()}\0${pidNamespace()}`).digest('hex').slice(0, 12);

function pidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return 'unknown';
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the stale temp files of `<dir>/tmp/<2 hex>/` and, from stores written before temp files were
 * sharded, of `<dir>/tmp/` itself (see STALE_TEMP_MS); returns their paths under tmp/. Best effort: what
 * cannot be removed stays; directories and links stay.
 */
export async function sweepStaleTemp(dir: string, options: TempSweepOptions = {}): Promise<string[]> {
  const judge = { alive: options.alive ?? pidAlive, now: options.now ?? Date.now(), staleAfterMs: options.staleAfterMs ?? STALE_TEMP_MS };
  const tmp = join(dir, 'tmp');
  const removed: string[] = [];
  for (const entry of await readdir(tmp, { withFileTypes: true }).catch(() => [])) {
    if (entry.isDirectory() && TEMP_SHARD.test(entry.name)) {
      for (const name of await readdir(join(tmp, entry.name)).catch((): string[] => [])) {
        if (await removedIfStale(join(tmp, entry.name, name), name, judge)) removed.push(`${entry.name}/${name}`);
      }
    } else if (await removedIfStale(join(tmp, entry.name), entry.name, judge)) removed.push(entry.name);
  }
  return removed;
}

/** A plain temp file left by a dead writer of this machine, or not modified for staleAfterMs, removed; true when it went. */
async function removedIfStale(path: string, name: string, judge: Required<TempSweepOptions>): Promise<boolean> {
  const st = await lstat(path).catch(() => null);
  if (!st?.isFile()) return false;
  const ours = TEMP_NAME.exec(name);
  const pid = ours && ours[1] === TEMP_WRITER ? Number(ours[2]) : null;
  const stale = pid !== null ? pid !== process.pid && !judge.alive(pid) : judge.now - st.mtimeMs > judge.staleAfterMs;
  return stale && rm(path, { force: true }).then(() => true, () => false);
}
const FULL = new Set(['ENOSPC', 'EDQUOT']);
/** Read size when a whole file is checked, taken in or a large blob read out: 64 KiB stream chunks cost about twice the CPU per byte. */
const FILE_CHUNK = 1024 * 1024;

/**
 * Content-addressed blobs on a local filesystem: `<dir>/sha256/<2 hex>/<hex>`, written through a
 * temp file in `<dir>/tmp/<2 hex>/` (same filesystem, so the final rename is atomic; temp files of puts that
 * never finished are removed at open, see STALE_TEMP_MS). A blob becomes visible
 * only after its bytes matched the declaration and were fsynced; the directory entry is fsynced too,
 * so a put that returned survives a crash. Puts made together share those fsyncs (BlobGroupCommit:
 * a burst of 10,000 small files costs a few hundred barriers, not 20,000 fsyncs one after another),
 * and a put of content already being put waits for that one instead of writing it again.
 * Blobs are created read-only: they are never rewritten.
 * Sparse content stays sparse: 64 KiB-aligned blocks of zeros are left as holes (see SparseWriter),
 * so a 1 GiB file of zeros with a few kilobytes of data takes kilobytes here, and reads back whole.
 * putFile takes a file in by a hard link when it can: a staged checkpoint's bytes are written once.
 */
export class FsArtifactStore implements ArtifactStore {
  readonly backend = 'fs' as const;

  /** Puts being stored, by sha256: a second put of the same content waits for the first. */
  private readonly storing = new Map<string, Promise<PutResult>>();
  private readonly commits: BlobGroupCommit;
  /** tmp/'s shard directories known to exist (see tempPath). */
  private readonly tempShards = new Set<string>();

  private constructor(
    private readonly dir: string,
    /** Temp files of unfinished puts removed when the store opened (sweepStaleTemp). */
    readonly sweptTemp: readonly string[],
    commit: GroupCommitOptions,
  ) {
    this.commits = new BlobGroupCommit(commit);
  }

  /** `commit`: how puts are made durable together (tests inject a failing or stalled flush). */
  static async open(dir: string, sweep: TempSweepOptions = {}, commit: GroupCommitOptions = {}): Promise<FsArtifactStore> {
    const root = resolve(dir);
    try {
      await mkdir(join(root, 'sha256'), { recursive: true });
      await mkdir(join(root, 'tmp'), { recursive: true });
      await access(join(root, 'tmp'), constants.W_OK);
    } catch (err) {
      throw unavailable(root, 'opening the store', err);
    }
    return new FsArtifactStore(root, await sweepStaleTemp(root, sweep), commit);
  }

  async put(body: Readable | Buffer, declared: Declared): Promise<PutResult> {
    assertDeclared(declared);
    const info: ArtifactInfo = { key: artifactKey(declared.sha256), sha256: declared.sha256, size: declared.size };
    // The same content being stored by another put: once it is durable, this one only checks its body.
    for (let earlier = this.storing.get(declared.sha256); earlier; earlier = this.storing.get(declared.sha256)) {
      if (await earlier.then(() => true, () => false)) return this.alreadyStored(body, declared, info);
    }
    const storing = this.store(body, declared, info);
    this.storing.set(declared.sha256, storing);
    try {
      return await storing;
    } finally {
      if (this.storing.get(declared.sha256) === storing) this.storing.delete(declared.sha256);
    }
  }

  /** Writes the body to a temp file (checked, not yet synced) and hands it to the group commit. */
  private async store(body: Readable | Buffer, declared: Declared, info: ArtifactInfo): Promise<PutResult> {
    if (await this.exists(declared.sha256)) return this.alreadyStored(body, declared, info);
    const temp = this.tempPath(declared.sha256);
    try {
      const handle = await this.inTempShard(temp, () => writeTemp(temp, body, declared));
      const created = await this.commits.commit(temp, join(this.dir, info.key), { handle });
      return { ...info, created };
    } catch (err) {
      await rm(temp, { force: true });
      throw isFsError(err, UNWRITABLE) || isFsError(err, FULL) ? unavailable(this.dir, `writing ${info.key}`, err) : err;
    }
  }

  /** Still reads the body: a caller whose bytes do not match what it declared has a bug to hear about. */
  private async alreadyStored(body: Readable | Buffer, declared: Declared, info: ArtifactInfo): Promise<PutResult> {
    await verifyBody(body, declared);
    return { ...info, created: false };
  }

  /**
   * The file is hard-linked into tmp/ (no byte copied or written again), made read-only, checked
   * against the declaration while it is fsynced, and committed as a put's temp file is (the batch's
   * flush then finds nothing left to write). Where it cannot be
   * linked (another filesystem, no hard links) or the content is stored already, it goes through put(),
   * except that content stored already and `hashedAsWritten` only has its size checked (no second read).
   */
  async putFile(file: string, declared: Declared, options: { hashedAsWritten?: boolean } = {}): Promise<PutResult> {
    assertDeclared(declared);
    const info: ArtifactInfo = { key: artifactKey(declared.sha256), sha256: declared.sha256, size: declared.size };
    const temp = this.tempPath(declared.sha256);
    if (await this.exists(declared.sha256)) {
      // Stored already (a checkpoint submitted again): a writer that hashed what it wrote is not read a second time either.
      if (!options.hashedAsWritten) return this.put(createReadStream(file, { highWaterMark: FILE_CHUNK }), declared);
      await checkSize(file, declared);
      return { ...info, created: false };
    }
    // Not linked (or tmp/'s shard could not be made): put() copies it, and reports a store it cannot write to.
    if (!(await this.inTempShard(temp, () => linkedFile(file, temp)).catch(() => false))) return this.put(createReadStream(file, { highWaterMark: FILE_CHUNK }), declared);
    try {
      await chmod(temp, 0o444);
      // The check reads (CPU) while the fsync writes its bytes out (disk): both before the rename.
      const check = options.hashedAsWritten ? checkSize(temp, declared) : verifyBody(createReadStream(temp, { highWaterMark: FILE_CHUNK }), declared);
      await Promise.all([check, fsyncPath(temp)]);
      const created = await this.commits.commit(temp, join(this.dir, info.key), { synced: true });
      return { ...info, created };
    } catch (err) {
      await rm(temp, { force: true });
      throw isFsError(err, UNWRITABLE) || isFsError(err, FULL) ? unavailable(this.dir, `storing ${info.key}`, err) : err;
    }
  }

  /**
   * A temp file goes in tmp/<2 hex>/, by its content's sha256 like the blob it becomes: one tmp/ for
   * every put made file creation the bottleneck of a burst (each create, unlink and rename takes the
   * directory's lock; 10,000 small puts, 64 at a time, ran at 1,250-1,760/s with one, 2,210-4,725/s with 256).
   */
  private tempPath(sha256: string): string {
    return join(this.dir, 'tmp', sha256.slice(0, 2), `${sha256}.${TEMP_WRITER}.${process.pid}.${randomUUID()}`);
  }

  /** Runs `create` (which makes `temp`) with temp's shard made first where it is not known to exist; a shard removed meanwhile is made again. */
  private async inTempShard<T>(temp: string, create: () => Promise<T>): Promise<T> {
    const shard = dirname(temp);
    if (this.tempShards.has(shard)) {
      try {
        return await create();
      } catch (err) {
        if (!isFsError(err, new Set(['ENOENT'])) || (await pathIsDirectory(shard))) throw err;
        this.tempShards.delete(shard);
      }
    }
    await mkdir(shard, { recursive: true });
    this.tempShards.add(shard);
    return create();
  }

  async get(sha256: string): Promise<Readable> {
    const path = join(this.dir, artifactKey(sha256));
    try {
      const handle = await open(path, 'r');
      // A checkpoint-sized blob streams in FILE_CHUNK reads; a small one as before, in 64 KiB.
      const size = await handle.stat().then((st) => st.size, async (err: unknown) => {
        await handle.close();
        throw err;
      });
      return handle.createReadStream({ highWaterMark: Math.min(FILE_CHUNK, Math.max(size, 64 * 1024)) });
    } catch (err) {
      if (isFsError(err, new Set(['ENOENT']))) throw new ArtifactNotFoundError(sha256);
      throw err;
    }
  }

  localFile(sha256: string): string {
    return join(this.dir, artifactKey(sha256));
  }

  async stat(sha256: string): Promise<ArtifactInfo | null> {
    const key = artifactKey(sha256);
    try {
      const st = await stat(join(this.dir, key));
      return { key, sha256, size: st.size };
    } catch (err) {
      if (isFsError(err, new Set(['ENOENT']))) return null;
      throw err;
    }
  }

  async exists(sha256: string): Promise<boolean> {
    return (await this.stat(sha256)) !== null;
  }

  async close(): Promise<void> {
    // Nothing is held open between calls.
  }
}

/**
 * The body, checked against its declaration, in a new file: not synced (the group commit's barrier
 * does that through the handle returned, still open, and closes it).
 */
async function writeTemp(path: string, body: Readable | Buffer, declared: Declared): Promise<FileHandle> {
  // A body in memory is checked whole before a file exists: no stream machinery per small file.
  if (Buffer.isBuffer(body)) verifyBuffer(body, declared);
  const handle = await open(path, 'wx', 0o444);
  try {
    // Holes stay holes: aligned blocks of zeros are skipped, and the size is set when the body ends.
    const sparse = new SparseWriter(handle);
    if (Buffer.isBuffer(body)) {
      await sparse.write(body);
      await sparse.end();
      return handle;
    }
    // A Writable rather than an async-function destination: on Node 20 the latter turns a write error
    // such as ENOSPC into a bare AbortError.
    const file = new Writable({
      write(chunk: Buffer, _encoding, done) {
        sparse.write(chunk).then(() => done(), done);
      },
      final(done) {
        sparse.end().then(() => done(), done);
      },
    });
    await pipeline(body, new VerifyingStream(declared), file);
    return handle;
  } catch (err) {
    await handle.close();
    throw err;
  }
}

async function pathIsDirectory(path: string): Promise<boolean> {
  return stat(path).then((st) => st.isDirectory(), () => false);
}

/** Hard-links `file` at `temp`; false (nothing left at `temp`) where it cannot be linked or is not a regular file (link(2) would link a symlink itself). */
async function linkedFile(file: string, temp: string): Promise<boolean> {
  try {
    await link(file, temp);
  } catch {
    return false;
  }
  if ((await lstat(temp)).isFile()) return true;
  await rm(temp, { force: true });
  return false;
}

// Duck-typed rather than `instanceof Error`: errors raised by node:fs may come from another realm (vm contexts, jest).
function isFsError(err: unknown, codes: Set<string>): err is NodeJS.ErrnoException {
  return typeof err === 'object' && err !== null && codes.has(String((err as NodeJS.ErrnoException).code));
}

function unavailable(dir: string, action: string, err: unknown): ArtifactStoreUnavailableError {
  const code = (err as NodeJS.ErrnoException).code ?? 'unknown error';
  const why = FULL.has(code) ? 'the disk is full' : UNWRITABLE.has(code) ? 'permission denied' : 'it failed';
  return new ArtifactStoreUnavailableError(
    `filesystem artifact store at ${dir}: ${why} (${code}) while ${action}: ${(err as Error).message}`,
    { cause: err },
  );
}
