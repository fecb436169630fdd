import { createHash } from 'node:crypto';
import { lstat, mkdir, open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { BeneathError, DirCursor, HeldDir } from '../workspace-fs/held-dir.js';
import type { DataSource } from 'typeorm';
import { diffFiles, MAX_DIFF_BYTES, type FileDiff } from '../../projections/run-analysis/line-diff.js';
import { ArtifactNotFoundError, type ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { A2rlEvent, EventType } from '../ledger/events/catalog.js';
import { streamName } from '../ledger/events/ids.js';
import type { EventStore } from '../ledger/event-store.port.js';
import {
  InvalidReplayPointError,
  OutDirNotEmptyError,
  ReplayError,
  ReplayIntegrityError,
  SeqOutOfRangeError,
  TimeBeforeRunError,
  UnknownRunError,
} from './errors.js';
import { timelineOf, type TimelineEntry } from './timeline.js';
import { WorkspaceIndex, type WorkspaceFile, type WorkspaceState } from './workspace-state.js';

/** A point of a run: a seq, or an ISO 8601 time (the last event that occurred at or before it). */
export type ReplayPoint = number | string;

/** The event a point resolved to: the workspace is taken right after it. */
export interface ResolvedPoint {
  seq: number;
  occurredAt: string;
  type: EventType;
}

export interface MaterializeResult {
  runId: string;
  at: ResolvedPoint;
  outDir: string;
  files: number;
  bytes: number;
}

export interface FileDelta {
  path: string;
  change: 'added' | 'removed' | 'modified';
  before: WorkspaceFile | null;
  after: WorkspaceFile | null;
  /** Line diff of the contents; its `note` says when it is not shown (binary, too large). */
  diff: FileDiff;
}

export interface WorkspaceDiff {
  runId: string;
  from: ResolvedPoint;
  to: ResolvedPoint;
  /** Sorted by path. */
  files: FileDelta[];
}

export interface ReplayDeps {
  events: EventStore;
  readModels: DataSource;
  artifacts: ArtifactStore;
  /** Brings the workspace-revision projection up to date with the ledger; called before each query. */
  catchUp: () => Promise<unknown>;
}

/** Blobs written to disk at once while materialising. */
const WRITE_CONCURRENCY = 8;
/** Blobs up to this size are read into memory and checked before their file is written; larger ones are streamed. */
const BUFFERED_BLOB_BYTES = 4 * 1024 * 1024;
/** A streamed blob's chunks whose writes may be outstanding at once. */
const WRITES_IN_FLIGHT = 4;
/** A local blob's copy: reads of 1 MiB into this many reused buffers (one read, one hashed and written, one whose write may still finish). */
const COPY_CHUNK = 1024 * 1024;
const COPY_BUFFERS = 3;

/** `--at` text → a seq (digits) or an ISO 8601 date-time string. */
export function parseReplayPoint(text: string): ReplayPoint {
  if (/^\d+$/.test(text)) return Number(text);
  // An offset is required: without one JavaScript reads the time as local, so the same command
  // would pick a different event on machines in different time zones (occurredAt is UTC).
  if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(text) && !Number.isNaN(Date.parse(text))) return text;
  throw new InvalidReplayPointError(text);
}

/**
 * Exact replay of a run's workspace from the ledger and the artifact store: the files as they were
 * right after any event, the step-through timeline, and the changes between two points. File
 * contents come from content-addressed blobs and are checked against the recorded sha256.
 *
 * Reproduced: every file the run recorded — data/ and models/<base>/ as provided, what the agent
 * wrote outside them (FileChanged), and checkpoint directories as archived at each submission.
 * Not reproduced: harness files (description.md, instructions.md, run_meta.json), file modes, and
 * what the agent wrote under output/ without submitting it.
 */
export class ReplayService {
  private readonly index: WorkspaceIndex;

  constructor(private readonly deps: ReplayDeps) {
    this.index = new WorkspaceIndex(deps.readModels);
  }

  /** The event a point names; throws for an unknown run, a seq out of range or a time before the run. */
  async resolve(runId: string, at: ReplayPoint): Promise<ResolvedPoint> {
    const stream = streamName(runId);
    if (typeof at === 'number') {
      if (Number.isSafeInteger(at) && at >= 0) {
        for await (const { event } of this.deps.events.readStream(stream, { fromRevision: BigInt(at), maxCount: 1 })) return pointOf(event);
      }
      const last = await this.deps.events.streamRevision(stream);
      if (last === null) throw new UnknownRunError(runId);
      throw new SeqOutOfRangeError(runId, at, Number(last));
    }
    const time = Date.parse(at);
    if (Number.isNaN(time)) throw new InvalidReplayPointError(at);
    // occurredAt is the harness clock: scanned, not bisected, so a clock step back cannot mislead.
    let first: A2rlEvent | null = null;
    let found: A2rlEvent | null = null;
    for await (const { event } of this.deps.events.readStream(stream)) {
      first ??= event;
      if (Date.parse(event.occurredAt) <= time) found = event;
    }
    if (!first) throw new UnknownRunError(runId);
    if (!found) throw new TimeBeforeRunError(runId, at, first.occurredAt);
    return pointOf(found);
  }

  /** The workspace's files right after `at`. */
  async state(runId: string, at: ReplayPoint): Promise<{ at: ResolvedPoint; files: WorkspaceState }> {
    const point = await this.resolve(runId, at);
    await this.deps.catchUp();
    return { at: point, files: await this.index.stateAt(runId, point.seq) };
  }

  /**
   * Writes the workspace's files as they were right after `at` into `outDir`, each blob checked
   * against its sha256 as it is written. A non-empty `outDir` is refused unless `force`, which
   * empties it first (so the directory holds exactly the replayed files).
   */
  async materialize(runId: string, at: ReplayPoint, outDir: string, opts: { force?: boolean } = {}): Promise<MaterializeResult> {
    const { at: point, files } = await this.state(runId, at);
    const root = path.resolve(outDir);
    const out = await openOutDir(root, opts.force ?? false);
    const list = [...files.values()].sort((a, b) => (a.path < b.path ? -1 : 1));
    let bytes = 0;
    // One cursor per writer: files come sorted, so each directory is created and opened about once.
    const cursors = Array.from({ length: WRITE_CONCURRENCY }, () => new DirCursor(out, { create: true }));
    try {
      await forEachLimited(list, WRITE_CONCURRENCY, async (file, worker) => {
        const written = await this.writeFile(cursors[worker], file);
        bytes += written;
      });
    } finally {
      for (const cursor of cursors) await cursor.close();
      await out.close();
    }
    return { runId, at: point, outDir: root, files: list.length, bytes };
  }

  /** The step-through listing of every event of the run. */
  async timeline(runId: string): Promise<TimelineEntry[]> {
    const events: A2rlEvent[] = [];
    for await (const { event } of this.deps.events.readStream(streamName(runId))) events.push(event);
    if (!events.length) throw new UnknownRunError(runId);
    return timelineOf(events);
  }

  /** What changed in the workspace between right after `a` and right after `b`. */
  async diff(runId: string, a: ReplayPoint, b: ReplayPoint): Promise<WorkspaceDiff> {
    const from = await this.resolve(runId, a);
    const to = await this.resolve(runId, b);
    await this.deps.catchUp();
    const [before, after] = await this.index.statesAt(runId, [from.seq, to.seq]);
    const paths = [...new Set([...before.keys(), ...after.keys()])].sort();
    const files: FileDelta[] = [];
    for (const p of paths) {
      const x = before.get(p) ?? null;
      const y = after.get(p) ?? null;
      if (x && y && x.sha256 === y.sha256) continue;
      const change = !x ? 'added' : !y ? 'removed' : 'modified';
      files.push({ path: p, change, before: x, after: y, diff: await this.fileDiff(x, y) });
    }
    return { runId, from, to, files };
  }

  private async fileDiff(before: WorkspaceFile | null, after: WorkspaceFile | null): Promise<FileDiff> {
    const sides = [before, after].filter((f): f is WorkspaceFile => f !== null);
    if (sides.some((f) => f.sha256 === null)) return noHunks('content not recorded: diff not shown');
    // Sizes are known from the ledger: large blobs are never fetched just to be left undiffed.
    if (sides.some((f) => (f.size ?? 0) > MAX_DIFF_BYTES)) return noHunks(`larger than ${MAX_DIFF_BYTES} bytes: diff not shown`);
    return diffFiles(before && (await this.readBlob(before)), after && (await this.readBlob(after)));
  }

  private async readBlob(file: WorkspaceFile): Promise<Buffer> {
    const chunks: Buffer[] = [];
    const hash = createHash('sha256');
    for await (const chunk of await this.openBlob(file)) {
      const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      hash.update(b);
      chunks.push(b);
    }
    const body = Buffer.concat(chunks);
    checkContent(file, hash.digest('hex'), body.length);
    return body;
  }

  /**
   * Writes one blob to its path under the held output directory and returns its size. Every directory
   * is created and opened through its parent's descriptor and the file created with O_EXCL|O_NOFOLLOW
   * (modules/workspace-fs): a link planted in the output directory, by the agent or anyone, is refused,
   * never written through. Small blobs are read and checked before anything is written; larger ones
   * are streamed, hashed on the way, and removed on a mismatch.
   */
  private async writeFile(cursor: DirCursor, file: WorkspaceFile): Promise<number> {
    const dirs = safeSegments(file.path);
    const name = dirs.pop()!;
    try {
      return await this.writeBlob(await cursor.at(dirs), name, file);
    } catch (error) {
      if (!(error instanceof BeneathError)) throw error;
      throw new ReplayError(`cannot write ${file.path}: ${error.refusal === 'link' ? 'a symbolic link stands in its way' : `${error.component} is ${error.refusal}${error.code ? ` (${error.code})` : ''}`}`);
    }
  }

  private async writeBlob(dir: HeldDir, name: string, file: WorkspaceFile): Promise<number> {
    if (file.size !== null && file.size <= BUFFERED_BLOB_BYTES) {
      const body = await this.readBlob(file);
      const handle = await dir.createFile(name);
      try {
        await handle.writeFile(body);
      } finally {
        await handle.close();
      }
      return body.length;
    }
    // A filesystem store's blob is read through its own file into reused buffers (a fresh 1 MiB
    // buffer per chunk costs page faults and garbage collections: a 3 GiB checkpoint took 20.7 CPU
    // seconds that way, 7.7 this way); any other store's through its stream.
    const local = await this.openLocalBlob(file);
    const source = local ? null : await this.openBlob(file);
    const handle = await dir.createFile(name).catch(async (error: unknown) => {
      await local?.close();
      throw error;
    });
    let copied: { sha256: string; size: number };
    try {
      copied = local ? await copyFileHashed(local, handle) : await copyStreamHashed(source!, handle);
    } finally {
      await local?.close();
      await handle.close();
    }
    const { sha256, size } = copied;
    try {
      checkContent(file, sha256, size);
    } catch (error) {
      await dir.remove(name);
      throw error;
    }
    return size;
  }

  /** The blob's file where the store keeps one on this machine, open for reading; null where it does not. */
  private async openLocalBlob(file: WorkspaceFile): Promise<FileHandle | null> {
    const localFile = this.deps.artifacts.localFile;
    if (!localFile || file.sha256 === null) return null;
    try {
      return await open(localFile.call(this.deps.artifacts, file.sha256), 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException)?.code === 'ENOENT') {
        throw new ReplayIntegrityError(`${file.path} (written at seq ${file.seq}): blob ${file.sha256} is missing from the artifact store`);
      }
      throw error;
    }
  }

  private async openBlob(file: WorkspaceFile) {
    if (file.sha256 === null) throw new ReplayIntegrityError(`${file.path} (written at seq ${file.seq}): the ledger recorded no content hash, so it cannot be reproduced`);
    try {
      return await this.deps.artifacts.get(file.sha256);
    } catch (error) {
      if (error instanceof ArtifactNotFoundError) {
        throw new ReplayIntegrityError(`${file.path} (written at seq ${file.seq}): blob ${file.sha256} is missing from the artifact store`);
      }
      throw error;
    }
  }
}

