import { ArtifactNotFoundError, type ArtifactStore } from '../modules/artifacts/artifact-store.port.js';

/**
 * Content-addressed reads for the analysis: a blob's bytes never change, so an analysis that reads
 * file contents by sha256 stays a deterministic function of the run's events. `null` = not stored.
 */
export interface BlobReader {
  read(sha256: string): Promise<Buffer | null>;
}

/** The artifact store as a BlobReader: reads each blob fully; an absent blob is null, other errors propagate. */
export function artifactBlobReader(store: ArtifactStore): BlobReader {
  return {
    async read(sha256) {
      let stream;
      try {
        stream = await store.get(sha256);
      } catch (error) {
        if (error instanceof ArtifactNotFoundError) return null;
        throw error;
      }
      const chunks: Buffer[] = [];
      for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array));
      return Buffer.concat(chunks);
    },
  };
}
