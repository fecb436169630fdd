import type { Command } from 'commander';
import type { RunFilter } from '../../modules/query/listed-runs.js';
import { FAILURE_CLASSES, RUN_STATES } from '../../modules/query/run-filters.js';
import { RUN_SORTS } from '../../modules/query/run-listing.js';
import { formatSeconds } from '../../modules/settings/duration.js';
import { table } from './cli-support.js';
import { registerEventsCommand } from './events.commands.js';
import { withReadSide } from './read-side.js';
import { appSide } from './app-side.js';
import { jsonOut } from './terminal.js';
import { registerUserProjectionCommands } from './user-projections.commands.js';
import { StatusLine } from './status-line.js';
import { choiceOption, integerAtLeast } from './option-parsers.js';

// `events` and `runs` read the ledger and the read models without the Nest app (read-side.ts), and
// load what else they use on use: they start in a fraction of a second.

/** Commands over the ledger and its read models: serve, events, runs, projections. */
export function registerLedgerCommands(program: Command): void {
  program
    .command('serve')
    .description('serve the HTTP API (GET /health) and keep projections up to date')
    .action(async () => {
      const { serve } = await import('../server.js');
      await serve();
      await new Promise(() => undefined); // runs until a signal closes the app
    });

  registerEventsCommand(program);

  program
    .command('runs')
    .description('list runs, newest first: task, agent, driver, state, best, improvement, start time, agent duration; the filters are those of GET /runs')
    .option('--task <id>', 'only runs of this task')
    .option('--agent <id>', 'only runs of this agent')
    .option('--driver <model>', 'only runs whose driver is this (the model the agent called most, else the declared one, as on the scoreboard)')
    .addOption(choiceOption('--state <state>', 'only runs in this state', RUN_STATES, `one of ${RUN_STATES.join(', ')}`))
    .addOption(choiceOption('--failure-class <class>', 'only runs of this failure class', FAILURE_CLASSES, `one of ${FAILURE_CLASSES.join(', ')}`))
    .addOption(choiceOption('--sort <key>', 'order (started: newest first; best, improvement, duration: largest first; id: ascending)', RUN_SORTS, `one of ${RUN_SORTS.join(', ')}`).default('started'))
    .option('--limit <n>', 'at most n runs', integerAtLeast('--limit', 1))
    .option('--offset <n>', 'skip the first n matching runs', integerAtLeast('--offset', 0))
    .option('--json', 'one JSON object per line: {runId, task, agent, driver, declaredDriver, baseModel, state, baseline, best, improvement, submissions, scheduledAt, durationS, eventCount, lastSeq, lastEventAt}, and harnessGone: true on an open run shown interrupted because its harness is gone')
    .action(async (opts: RunsOptions) => {
      const filter = runFilter(opts);
      await withReadSide(async (side) => {
        const [{ runsWithHarnessGone }, { matchingRuns, filters }, models] = await Promise.all([import('../../modules/runs/run-liveness.js'), import('../../modules/query/listed-runs.js'), side.readModels()]);
        await models.catchUp();
        const runs = matchingRuns(await models.runList(), await models.runAnalyses(), filter, runsWithHarnessGone(await side.locks()));
        if (opts.json) {
          const { canonicalJson } = await import('../../modules/ledger/events/canonical-json.js');
          for (const run of runs) process.stdout.write(jsonOut(`${canonicalJson(run)}\n`));
          return;
        }
        if (!runs.length) {
          process.stdout.write(filters(filter) ? 'no runs match\n' : 'no runs recorded yet\n');
          return;
        }
        const { stateLabel } = await import('../../modules/runs/run-liveness.js');
        const score = (n: number | null) => (n === null ? '-' : n.toFixed(1));
        const rows = [['RUN', 'TASK', 'AGENT', 'DRIVER', 'STATE', 'BEST', 'IMPROVEMENT', 'STARTED (UTC)', 'DURATION', 'EVENTS']];
        for (const r of runs) {
          rows.push([
            r.runId, r.task ?? '-', r.agent ?? '-', r.driver ?? '-', stateLabel(r), score(r.best), r.improvement === null ? '-' : `${r.improvement >= 0 ? '+' : ''}${r.improvement.toFixed(1)}`,
            startedAt(r.scheduledAt), r.durationS === null ? '-' : formatSeconds(Math.round(r.durationS)), String(r.eventCount),
          ]);
        }
        process.stdout.write(`${table(rows)}\n`);
      });
    });

  const projections = program.command('projections').description('read-model projections: status and rebuild');
  projections
    .command('status')
    .description('name, checkpoint and lag of every projection')
    .option('--json', 'JSON array')
    .action(async (opts: { json?: boolean }) => {
      const { withApp, ProjectionRunnerService } = await appSide();
      await withApp(async (app) => {
        const status = await app.get(ProjectionRunnerService).status();
        if (opts.json) {
          process.stdout.write(`${JSON.stringify(status)}\n`);
          return;
        }
        const rows = [['NAME', 'VERSION', 'CHECKPOINT', 'PROCESSED', 'LAG']];
        for (const s of status) rows.push([s.name, String(s.version), s.checkpoint ?? '(start)', String(s.eventsProcessed), String(s.lag)]);
        process.stdout.write(`${table(rows)}\n`);
      });
    });
  projections
    .command('rebuild')
    .description('drop a projection (or all) and rebuild it from the first event')
    .argument('[name]', 'projection name (default: all)')
    .option('--json', 'one JSON object: {projections: [{name, processed}], seconds}')
    .action(async (name: string | undefined, opts: { json?: boolean }) => {
      const { withApp, ProjectionRunnerService } = await appSide();
      await withApp(async (app) => {
        const started = process.hrtime.bigint();
        // Redrawn on a terminal; elsewhere the results below say it (one line per projection).
        const status = new StatusLine();
        const results = await app
          .get(ProjectionRunnerService)
          .rebuild(name, (p) => status.show(`  ${p.name}: ${p.processed} events`, false))
          .finally(() => status.stop());
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        if (opts.json) {
          process.stdout.write(`${JSON.stringify({ projections: results.map((r) => ({ name: r.name, processed: r.processed })), seconds })}\n`);
          return;
        }
        for (const r of results) process.stdout.write(`rebuilt ${r.name}: ${r.processed} events\n`);
        process.stdout.write(`rebuild took ${seconds.toFixed(2)} s\n`);
      });
    });
  registerUserProjectionCommands(projections); // add, remove, user: the operator's own projections (modules/analytics)
}

/** A scheduled time (ISO UTC) as `2026-11-28 16:53:14`, or '-'. */
function startedAt(iso: string | null): string {
  return iso === null ? '-' : iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '');
}

// ---- runs ----

/** What commander hands `a2rl runs`: the filter, with no limit or offset when not given. */
type RunsOptions = Omit<RunFilter, 'limit' | 'offset'> & { limit?: number; offset?: number; json?: boolean };

/** The filter of `a2rl runs` (values parsed and checked by commander, option-parsers.ts). */
function runFilter(o: RunsOptions): RunFilter {
  return { task: o.task, agent: o.agent, driver: o.driver, state: o.state, failureClass: o.failureClass, sort: o.sort, limit: o.limit ?? Infinity, offset: o.offset ?? 0 };
}
