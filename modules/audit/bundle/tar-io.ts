import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { once } from 'node:events';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { Header, Pack, Parser, ReadEntry, type WriteEntryTar } from 'tar';

/** A file to put in the bundle: small ones as bytes, blobs as a stream opened when their turn comes. */
export interface TarFile {
  path: string;
  size: number;
  /** `source` names where a stream comes from in errors (default: the artifact store). */
  body: Buffer | { open: () => Promise<Readable>; sha256: string; source?: string };
}

export class BundleWriteError extends Error {
  override readonly name = 'BundleWriteError';
}

/**
 * Writes a gzipped tar deterministically: entries sorted by path, regular files only (no directory
 * entries), mode 0644, one fixed mtime, `portable` headers (no uid/gid, user or group names, atime
 * or ctime), so the same inputs give the same bytes. Streams are checked against their declared
 * size and sha256 on the way in. Written to a temporary name and renamed: no half bundle is left.
 */
export async function writeTarGz(outFile: string, files: readonly TarFile[], mtime: Date): Promise<void> {
  const sorted = [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (let i = 1; i < sorted.length; i++) if (sorted[i].path === sorted[i - 1].path) throw new BundleWriteError(`duplicate bundle path ${sorted[i].path}`);
  const tmp = `${outFile}.${process.pid}.partial`;
  let writing: WriteEntryTar | undefined;
  const pack = new Pack({ gzip: true, portable: true, mtime, onWriteEntry: (e) => (writing = e as unknown as WriteEntryTar) });
  const written = pipeline(pack, createWriteStream(tmp));
  const ended = written.then(() => Promise.reject(new BundleWriteError('the archive ended before all files were written')));
  ended.catch(() => undefined);
  try {
    for (const file of sorted) {
      const entry = new ReadEntry(new Header({ path: file.path, mode: 0o644, size: file.size, mtime, type: 'File' }));
      pack.add(entry);
      // One entry at a time: Pack starts at most `jobs` entries but only pipes the oldest, so entries
      // queued ahead of the one being written can stall it. Waiting also bounds memory to one blob.
      const packed = Promise.race([once(writing!, 'end'), ended]);
      if (Buffer.isBuffer(file.body)) {
        entry.end(file.body);
        await packed;
        continue;
      }
      const hash = createHash('sha256');
      const source = file.body.source ?? 'the artifact store';
      let size = 0;
      for await (const chunk of await file.body.open()) {
        const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
        size += buf.length;
        if (size > file.size) throw new BundleWriteError(`${file.path}: ${source} returned more than the ${file.size} bytes declared`);
        hash.update(buf);
        if (!entry.write(buf)) await Promise.race([once(entry, 'drain'), ended]);
      }
      if (size !== file.size) throw new BundleWriteError(`${file.path}: ${source} returned ${size} bytes, ${file.size} declared`);
      if (hash.digest('hex') !== file.body.sha256) throw new BundleWriteError(`${file.path}: ${source} returned content with another sha256 (store corrupted, or changed while it was exported)`);
      entry.end();
      await packed;
    }
    pack.end();
    await written;
    await rename(tmp, outFile);
  } catch (err) {
    pack.destroy();
    await written.catch(() => undefined);
    await rm(tmp, { force: true });
    throw err;
  }
}

/** Entries of a bundle read fully into memory (nothing is written to disk), and what is wrong with the archive. */
export interface TarContents {
  files: Map<string, Buffer>;
  problems: string[];
  /** Bytes gunzip produced before reading stopped (all of them, or a little past the limit when refused). */
  inflated: number;
  /** The inflated-size limit the archive was read under. */
  limit: number;
  /** Refused for inflating past the limit: `files` is empty and `problems` says why. */
  tooLarge: boolean;
}

export interface ReadTarOptions {
  /** Refuse an archive that inflates to more than this many bytes (default: inflateLimit of the file's size). */
  maxInflatedBytes?: number;
}

/** Default inflated-size limit: 64 times the compressed size, and at least 64 MiB. */
export const INFLATE_RATIO = 64;
export const MIN_INFLATE_LIMIT = 64 * 1024 * 1024;

/**
 * Real bundles (canonical JSON with hashes and ids, logs, checkpoints) inflate a few to a few dozen
 * times; a decompression bomb inflates up to about 1000 times (deflate's maximum), which tar's own
 * guard (1000×) lets through. Everything read is held in memory, so the limit also bounds memory.
 */
export function inflateLimit(compressedBytes: number): number {
  return Math.max(MIN_INFLATE_LIMIT, INFLATE_RATIO * compressedBytes);
}

class InflateLimitError extends Error {}

/**
 * Reads a gzipped tar; a damaged archive is a problem, not an exception. Non-file and duplicate
 * entries are problems. The size is bounded before anything is inflated past the limit: an entry
 * whose header declares more than what is left of the limit is refused from its header, before its
 * content is inflated, and gunzip's output is counted as it streams. Either way reading stops at
 * once and the archive's contents are dropped (`tooLarge`).
 */
export async function readTarGz(file: string, opts: ReadTarOptions = {}): Promise<TarContents> {
  const files = new Map<string, Buffer>();
  const problems: string[] = [];
  const pending: Promise<void>[] = [];
  let compressed: number;
  try {
    compressed = (await stat(file)).size;
  } catch (err) {
    return { files, problems: [`the archive cannot be read: ${(err as Error).message}`], inflated: 0, limit: 0, tooLarge: false };
  }
  const limit = opts.maxInflatedBytes ?? inflateLimit(compressed);
  let inflated = 0;
  let declared = 0;
  const tooLarge = (what: string) =>
    new InflateLimitError(
      `the archive inflates to more than ${limit} bytes (${what}; ${compressed} bytes compressed): refused as a possible decompression bomb` +
        `${opts.maxInflatedBytes === undefined ? ` (the limit is ${INFLATE_RATIO}× the file's size, at least ${MIN_INFLATE_LIMIT / 1024 / 1024} MiB)` : ''}; raise it with --max-inflated <bytes> only for a bundle from a trusted source`,
    );
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      inflated += chunk.length;
      if (inflated > limit) done(tooLarge(`refused after ${inflated} bytes`));
      else done(null, chunk);
    },
  });
  // zstd off: only gzip is ours to inflate (gunzip below). A gzip layer inside is still inflated
  // by the parser, but every entry's declared size counts against the limit before its content.
  const parser = new Parser({
    strict: true,
    zstd: false,
    onReadEntry: (entry) => {
      declared += entry.size ?? 0;
      if (declared > limit) {
        parser.abort(tooLarge(`entry "${entry.path}" declares ${entry.size} bytes, ${declared} with the entries before it`));
        return;
      }
      // Directory entries carry no content (a bundle re-packed with a stock `tar` has them).
      if (entry.type === 'Directory') {
        entry.resume();
        return;
      }
      if (entry.type !== 'File' && entry.type !== 'OldFile') {
        problems.push(`unexpected ${entry.type} entry "${entry.path}" (a bundle holds regular files only)`);
        entry.resume();
        return;
      }
      // One buffer of the declared size (bounded by the limit), filled in place: no second copy.
      const body = Buffer.alloc(entry.size ?? 0);
      let filled = 0;
      entry.on('data', (c: Buffer) => (filled += c.copy(body, filled)));
      pending.push(
        new Promise((resolve) =>
          entry.on('end', () => {
            if (files.has(entry.path)) problems.push(`"${entry.path}" appears more than once in the archive`);
            else files.set(entry.path, body.subarray(0, filled));
            resolve();
          }),
        ),
      );
    },
  });
  const input = createReadStream(file);
  const gunzip = createGunzip();
  try {
    await new Promise<void>((resolve, reject) => {
      for (const stream of [input, gunzip, counter]) stream.on('error', reject);
      parser.on('error', reject);
      parser.on('abort', reject);
      parser.on('end', resolve);
      // The archive ends at its end-of-archive blocks: what follows (a stock tar pads with zeros)
      // is not read, since the parser would buffer it all.
      parser.on('eof', resolve);
      input.pipe(gunzip).pipe(counter).pipe(parser);
    });
    await Promise.all(pending);
  } catch (err) {
    if (err instanceof InflateLimitError) return { files: new Map(), problems: [err.message], inflated, limit, tooLarge: true };
    problems.push(`the archive cannot be read: ${(err as Error).message}`);
  } finally {
    // Stops reading and inflating at once when the parser or the limit gave up first.
    for (const stream of [input, gunzip, counter]) stream.destroy();
  }
  return { files, problems, inflated, limit, tooLarge: false };
}
