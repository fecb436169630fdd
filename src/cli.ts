import 'reflect-metadata';
import { CommanderError } from 'commander';
import { buildCli } from './cli-program.js';
import { reportFailure } from './config/open-errors.js';

// The `a2rl` command line (commander); the commands live in src/commands/, one file per area.

export async function runCli(argv: string[]): Promise<number> {
  const program = await buildCli(argv[0]);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    // One `a2rl:` line; exit 2 for configuration and open failures (the stack with A2RL_DEBUG=1).
    return reportFailure(err);
  }
}

// `a2rl events … | head` closes stdout early: that is the reader's choice, not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

const exitCode = await runCli(process.argv.slice(2));
// A store that failed to open may leave others half-opened (Nest does not close the providers it
// built before the failing one), which would keep the process alive: exit now.
if (exitCode === 2) process.exit(2);
// A command that succeeded keeps an exit code set on the way (130/143 after an operator interrupt).
process.exitCode = exitCode === 0 ? (process.exitCode ?? 0) : exitCode;
