import { sqlitePath } from '../../modules/settings/store-url.js';
import type { ArtifactStore } from '../../modules/artifacts/artifact-store.port.js';

/** Opens the artifact store adapter an artifacts URL names (`file://…` or `s3://…`). */
export async function openArtifactStore(url: string): Promise<ArtifactStore> {
  if (url.startsWith('file://')) {
    const { FsArtifactStore } = await import('./fs-artifact-store.js');
    return FsArtifactStore.open(sqlitePath(url));
  }
  if (url.startsWith('s3://')) {
    const { MinioArtifactStore } = await import('./minio-artifact-store.js');
    return MinioArtifactStore.open(url);
  }
  throw new Error(`unsupported artifacts URL "${url}"`);
}