function pointOf(event: A2rlEvent): ResolvedPoint {
  return { seq: event.seq, occurredAt: event.occurredAt, type: event.type };
}

function noHunks(note: string): FileDiff {
  return { linesAdded: 0, linesRemoved: 0, hunks: [], omittedHunks: 0, note };
}

function checkContent(file: WorkspaceFile, sha256: string, size: number): void {
  if (sha256 !== file.sha256 || (file.size !== null && size !== file.size)) {
    throw new ReplayIntegrityError(
      `${file.path} (written at seq ${file.seq}): blob content has sha256 ${sha256} and ${size} bytes, the ledger recorded ${file.sha256} and ${file.size} bytes`,
    );
  }
}

/** A recorded workspace-relative path as segments; anything that could leave the output directory is refused. */
function safeSegments(recorded: string): string[] {
  const segments = recorded.split('/');
  if (recorded.includes('\0') || segments.some((s) => s === '' || s === '.' || s === '..')) {
    throw new ReplayIntegrityError(`refusing to write recorded path "${recorded}": not a plain workspace-relative path`);
  }
  return segments;
}

/**
 * The output directory, held: created when missing, emptied with `force` (links inside removed as
 * links, never followed), refused when it is itself a link or not a directory.
 */
async function openOutDir(root: string, force: boolean): Promise<HeldDir> {
  let out: HeldDir;
  try {
    out = await HeldDir.open(root);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      await mkdir(root, { recursive: true });
      out = await HeldDir.open(root);
    } else if (code === 'ENOTDIR' || code === 'ELOOP') {
      const link = (await lstat(root)).isSymbolicLink();
      throw new ReplayError(link ? `output path ${root} is a symbolic link; name a real directory` : `output path ${root} exists and is not a directory`);
    } else throw error;
  }
  try {
    const entries = await out.list();
    if (entries.length && !force) throw new OutDirNotEmptyError(root);
    for (const entry of entries) await out.remove(entry);
  } catch (error) {
    await out.close();
    throw error;
  }
  return out;
}

