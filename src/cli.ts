import 'reflect-metadata';
import { Command, CommanderError } from 'commander';
import { registerAccessCommands } from './commands/access.commands.js';
import { registerAnalysisCommands } from './commands/analysis.commands.js';
import { registerAuditCommands } from './commands/audit.commands.js';
import { registerCampaignCommands } from './commands/campaign.commands.js';
import { packageVersion, registerDataCommands } from './commands/data.commands.js';
import { registerLedgerCommands } from './commands/ledger.commands.js';
import { registerRegradeCommands } from './commands/regrade.commands.js';
import { registerRunsCommands } from './commands/runs.commands.js';
import { registerWorkerCommands } from './commands/worker.commands.js';
import { reportFailure } from './config/open-errors.js';

// The `a2rl` command line (commander); the commands live in src/commands/, one file per area.

export function buildCli(): Command {
  const program = new Command('a2rl')
    .description('Agent² RL-Bench as an event-sourced audit ledger with replayable runs')
    .version(packageVersion(), '-V, --version', 'print the a2rl version (package.json)')
    .showHelpAfterError()
    .exitOverride();
  registerRunsCommands(program);
  registerCampaignCommands(program);
  registerWorkerCommands(program);
  registerLedgerCommands(program);
  registerAnalysisCommands(program);
  registerAuditCommands(program);
  registerAccessCommands(program);
  registerRegradeCommands(program);
  registerDataCommands(program);
  return program;
}

export async function runCli(argv: string[]): Promise<number> {
  const program = buildCli();
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
