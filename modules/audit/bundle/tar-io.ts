import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Header, Pack, Parser, ReadEntry, type WriteEntryTar } from 'tar';

/** A file to put in the bundle: small ones as bytes, blobs as a stream opened when their turn comes. */
export interface TarFile {
  path: string;
  size: number;
  body: Buffer | { open: () => Promise<Readable>; sha256: string };
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
      let size = 0;
      for await (const chunk of await file.body.open()) {
        const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
        size += buf.length;
        if (size > file.size) throw new BundleWriteError(`${file.path}: the artifact store returned more than the ${file.size} bytes declared`);
        hash.update(buf);
        if (!entry.write(buf)) await Promise.race([once(entry, 'drain'), ended]);
      }
      if (size !== file.size) throw new BundleWriteError(`${file.path}: the artifact store returned ${size} bytes, ${file.size} declared`);
      if (hash.digest('hex') !== file.body.sha256) throw new BundleWriteError(`${file.path}: the artifact store returned content with another sha256 (store corrupted)`);
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
}

/** Reads a gzipped tar; a damaged archive is a problem, not an exception. Non-file and duplicate entries are problems. */
export async function readTarGz(file: string): Promise<TarContents> {
  const files = new Map<string, Buffer>();
  const problems: string[] = [];
  const pending: Promise<void>[] = [];
  const parser = new Parser({
    strict: true,
    onReadEntry: (entry) => {
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
      const chunks: Buffer[] = [];
      entry.on('data', (c: Buffer) => chunks.push(c));
      pending.push(
        new Promise((resolve) =>
          entry.on('end', () => {
            if (files.has(entry.path)) problems.push(`"${entry.path}" appears more than once in the archive`);
            else files.set(entry.path, Buffer.concat(chunks));
            resolve();
          }),
        ),
      );
    },
  });
  try {
    await new Promise<void>((resolve, reject) => {
      parser.on('error', reject);
      parser.on('end', resolve);
      const input = createReadStream(file);
      input.on('error', reject);
      input.pipe(parser);
    });
    await Promise.all(pending);
  } catch (err) {
    problems.push(`the archive cannot be read: ${(err as Error).message}`);
  }
  return { files, problems };
}