/** Runs `work` over `items`, `limit` at a time (`worker`: which of them, 0 to limit-1); after a failure no new item starts, and a failure is rethrown once all have settled. */
async function forEachLimited<T>(items: T[], limit: number, work: (item: T, worker: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async (_: unknown, id: number) => {
    while (!failed && next < items.length) {
      try {
        await work(items[next++], id);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  const results = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, worker));
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
}

/** Writes all of `bytes` at `position` (a write may take fewer bytes than asked). */
async function writeAllAt(handle: FileHandle, bytes: Buffer, position: number): Promise<void> {
  for (let done = 0; done < bytes.length; ) done += (await handle.write(bytes, done, bytes.length - done, position + done)).bytesWritten;
}

/**
 * Copies a blob's file into `out`, hashing what it writes, through COPY_BUFFERS reused buffers:
 * while one chunk is hashed (this thread) it is written and the next is read (libuv's threads). A
 * buffer is read into again only once its write is done. Writes go out in order.
 */
async function copyFileHashed(source: FileHandle, out: FileHandle): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  const buffers = Array.from({ length: COPY_BUFFERS }, () => Buffer.allocUnsafe(COPY_CHUNK));
  const written: Array<Promise<void>> = buffers.map(() => Promise.resolve());
  let writing: Promise<void> = Promise.resolve();
  let position = 0;
  let reading = source.read(buffers[0]!, 0, COPY_CHUNK, 0);
  try {
    for (let i = 0; ; i++) {
      const { bytesRead } = await reading;
      if (bytesRead === 0) break;
      const chunk = buffers[i % COPY_BUFFERS]!.subarray(0, bytesRead);
      const at = position;
      position += bytesRead;
      writing = writing.then(() => writeAllAt(out, chunk, at));
      writing.catch(() => undefined); // awaited below; a failure must not also surface as unhandled
      written[i % COPY_BUFFERS] = writing;
      const next = (i + 1) % COPY_BUFFERS;
      await written[next];
      reading = source.read(buffers[next]!, 0, COPY_CHUNK, position);
      hash.update(chunk);
    }
    await writing;
  } catch (error) {
    await Promise.allSettled([reading, writing]); // nothing may still use the descriptors when they close
    throw error;
  }
  return { sha256: hash.digest('hex'), size: position };
}

/** Copies a blob's stream into `out`, hashing it; the write of a chunk overlaps the hashing of the next (at most WRITES_IN_FLIGHT held). */
async function copyStreamHashed(source: AsyncIterable<unknown>, out: FileHandle): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  const writes: Array<Promise<void>> = [];
  let writing: Promise<void> = Promise.resolve();
  let size = 0;
  try {
    for await (const chunk of source) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      const at = size;
      writing = writing.then(() => writeAllAt(out, bytes, at));
      writing.catch(() => undefined);
      writes.push(writing);
      if (writes.length > WRITES_IN_FLIGHT) await writes.shift();
      hash.update(bytes);
      size += bytes.length;
    }
    await writing;
  } finally {
    await Promise.allSettled(writes);
  }
  return { sha256: hash.digest('hex'), size };
}
