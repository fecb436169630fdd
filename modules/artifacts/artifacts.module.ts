import { Inject, Module, type OnApplicationShutdown } from '@nestjs/common';
import { openArtifactStore } from '../../infra/artifacts/open-artifact-store.js';
import { A2RL_CONFIG } from '../../src/config/config.module.js';
import type { A2rlConfig } from '../../src/config/config.js';
import type { ArtifactStore } from './artifact-store.port.js';

export const ARTIFACT_STORE = Symbol('ARTIFACT_STORE');

@Module({
  providers: [
    { provide: ARTIFACT_STORE, inject: [A2RL_CONFIG], useFactory: (config: A2rlConfig) => openArtifactStore(config.artifactsUrl) },
  ],
  exports: [ARTIFACT_STORE],
})
export class ArtifactsModule implements OnApplicationShutdown {
  constructor(@Inject(ARTIFACT_STORE) private readonly store: ArtifactStore) {}

  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}
