import { Module } from '@nestjs/common';

/** Injection token of the ArtifactStore port (interfaces have no runtime identity in TypeScript). */
export const ARTIFACT_STORE = Symbol('ARTIFACT_STORE');

/**
 * Artifacts: content-addressed blobs behind the ArtifactStore port. The store (ARTIFACT_STORE) is
 * provided globally by the app's composition root (src/composition.ts), which opens the adapter
 * the settings name and closes it at shutdown; modules import this one to say they use it.
 */
@Module({})
export class ArtifactsModule {}
