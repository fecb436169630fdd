import type { Command } from 'commander';
import { inertLine } from '../../modules/reports/inert-text.js';
import { table } from './cli-support.js';
import { withReadSide } from './read-side.js';
import { jsonOut } from './terminal.js';

// `a2rl projections add|remove|user`: the operator's own projections (modules/analytics/user-projections,
// docs/analysis.md "User projections"). Registered under the `projections` command (ledger.commands.ts).

async function userProjections(side: { config: { home: string }; store: import('../../modules/ledger/event-store.port.js').EventStore }, timeoutS?: string) {
  const { UserProjections, userProjectionsDir } = await import('../../modules/analytics/user-projections/user-projections.js');
  const timeout = timeoutS === undefined ? undefined : Number(timeoutS) * 1000;
  if (timeout !== undefined && !(timeout > 0)) throw new Error(`--timeout takes a positive number of seconds, got "${timeoutS}"`);
  return new UserProjections(userProjectionsDir(side.config.home), side.store, timeout);
}

export function registerUserProjectionCommands(projections: Command): void {
  projections
    .command('add')
    .description('register a projection of your own (an ES module: name, version, columns, initialState, evolve, rows): built from the whole ledger in a worker thread within the time limit, then queryable as a table with `a2rl query` and kept live by `a2rl serve`; a module that fails is refused in one line and nothing is written')
    .argument('<file>', 'the module (.mjs or .js, self-contained)')
    .option('--timeout <seconds>', 'time limit of the build', '120')
    .option('--json', 'one JSON object: {name, version, rows, events, replaced}')
    .action(async (file: string, opts: { timeout: string; json?: boolean }) => {
      await withReadSide(async (side) => {
        const r = await (await userProjections(side, opts.timeout)).add(file);
        if (opts.json) process.stdout.write(jsonOut(`${JSON.stringify({ name: r.name, version: r.version, rows: r.rows, events: r.events, replaced: r.replaced })}\n`));
        else process.stdout.write(`${r.replaced ? 're-registered' : 'registered'} projection ${inertLine(r.name)} v${r.version}: ${r.rows} rows from ${r.events} events (a2rl query "SELECT * FROM ${inertLine(r.name)}")\n`);
      });
    });
  projections
    .command('remove')
    .description('unregister a user projection and delete its table')
    .argument('<name>', 'its name')
    .action(async (name: string) => {
      await withReadSide(async (side) => {
        if (!(await userProjections(side)).remove(name)) throw new Error(`no user projection "${name}"`);
        process.stdout.write(`removed projection ${inertLine(name)}\n`);
      });
    });
  projections
    .command('user')
    .description('bring the user projections up to date and list them: name, version, rows, events read, or why one failed')
    .option('--rebuild', 'rebuild each from the first event')
    .option('--json', 'one JSON array of {name, ok, rows, events, error?}')
    .action(async (opts: { rebuild?: boolean; json?: boolean }) => {
      await withReadSide(async (side) => {
        const outcomes = await (await userProjections(side)).catchUp({ rebuild: opts.rebuild });
        if (opts.json) process.stdout.write(jsonOut(`${JSON.stringify(outcomes)}\n`));
        else if (!outcomes.length) process.stdout.write('no user projections: add one with `a2rl projections add <file>`\n');
        else process.stdout.write(`${table([['NAME', 'ROWS', 'EVENTS', 'STATUS'], ...outcomes.map((o) => [o.name, String(o.rows), String(o.events), o.ok ? 'ok' : `failed: ${o.error}`])])}\n`);
        if (outcomes.some((o) => !o.ok)) process.exitCode = 1;
      });
    });
}
