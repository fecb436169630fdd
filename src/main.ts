import { ConfigError } from './config/config.js';
import { serve } from './server.js';

serve().catch((err: unknown) => {
  console.error(err instanceof ConfigError ? `a2rl: configuration error: ${err.message}` : `a2rl: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
