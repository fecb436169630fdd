import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { HASH_CHUNK } from '../artifacts/file-hash.js';
import { ArtifactIntegrityError, type ArtifactInfo, type ArtifactStore, type PutResult } from '../artifacts/artifact-store.port.js';
import { BINARY_SNIFF_BYTES, looksBinary, type SecretRedactor, type TextHit } from './secret-redactor.js';

/** A blob stored redacted: where its redacted bytes are, and what was taken out. */
export interface RedactedBlob {
  ref: { sha256: string; size: number; key: string };
  hits: TextHit[];
}

/**
 * Original sha256 → the blob stored in its place. The observers declare and record the hash of the
 * content they read; the run recorder looks each recorded hash up here so the ledger refers to the
 * bytes actually archived (and never to content holding a secret).
 */
export class BlobRemap {
  private readonly redacted = new Map<string, RedactedBlob>();

  set(originalSha256: string, blob: RedactedBlob): void {
    this.redacted.set(originalSha256, blob);
  }

  get(originalSha256: string): RedactedBlob | undefined {
    return this.redacted.get(originalSha256);
  }

  get size(): number {
    return this.redacted.size;
  }
}

export interface RedactionSource {
  /** Read at each put: secrets learnt during the run (the run token) apply from then on. */
  readonly redactor: SecretRedactor;
  readonly blobs: BlobRemap;
}

export interface RedactingArtifactStoreOptions {
  /** Where a streamed text blob is spooled while it is scanned (default: the OS temp dir; never the workspace). */
  tmpDir?: string;
}

const sha256Of = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const toBuffer = (chunk: unknown): Buffer => (Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));

/**
 * The artifact store of the run's observers (file watcher, output recorder): a text blob holding a
 * secret is stored redacted instead (its own sha256 and size, returned by `put`), and the original
 * hash is remembered in the BlobRemap for the recorder. The original bytes never reach the store.
 * Binary blobs (a NUL in the first 8 KiB) pass through untouched. Checkpoints are archived by the
 * grading API through the plain store: graded bytes must equal archived bytes.
 *
 * A put still honours the port's contract for what was declared: a body that does not match its
 * declared sha256/size fails with ArtifactIntegrityError (the file watcher reads that as "changed
 * while being stored" and reads the file again).
 */
export class RedactingArtifactStore implements ArtifactStore {
  private readonly tmpDir: string;

  constructor(
    private readonly inner: ArtifactStore,
    private readonly source: RedactionSource,
    opts: RedactingArtifactStoreOptions = {},
  ) {
    this.tmpDir = opts.tmpDir ?? tmpdir();
  }

  get backend(): ArtifactStore['backend'] {
    return this.inner.backend;
  }

  async put(body: Readable | Buffer, declared: { sha256: string; size: number }): Promise<PutResult> {
    if (Buffer.isBuffer(body)) return this.putBytes(body, declared);
    return this.putStream(body, declared);
  }

  get(sha256: string): Promise<Readable> {
    return this.inner.get(sha256);
  }

  stat(sha256: string): Promise<ArtifactInfo | null> {
    return this.inner.stat(sha256);
  }

  exists(sha256: string): Promise<boolean> {
    return this.inner.exists(sha256);
  }

  /** The wrapped store belongs to whoever opened it. */
  async close(): Promise<void> {}

  private async putBytes(body: Buffer, declared: { sha256: string; size: number }): Promise<PutResult> {
    const redacted = this.source.redactor.redactBlob(body);
    if (!redacted) return this.inner.put(body, declared);
    checkDeclared(body.length, sha256Of(body), declared);
    const put = await this.inner.put(redacted.bytes, { sha256: sha256Of(redacted.bytes), size: redacted.bytes.length });
    this.remember(declared.sha256, put, redacted.hits);
    return put;
  }

  /**
   * A stream (a file over the reader's in-memory limit): its first bytes decide text or binary; a
   * binary one is passed on as it comes, a text one is redacted window by window into a spool file
   * (memory stays bounded whatever its size), then stored from there.
   */
  private async putStream(body: Readable, declared: { sha256: string; size: number }): Promise<PutResult> {
    const chunks = body[Symbol.asyncIterator]() as AsyncIterator<unknown>;
    try {
      const head: Buffer[] = [];
      let headSize = 0;
      let ended = false;
      while (headSize < BINARY_SNIFF_BYTES) {
        const next = await chunks.next();
        if (next.done) {
          ended = true;
          break;
        }
        const chunk = toBuffer(next.value);
        head.push(chunk);
        headSize += chunk.length;
      }
      const first = Buffer.concat(head, headSize);
      if (ended) return await this.putBytes(first, declared);
      if (looksBinary(first)) return await this.inner.put(Readable.from(rest(first, chunks), { objectMode: false }), declared);
      return await this.putSpooled(first, chunks, declared);
    } finally {
      await chunks.return?.(); // destroys the source if we stopped early
    }
  }

  private async putSpooled(first: Buffer, chunks: AsyncIterator<unknown>, declared: { sha256: string; size: number }): Promise<PutResult> {
    const dir = await mkdtemp(join(this.tmpDir, 'a2rl-redact-'));
    const spool = join(dir, 'blob');
    let handle: FileHandle | null = null;
    try {
      handle = await open(spool, 'wx', 0o600);
      const out = handle;
      const blob = this.source.redactor.blob();
      const original = createHash('sha256');
      const stored = createHash('sha256');
      let read = 0;
      let written = 0;
      const emit = async (bytes: Buffer) => {
        if (bytes.length === 0) return;
        stored.update(bytes);
        written += bytes.length;
        await out.writeFile(bytes);
      };
      const take = async (chunk: Buffer) => {
        read += chunk.length;
        if (read > declared.size) throw new ArtifactIntegrityError(`declared ${declared.size} bytes, received at least ${read}`);
        original.update(chunk);
        await emit(blob.write(chunk));
      };
      await take(first);
      for (let next = await chunks.next(); !next.done; next = await chunks.next()) await take(toBuffer(next.value));
      await emit(blob.end());
      await handle.close();
      handle = null;
      checkDeclared(read, original.digest('hex'), declared);
      const hits = blob.hits;
      const spooled = () => createReadStream(spool, { highWaterMark: HASH_CHUNK }); // in 1 MiB chunks (file-access.ts, stream())
      if (hits.length === 0) return await this.inner.put(spooled(), declared); // the spool holds the original bytes
      const put = await this.inner.put(spooled(), { sha256: stored.digest('hex'), size: written });
      this.remember(declared.sha256, put, hits);
      return put;
    } finally {
      await handle?.close();
      await rm(dir, { recursive: true, force: true });
    }
  }

  private remember(originalSha256: string, put: PutResult, hits: TextHit[]): void {
    this.source.blobs.set(originalSha256, { ref: { sha256: put.sha256, size: put.size, key: put.key }, hits });
  }
}

function checkDeclared(size: number, sha256: string, declared: { sha256: string; size: number }): void {
  if (size !== declared.size) throw new ArtifactIntegrityError(`declared ${declared.size} bytes, received ${size}`);
  if (sha256 !== declared.sha256) throw new ArtifactIntegrityError(`declared sha256 ${declared.sha256}, actual ${sha256}`);
}

async function* rest(first: Buffer, chunks: AsyncIterator<unknown>): AsyncGenerator<Buffer> {
  yield first;
  for (let next = await chunks.next(); !next.done; next = await chunks.next()) yield toBuffer(next.value);
}
