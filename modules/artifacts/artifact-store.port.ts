import type { Readable } from 'node:stream';

/**
 * The ArtifactStore port: content-addressed blobs keyed `sha256/<2 hex>/<hex>`. A put declares
 * size and sha256 up front; the adapter verifies both on the way in and leaves no object behind on
 * a mismatch. Putting content that already exists is a no-op that reports `created: false`.
 */
export interface ArtifactInfo {
  key: string;
  sha256: string;
  size: number;
}

export interface PutResult extends ArtifactInfo {
  created: boolean;
}

export interface ArtifactStore {
  readonly backend: 'fs' | 'minio';
  put(body: Readable | Buffer, declared: { sha256: string; size: number }): Promise<PutResult>;
  /**
   * Optional: stores a file the caller made and no one else can write (a staged checkpoint), checked
   * as put() checks a body. The filesystem store links it in when it can, so its bytes are written
   * once; afterwards the file may be the blob itself: the caller may remove it, never write to it.
   * `hashedAsWritten`: the caller computed `declared.sha256` over exactly the bytes it wrote into the
   * file, so a store that links the file checks its size only instead of reading it all again (the
   * second pass over a multi-GB checkpoint); `a2rl verify` re-hashes every blob either way.
   */
  putFile?(file: string, declared: { sha256: string; size: number }, options?: { hashedAsWritten?: boolean }): Promise<PutResult>;
  /** Streams the blob; throws ArtifactNotFoundError when absent. */
  get(sha256: string): Promise<Readable>;
  /**
   * Optional: where the blob's file would be, for a store that keeps each blob as a local file (the
   * filesystem store), so that a reader hashing many blobs reads them by descriptor
   * (file-hash.ts hashFile) rather than as streams. The file may be absent (ENOENT).
   */
  localFile?(sha256: string): string;
  stat(sha256: string): Promise<ArtifactInfo | null>;
  exists(sha256: string): Promise<boolean>;
  close(): Promise<void>;
}

const SHA256 = /^[0-9a-f]{64}$/;

export function artifactKey(sha256: string): string {
  assertSha256(sha256);
  return `sha256/${sha256.slice(0, 2)}/${sha256}`;
}

export function assertSha256(sha256: string): void {
  if (!SHA256.test(sha256)) throw new TypeError(`not a lowercase hex sha256: "${sha256}"`);
}

export class ArtifactIntegrityError extends Error {
  override readonly name = 'ArtifactIntegrityError';
}

export class ArtifactNotFoundError extends Error {
  override readonly name = 'ArtifactNotFoundError';
  constructor(readonly sha256: string) {
    super(`artifact ${artifactKey(sha256)} not found`);
  }
}

export class ArtifactStoreUnavailableError extends Error {
  override readonly name = 'ArtifactStoreUnavailableError';
}
