import { Global, Module } from '@nestjs/common';
import { loadConfig } from './config.js';

export const A2RL_CONFIG = Symbol('A2RL_CONFIG');

/** Validated configuration, loaded once from the environment (fails at start naming the variable). */
@Global()
@Module({
  providers: [{ provide: A2RL_CONFIG, useFactory: () => loadConfig() }],
  exports: [A2RL_CONFIG],
})
export class ConfigModule {}
