import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { ArtifactNotFoundError, artifactKey, type ArtifactInfo, type ArtifactStore, type PutResult } from '../../modules/artifacts/artifact-store.port.js';
import { assertDeclared, bodyStream, verifyBody, type Declared } from './content-verifier.js';

/**
 * Blobs in memory, checked against their declaration like the real stores: for unit tests of the
 * services that archive (run service, observers) without a disk or a server.
 */
export class MemoryArtifactStore implements ArtifactStore {
  readonly backend = 'fs' as const;
  readonly blobs = new Map<string, Buffer>();

  async put(body: Readable | Buffer, declared: Declared): Promise<PutResult> {
    assertDeclared(declared);
    const bytes = await buffer(bodyStream(body));
    await verifyBody(bytes, declared);
    const created = !this.blobs.has(declared.sha256);
    if (created) this.blobs.set(declared.sha256, bytes);
    return { key: artifactKey(declared.sha256), sha256: declared.sha256, size: declared.size, created };
  }

  async get(sha256: string): Promise<Readable> {
    const bytes = this.blobs.get(sha256);
    if (!bytes) throw new ArtifactNotFoundError(sha256);
    return Readable.from([bytes]);
  }

  async stat(sha256: string): Promise<ArtifactInfo | null> {
    const bytes = this.blobs.get(sha256);
    return bytes ? { key: artifactKey(sha256), sha256, size: bytes.length } : null;
  }

  async exists(sha256: string): Promise<boolean> {
    return this.blobs.has(sha256);
  }

  async close(): Promise<void> {}
}
