import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { EVENT_TYPES, isEventType, type A2rlEvent, type EventType } from '../../modules/ledger/events/catalog.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import type { EventStore } from '../../modules/ledger/event-store.port.js';
import { LedgerService } from '../../modules/ledger/ledger.service.js';
import { EVENT_STORE } from '../../modules/ledger/tokens.js';
import { followRunEvents } from '../../modules/query/follow.js';
import { FAILURE_CLASSES, RUN_STATES } from '../../modules/query/query.dto.js';
import { RunSource, runEventsFrom } from '../../modules/query/run-source.js';
import { ProjectionRunnerService } from '../../modules/readmodels/readmodels.module.js';
import { liveRun, runsWithHarnessGone, stateLabel, type LiveRun } from '../../modules/runs/run-liveness.js';
import { RUN_LOCKS, type RunLocks } from '../../modules/runs/run.ports.js';
import { failureClassOf } from '../../projections/run-analysis/analyze.js';
import type { RunListRow } from '../../projections/run-list/run-list.entity.js';
import { serve } from '../server.js';
import { summary, table, withApp } from './cli-support.js';
import { jsonOut } from './terminal.js';

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
    .option('--type <types>', 'only events of these types: repeatable or comma-separated, e.g. --type SubmissionGraded,RunCompleted', collectList)
    .option('--after-seq <n>', 'only events with a seq greater than n (to resume where an earlier read stopped)')
    .option('--limit <n>', 'at most n events')
    .option('--follow', 'print events as they are appended until the run is completed or interrupted (and its final tree head signed), or Ctrl-C')
    .option('--json', 'NDJSON: one canonical JSON event per line ({type, runId, seq, id, occurredAt, schemaVersion, data})')
    .action(async (runId: string, opts: { type?: string[]; afterSeq?: string; limit?: string; follow?: boolean; json?: boolean }) => {
      const filter: EventFilter = {
        types: eventTypes(opts.type ?? []),
        afterSeq: opts.afterSeq === undefined ? -1 : integerOption('--after-seq', opts.afterSeq, -1),
        limit: opts.limit === undefined ? Infinity : integerOption('--limit', opts.limit, 1),
      };
      await withApp(async (app) => {
        if (opts.follow) await followEvents(app.get(RunSource), runId, filter, opts.json === true);
        else await printEvents(app.get<EventStore>(EVENT_STORE), app.get(LedgerService).backend, runId, filter, opts.json === true);
      });
    });

  program
    .command('runs')
    .description('list runs from the run-list read model, ordered by run id; the filters are those of GET /runs')
    .option('--task <id>', 'only runs of this task')
    .option('--agent <id>', 'only runs of this agent')
    .option('--driver <model>', 'only runs whose driver is this (the model the agent called most, else the declared one, as on the scoreboard)')
    .option('--state <state>', `only runs in this state: ${RUN_STATES.join(', ')}`)
    .option('--failure-class <class>', `only runs of this failure class: ${FAILURE_CLASSES.join(', ')}`)
    .option('--limit <n>', 'at most n runs')
    .option('--offset <n>', 'skip the first n matching runs')
    .option('--json', 'one JSON object per line: {runId, task, agent, driver, baseModel, state, eventCount, lastSeq, scheduledAt, lastEventAt}, and harnessGone: true on an open run shown interrupted because its harness is gone')
    .action(async (opts: RunsOptions) => {
      const filter = runFilter(opts);
      await withApp(async (app) => {
        const projections = app.get(ProjectionRunnerService);
        await projections.catchUp();
        const runs = await matchingRuns(projections, filter, runsWithHarnessGone(app.get<RunLocks>(RUN_LOCKS)));
        if (opts.json) {
          for (const run of runs) process.stdout.write(jsonOut(`${canonicalJson(run)}\n`));
          return;
        }
        if (!runs.length) {
          process.stdout.write(filter.any ? 'no runs match\n' : 'no runs recorded yet\n');
          return;
        }
        const rows = [['RUN', 'TASK', 'AGENT', 'STATE', 'EVENTS', 'LAST SEQ']];
        for (const r of runs) rows.push([r.runId, r.task ?? '-', r.agent ?? '-', stateLabel(r), String(r.eventCount), String(r.lastSeq)]);
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
    .option('--json', 'one JSON object: {projections: [{name, processed}], seconds}')
    .action(async (name: string | undefined, opts: { json?: boolean }) => {
      await withApp(async (app) => {
        const started = process.hrtime.bigint();
        const results = await app.get(ProjectionRunnerService).rebuild(name, (p) => {
          process.stderr.write(`\r  ${p.name}: ${p.processed} events`);
        });
        process.stderr.write('\n');
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        if (opts.json) {
          process.stdout.write(`${JSON.stringify({ projections: results.map((r) => ({ name: r.name, processed: r.processed })), seconds })}\n`);
          return;
        }
        for (const r of results) process.stdout.write(`rebuilt ${r.name}: ${r.processed} events\n`);
        process.stdout.write(`rebuild took ${seconds.toFixed(2)} s\n`);
      });
    });
}

/** `--type A,B --type C`: every value, split at commas. */
const collectList = (value: string, previous: string[] = []) => [...previous, ...value.split(',').map((v) => v.trim()).filter(Boolean)];

function integerOption(name: string, value: string, min: number): number {
  const n = Number(value);
  if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(n) || n < min) throw new Error(`${name} must be an integer of at least ${min}, got "${value}"`);
  return n;
}

// ---- events ----

interface EventFilter {
  /** null: every type. */
  types: ReadonlySet<EventType> | null;
  afterSeq: number;
  limit: number;
}

function eventTypes(names: string[]): ReadonlySet<EventType> | null {
  if (!names.length) return null;
  const unknown = names.filter((name) => !isEventType(name));
  if (unknown.length) throw new Error(`--type: unknown event type ${unknown.map((n) => `"${n}"`).join(', ')} (known: ${EVENT_TYPES.join(', ')})`);
  return new Set(names as EventType[]);
}

const matches = (filter: EventFilter, event: A2rlEvent) => event.seq > filter.afterSeq && (filter.types === null || filter.types.has(event.type));

/**
 * The events recorded so far, read from the store from `--after-seq` on in bounded reads (the
 * paging function GET /runs/:id/events uses): never the whole run when a page is asked for, and
 * with --json streamed to stdout as read.
 */
async function printEvents(store: EventStore, backend: string, runId: string, filter: EventFilter, json: boolean): Promise<void> {
  if ((await store.streamRevision(streamName(runId))) === null) throw new Error(`run "${runId}" has no events in the ${backend} ledger`);
  const rows = [['SEQ', 'OCCURRED AT', 'TYPE', 'DATA']];
  let count = 0;
  for await (const event of runEventsFrom(store, runId, filter)) {
    if (json) process.stdout.write(jsonOut(`${canonicalJson(event)}\n`));
    else rows.push([String(event.seq), event.occurredAt, event.type, summary(event.data)]);
    count += 1;
  }
  if (!json) process.stdout.write(count ? `${table(rows)}\n` : 'no events match\n');
}

const TYPE_WIDTH = Math.max(...EVENT_TYPES.map((t) => t.length));
const CLOSING = new Set<EventType>(['RunCompleted', 'RunInterrupted']);
/** How many times (a second apart) `--follow` looks for the final tree head after the closing event. */
const SEAL_POLLS = 30;

/**
 * `events --follow`: the events recorded so far, then new ones as they are appended, until the run
 * closes and its final tree head is recorded, `--limit` events were printed, or Ctrl-C (exit 130).
 */
async function followEvents(source: RunSource, runId: string, filter: EventFilter, json: boolean): Promise<void> {
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    process.exitCode = signal === 'SIGINT' ? 130 : 143;
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let printed = 0;
  const print = (event: A2rlEvent): boolean => {
    if (!matches(filter, event)) return true;
    // summary() shows the data inert; the other fields are the harness's own.
    process.stdout.write(json ? jsonOut(`${canonicalJson(event)}\n`) : `${String(event.seq).padEnd(6)}  ${event.occurredAt}  ${event.type.padEnd(TYPE_WIDTH)}  ${summary(event.data)}\n`);
    return ++printed < filter.limit;
  };
  try {
    let last: A2rlEvent | undefined;
    for await (const event of followRunEvents(source, runId, { signal: stop.signal })) {
      last = event;
      if (!print(event)) return;
    }
    if (!last || !CLOSING.has(last.type)) return; // interrupted by a signal
    for await (const event of sealOf(source, runId, last.seq, stop.signal)) if (!print(event)) return;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/**
 * What follows a run's closing event: its final signed tree head (the run seals right after
 * closing). Polled a bounded number of times, so a harness that died before sealing does not keep
 * the follower waiting (recovery seals such a run later).
 */
async function* sealOf(source: RunSource, runId: string, afterSeq: number, signal: AbortSignal): AsyncGenerator<A2rlEvent> {
  for (let poll = 0; poll < SEAL_POLLS; poll++) {
    const batch = await source.eventsAfter(runId, afterSeq);
    for (const event of batch) {
      afterSeq = event.seq;
      yield event;
    }
    if (batch.some((e) => e.type === 'TreeHeadSigned')) return;
    try {
      await sleep(1000, undefined, { signal });
    } catch {
      return; // aborted
    }
  }
}

// ---- runs ----

interface RunsOptions {
  task?: string;
  agent?: string;
  driver?: string;
  state?: string;
  failureClass?: string;
  limit?: string;
  offset?: string;
  json?: boolean;
}

interface RunFilter {
  task?: string;
  agent?: string;
  driver?: string;
  state?: string;
  failureClass?: string;
  limit: number;
  offset: number;
  /** Whether any filter was given (for the "nothing matches" line). */
  any: boolean;
}

function runFilter(o: RunsOptions): RunFilter {
  if (o.state !== undefined && !(RUN_STATES as readonly string[]).includes(o.state)) throw new Error(`--state must be one of ${RUN_STATES.join(', ')}, got "${o.state}"`);
  if (o.failureClass !== undefined && !(FAILURE_CLASSES as readonly string[]).includes(o.failureClass)) {
    throw new Error(`--failure-class must be one of ${FAILURE_CLASSES.join(', ')}, got "${o.failureClass}"`);
  }
  const limit = o.limit === undefined ? Infinity : integerOption('--limit', o.limit, 1);
  const offset = o.offset === undefined ? 0 : integerOption('--offset', o.offset, 0);
  const any = [o.task, o.agent, o.driver, o.state, o.failureClass, o.limit].some((v) => v !== undefined) || offset > 0;
  return { task: o.task, agent: o.agent, driver: o.driver, state: o.state, failureClass: o.failureClass, limit, offset, any };
}

/**
 * The run-list rows the filter keeps; driver and failure class come from the run analyses, as GET /runs
 * reads them (no failure class before a run has ended). An open run whose harness is `gone` is listed
 * interrupted (run-liveness.ts).
 */
async function matchingRuns(projections: ProjectionRunnerService, f: RunFilter, gone: ReadonlySet<string>): Promise<LiveRun<RunListRow>[]> {
  const rows = (await projections.runList()).map((r) => liveRun(r, gone));
  const analyses = f.driver !== undefined || f.failureClass !== undefined ? new Map((await projections.runAnalyses()).map((a) => [a.runId, a])) : null;
  const analysed = (r: LiveRun<RunListRow>) => {
    if (!analyses) return true;
    const a = analyses.get(r.runId);
    return !!a && (f.driver === undefined || a.driver === f.driver) && (f.failureClass === undefined || (!r.harnessGone && failureClassOf(a) === f.failureClass));
  };
  const kept = rows.filter((r) => (f.task === undefined || r.task === f.task) && (f.agent === undefined || r.agent === f.agent) && (f.state === undefined || r.state === f.state) && analysed(r));
  return kept.slice(f.offset, f.offset + f.limit);
}
