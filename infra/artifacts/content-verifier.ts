import { createHash } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { PassThrough, Transform, Writable, type Readable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ArtifactIntegrityError, assertSha256 } from '../../modules/artifacts/artifact-store.port.js';

/** What a put declares about its body; both adapters check the body against it before committing. */
export interface Declared {
  sha256: string;
  size: number;
}

export function assertDeclared(declared: Declared): void {
  assertSha256(declared.sha256);
  if (!Number.isSafeInteger(declared.size) || declared.size < 0) {
    throw new TypeError(`declared size must be a non-negative integer, got ${declared.size}`);
  }
}

export function bodyStream(body: Readable | Buffer): Readable {
  if (!Buffer.isBuffer(body)) return body;
  const stream = new PassThrough();
  stream.end(body);
  return stream;
}

/**
 * Passes bytes through while counting and hashing them. It errors as soon as more bytes arrive than
 * declared (so an oversized body is never read to its end) and, when the input ends, if the count or
 * the sha256 differs. A consumer that commits only after this stream ended cleanly therefore never
 * commits content that does not match its declaration.
 */
export class VerifyingStream extends Transform {
  private readonly hash = createHash('sha256');
  private received = 0;

  constructor(private readonly declared: Declared) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.received += chunk.length;
    if (this.received > this.declared.size) {
      done(this.mismatch(`declared ${this.declared.size} bytes, received at least ${this.received}`));
      return;
    }
    this.hash.update(chunk);
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    if (this.received !== this.declared.size) {
      done(this.mismatch(`declared ${this.declared.size} bytes, received ${this.received}`));
      return;
    }
    const actual = this.hash.digest('hex');
    if (actual !== this.declared.sha256) {
      done(this.mismatch(`declared sha256 ${this.declared.sha256}, actual ${actual}`));
      return;
    }
    done();
  }

  private mismatch(detail: string): ArtifactIntegrityError {
    return new ArtifactIntegrityError(`artifact body does not match its declaration: ${detail}`);
  }
}

/** Reads the whole body only to check it against its declaration (used when the blob is already stored). */
export async function verifyBody(body: Readable | Buffer, declared: Declared): Promise<void> {
  if (Buffer.isBuffer(body)) return verifyBuffer(body, declared);
  const discard = new Writable({ write: (_chunk, _encoding, done) => done() });
  await pipeline(bodyStream(body), new VerifyingStream(declared), discard);
}

/** A body in memory against its declaration, with VerifyingStream's checks and messages. */
export function verifyBuffer(body: Buffer, declared: Declared): void {
  const mismatch = (detail: string) => new ArtifactIntegrityError(`artifact body does not match its declaration: ${detail}`);
  if (body.length > declared.size) throw mismatch(`declared ${declared.size} bytes, received at least ${body.length}`);
  if (body.length !== declared.size) throw mismatch(`declared ${declared.size} bytes, received ${body.length}`);
  const actual = createHash('sha256').update(body).digest('hex');
  if (actual !== declared.sha256) throw mismatch(`declared sha256 ${declared.sha256}, actual ${actual}`);
}

/** The size half of the check, for a file whose sha256 its writer computed over the bytes it wrote. */
export async function checkSize(file: string, declared: Declared): Promise<void> {
  const { size } = await stat(file);
  if (size !== declared.size) throw new ArtifactIntegrityError(`artifact body does not match its declaration: ${size} bytes, declared ${declared.size}`);
}
