import { Global, Module } from '@nestjs/common';
import { loadConfig } from './config.js';

import { SETTINGS } from '../../modules/settings/settings.port.js';

/** The same token as the modules' SETTINGS port. */
export const A2RL_CONFIG = SETTINGS;

/** Validated configuration, loaded once from the environment (fails at start naming the variable). */
@Global()
@Module({
  providers: [{ provide: A2RL_CONFIG, useFactory: () => loadConfig() }],
  exports: [A2RL_CONFIG],
})
export class ConfigModule {}
