import type { Command } from 'commander';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { LedgerService } from '../../modules/ledger/ledger.service.js';
import { ProjectionRunnerService } from '../../modules/readmodels/readmodels.module.js';
import { serve } from '../server.js';
import { summary, table, withApp } from './cli-support.js';

/** Commands over the ledger and its read models: serve, events, runs, projections. */
export function registerLedgerCommands(program: Command): void {
  program
    .command('serve')
    .description('serve the HTTP API (GET /health) and keep projections up to date')
    .action(async () => {
      await serve();
      await new Promise(() => undefined); // runs until a signal closes the app
    });

  program
    .command('events')
    .description("print a run's events in seq order (the raw forensic view)")
    .argument('<runId>', 'run id')
    .option('--json', 'NDJSON: one canonical JSON event per line')
    .action(async (runId: string, opts: { json?: boolean }) => {
      await withApp(async (app) => {
        const ledger = app.get(LedgerService);
        let count = 0;
        const rows = [['SEQ', 'OCCURRED AT', 'TYPE', 'DATA']];
        for await (const event of ledger.events(runId)) {
          count += 1;
          if (opts.json) process.stdout.write(`${canonicalJson(event)}\n`);
          else rows.push([String(event.seq), event.occurredAt, event.type, summary(event.data)]);
        }
        if (count === 0) throw new Error(`run "${runId}" has no events in the ${ledger.backend} ledger`);
        if (!opts.json) process.stdout.write(`${table(rows)}\n`);
      });
    });

  program
    .command('runs')
    .description('list runs from the run-list read model')
    .option('--json', 'one JSON object per line')
    .action(async (opts: { json?: boolean }) => {
      await withApp(async (app) => {
        const projections = app.get(ProjectionRunnerService);
        await projections.catchUp();
        const runs = await projections.runList();
        if (opts.json) {
          for (const run of runs) process.stdout.write(`${canonicalJson(run)}\n`);
          return;
        }
        if (!runs.length) {
          process.stdout.write('no runs recorded yet\n');
          return;
        }
        const rows = [['RUN', 'TASK', 'AGENT', 'STATE', 'EVENTS', 'LAST SEQ']];
        for (const r of runs) rows.push([r.runId, r.task ?? '-', r.agent ?? '-', r.state ?? '-', String(r.eventCount), String(r.lastSeq)]);
        process.stdout.write(`${table(rows)}\n`);
      });
    });

  const projections = program.command('projections').description('read-model projections: status and rebuild');
  projections
    .command('status')
    .description('name, checkpoint and lag of every projection')
    .option('--json', 'JSON array')
    .action(async (opts: { json?: boolean }) => {
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
    .action(async (name: string | undefined) => {
      await withApp(async (app) => {
        const started = process.hrtime.bigint();
        const results = await app.get(ProjectionRunnerService).rebuild(name, (p) => {
          process.stderr.write(`\r  ${p.name}: ${p.processed} events`);
        });
        process.stderr.write('\n');
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        for (const r of results) process.stdout.write(`rebuilt ${r.name}: ${r.processed} events\n`);
        process.stdout.write(`rebuild took ${seconds.toFixed(2)} s\n`);
      });
    });
}
