import { Command } from 'commander';
import { packageVersion } from './commands/data.commands.js';

// The `a2rl` program (commander) and the areas its commands come from (src/commands/, one file per area).

type Register = (program: Command) => void;

/** Each area's commands (src/commands/), loaded on use: a command starts with its own area's modules only. */
const AREAS = {
  runs: async () => (await import('./commands/runs.commands.js')).registerRunsCommands,
  campaign: async () => (await import('./commands/campaign.commands.js')).registerCampaignCommands,
  worker: async () => (await import('./commands/worker.commands.js')).registerWorkerCommands,
  ledger: async () => (await import('./commands/ledger.commands.js')).registerLedgerCommands,
  analysis: async () => (await import('./commands/analysis.commands.js')).registerAnalysisCommands,
  audit: async () => (await import('./commands/audit.commands.js')).registerAuditCommands,
  access: async () => (await import('./commands/access.commands.js')).registerAccessCommands,
  regrade: async () => (await import('./commands/regrade.commands.js')).registerRegradeCommands,
  data: async () => (await import('./commands/data.commands.js')).registerDataCommands,
  peers: async () => (await import('./commands/peers.commands.js')).registerPeersCommands,
  output: async () => (await import('./commands/output.commands.js')).registerOutputCommands,
  analytics: async () => (await import('./commands/analytics.commands.js')).registerAnalyticsCommands,
} satisfies Record<string, () => Promise<Register>>;

/** The area that registers each top-level command (src/cli.spec.ts holds it to what the areas register). */
export const COMMAND_AREA: Record<string, keyof typeof AREAS> = {
  run: 'runs', demo: 'runs', tasks: 'runs', agents: 'runs',
  campaign: 'campaign', worker: 'worker',
  serve: 'ledger', events: 'ledger', runs: 'ledger', projections: 'ledger',
  scoreboard: 'analysis', report: 'analysis', transcript: 'analysis',
  keys: 'audit', verify: 'audit', replay: 'audit', export: 'audit', 'verify-bundle': 'audit',
  tokens: 'access', access: 'access', regrade: 'regrade', data: 'data', doctor: 'data', peers: 'peers',
  logs: 'output', blob: 'output',
  query: 'analytics', 'export-tables': 'analytics', analysis: 'analytics',
};

/** The CLI with every command, with only `command`'s area when it names one, or none for --version (help and errors need them all). */
export async function buildCli(command?: string): Promise<Command> {
  const program = new Command('a2rl')
    .description('Agent² RL-Bench as an event-sourced audit ledger with replayable runs')
    .version(packageVersion(), '-V, --version', 'print the a2rl version (package.json)')
    .showHelpAfterError()
    .exitOverride();
  if (command === '-V' || command === '--version') return program;
  const only = command !== undefined && Object.hasOwn(COMMAND_AREA, command) ? COMMAND_AREA[command] : undefined;
  for (const [area, load] of Object.entries(AREAS)) if (!only || area === only) (await load())(program);
  return program;
}

