import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { Header } from 'tar';

/**
 * Test helper: a gzipped tar that is tiny on disk and huge inflated (a decompression bomb), built
 * without inflating or deflating the whole: gzip members are concatenated (every gzip reader reads
 * a concatenation as one stream), and one member of 64 MiB is compressed once and repeated. Each
 * 64 MiB is zeros but for 8 KiB of incompressible bytes, so the whole inflates about 900 times:
 * below tar's own 1000× ratio guard, as a bomb made to slip past it would be. Each entry is a
 * regular file whose tar header declares `size`; `trailing` adds that many bytes after the
 * end-of-archive marker.
 */
export function gzipBomb(entries: ReadonlyArray<{ path: string; size: number }>, trailing = 0): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const header = Buffer.alloc(512);
    new Header({ path: entry.path, mode: 0o644, size: entry.size, mtime: new Date(0), type: 'File' }).encode(header, 0);
    parts.push(gzipSync(header), ...filled(entry.size), gzipSync(Buffer.alloc(padding(entry.size))));
  }
  parts.push(gzipSync(Buffer.alloc(1024)), ...filled(trailing)); // two zero blocks end a tar
  return Buffer.concat(parts);
}

const CHUNK = 64 * 1024 * 1024;
let chunkMember: Buffer | undefined;

/** Gzip members inflating to `n` bytes. */
function filled(n: number): Buffer[] {
  chunkMember ??= gzipSync(filler(CHUNK), { level: 9 });
  const members: Buffer[] = Array.from({ length: Math.floor(n / CHUNK) }, () => chunkMember!);
  if (n % CHUNK) members.push(gzipSync(filler(n % CHUNK), { level: 9 }));
  return members;
}

/** `n` bytes: up to 8 KiB of hash output (deterministic, incompressible), then zeros. */
function filler(n: number): Buffer {
  const buf = Buffer.alloc(n);
  const noise = Buffer.concat(Array.from({ length: 256 }, (_, i) => createHash('sha256').update(String(i)).digest()));
  noise.copy(buf, 0, 0, Math.min(n, noise.length));
  return buf;
}

const padding = (size: number) => (512 - (size % 512)) % 512;
