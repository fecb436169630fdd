import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { ArtifactNotFoundError, type ArtifactStore } from '../artifacts/artifact-store.port.js';
import { rebuildBody, type PiecesRef, type ReadBlob } from '../llm-gateway/request-pieces.js';

// The blobs an event references, for `a2rl blob`, `a2rl logs` and the dashboard's blob and output
// endpoints (modules/dashboard/event-blobs.ts): named by the payload field that
// holds the reference (request, response, chunk, items, checkpoint, …; a file revision's own
// sha256/size as `content`), read from the artifact store and checked against the ledger's sha256
// and size. Read from the payload's shape, so an event type added later is covered without a change.

const SHA256 = /^[0-9a-f]{64}$/;

/** One blob an event references. */
export interface EventBlob {
  part: string;
  sha256: string;
  size: number;
}

/**
 * The recipe of a part that is a model call's body stored as pieces (`requestPieces` is part
 * `request`), rebuilt when opened; kept beside the part so that what is shown of it stays {part, sha256, size}.
 */
const piecesOf = new WeakMap<EventBlob, PiecesRef>();

const isRef = (v: unknown): v is { sha256: string; size: number } =>
  !!v && typeof v === 'object' && typeof (v as Record<string, unknown>).sha256 === 'string' && SHA256.test((v as { sha256: string }).sha256) && Number.isSafeInteger((v as { size: unknown }).size);

const isPieces = (key: string, v: unknown): v is PiecesRef => key.endsWith('Pieces') && isRef(v) && isRef((v as { manifest?: unknown }).manifest);

/** The event's blobs in a stable order: its own content (FileChanged and the like) first, then each top-level field holding a reference, by name. */
export function eventBlobs(event: { data: unknown }): EventBlob[] {
  const data = (event.data ?? {}) as Record<string, unknown>;
  const parts: EventBlob[] = [];
  if (isRef(data)) parts.push({ part: 'content', sha256: data.sha256, size: data.size });
  for (const key of Object.keys(data).sort()) {
    const value: unknown = (data as Record<string, unknown>)[key];
    if (isPieces(key, value)) {
      const part = { part: key.slice(0, -'Pieces'.length), sha256: value.sha256, size: value.size };
      piecesOf.set(part, value);
      parts.push(part);
    } else if (isRef(value)) parts.push({ part: key, sha256: value.sha256, size: value.size });
  }
  return parts;
}

/** The part asked for, else the event's first (the request of a model call, the chunk of an output event); undefined when it has no such part. */
export function pickEventBlob(blobs: readonly EventBlob[], asked: string | undefined): EventBlob | undefined {
  return asked === undefined ? blobs[0] : blobs.find((b) => b.part === asked);
}

/** A blob that is not what the ledger recorded: missing from the store, or other bytes. */
export class BlobIntegrityError extends Error {
  override readonly name = 'BlobIntegrityError';
}

/** The blob's stream, or a BlobIntegrityError naming it when the store does not have it. */
export async function openBlob(artifacts: ArtifactStore, blob: EventBlob, what: string): Promise<Readable> {
  const pieces = piecesOf.get(blob);
  if (pieces) return Readable.from([await rebuiltBlob(artifacts, pieces, what)]);
  try {
    return await artifacts.get(blob.sha256);
  } catch (error) {
    if (error instanceof ArtifactNotFoundError) throw new BlobIntegrityError(`${what}: blob ${blob.sha256} is missing from the artifact store`);
    throw error;
  }
}

/** A body stored as pieces, put back together (request-pieces.ts checks it against the recorded sha256 and size). */
async function rebuiltBlob(artifacts: ArtifactStore, pieces: PiecesRef, what: string): Promise<Buffer> {
  try {
    return await rebuildBody({ pieces }, storeReader(artifacts));
  } catch (error) {
    throw new BlobIntegrityError(`${what}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Whole blobs from the store by sha256; null for one it does not have. */
export function storeReader(artifacts: ArtifactStore): ReadBlob {
  return async (sha256) => {
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of await artifacts.get(sha256)) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array));
      return Buffer.concat(chunks);
    } catch (error) {
      if (error instanceof ArtifactNotFoundError) return null;
      throw error;
    }
  };
}

/** Checks what was read against the recorded sha256 and size. */
export class BlobCheck {
  private readonly hash = createHash('sha256');
  private bytes = 0;

  constructor(
    private readonly blob: EventBlob,
    private readonly what: string,
  ) {}

  update(chunk: Buffer): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
  }

  /** Throws a BlobIntegrityError when the bytes read are not the recorded ones. */
  end(): void {
    const sha256 = this.hash.digest('hex');
    if (this.bytes !== this.blob.size || sha256 !== this.blob.sha256) {
      throw new BlobIntegrityError(`${this.what}: the stored bytes (${this.bytes} B, sha256 ${sha256}) are not the recorded ones (${this.blob.size} B, sha256 ${this.blob.sha256})`);
    }
  }
}

/** The whole blob, checked; refuses one larger than `maxBytes` before reading it. */
export async function readEventBlob(artifacts: ArtifactStore, blob: EventBlob, what: string, maxBytes: number): Promise<Buffer> {
  if (blob.size > maxBytes) throw new Error(`${what} is ${blob.size} bytes, more than the ${maxBytes} shown at once: write it to a file with --raw`);
  const check = new BlobCheck(blob, what);
  const chunks: Buffer[] = [];
  for await (const chunk of await openBlob(artifacts, blob, what)) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    check.update(buf);
    chunks.push(buf);
  }
  check.end();
  return Buffer.concat(chunks);
}

/**
 * The blob's first `cap` bytes, for display: `truncated` when it is longer (then only what was read is
 * returned, unchecked: a blob's sha256 covers all of it). A blob read whole is checked against the
 * recorded sha256 and size (BlobIntegrityError), as readEventBlob does.
 */
export async function readEventBlobHead(artifacts: ArtifactStore, blob: EventBlob, what: string, cap: number): Promise<{ bytes: Buffer; truncated: boolean }> {
  const stream = await openBlob(artifacts, blob, what);
  const check = new BlobCheck(blob, what);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream) {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      check.update(buf);
      chunks.push(buf);
      size += buf.length;
      if (size > cap) return { bytes: Buffer.concat(chunks).subarray(0, cap), truncated: true };
    }
  } finally {
    stream.destroy();
  }
  check.end();
  return { bytes: Buffer.concat(chunks), truncated: false };
}

/** Binary: a NUL byte, or bytes that are not UTF-8. */
export function isBinaryContent(bytes: Buffer): boolean {
  if (bytes.includes(0)) return true;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return false;
  } catch {
    return true;
  }
}

/** How a text blob reads best: JSON pretty-printed (two-space indent); anything else as it is. */
export function readableText(text: string): { format: 'json' | 'text'; text: string } {
  const start = text.trimStart()[0];
  if (start === '{' || start === '[') {
    try {
      return { format: 'json', text: `${JSON.stringify(JSON.parse(text), null, 2)}\n` };
    } catch {
      // not JSON after all
    }
  }
  return { format: 'text', text };
}
