import { reportFailure } from './config/open-errors.js';
import { serve } from './server.js';

// `npm start`: the HTTP server; a failure to start is one `a2rl:` line (the stack with A2RL_DEBUG=1).
serve().catch((err: unknown) => {
  process.exit(reportFailure(err));
});
