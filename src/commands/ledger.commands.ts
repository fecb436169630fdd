import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import type { A2rlEvent, EventType } from '../../modules/ledger/events/catalog.js';
import type { EventStore } from '../../modules/ledger/event-store.port.js';
import type { RunSource } from '../../modules/query/run-reading.js';
import { FAILURE_CLASSES, RUN_STATES } from '../../modules/query/run-filters.js';
import { RUN_SORTS, sortRuns, type RunSort } from '../../modules/query/run-listing.js';
import type { LiveRun } from '../../modules/runs/run-liveness.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import type { RunListRow } from '../../projections/run-list/run-list.entity.js';
import { formatSeconds } from '../../modules/settings/duration.js';
import { table } from './cli-support.js';
import { eventLine } from './event-line.js';
import { withReadSide, type ReadModels } from './read-side.js';
import { jsonOut } from './terminal.js';
import { untilInterrupted } from './interrupt.js';
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

  program
    .command('events')
    .description("print a run's events in seq order (the raw forensic view)")
    .argument('<runId>', 'run id')
    .option('--type <types>', 'only events of these types: repeatable or comma-separated, e.g. --type SubmissionGraded,RunCompleted', collectList)
    .option('--after-seq <n>', 'only events with a seq greater than n (to resume where an earlier read stopped)', integerAtLeast('--after-seq', -1))
    .option('--limit <n>', 'at most n events', integerAtLeast('--limit', 1))
    .option('--follow', 'print events as they are appended until the run is completed or interrupted (and its final tree head signed), or Ctrl-C')
    .option('--json', 'NDJSON: one canonical JSON event per line ({type, runId, seq, id, occurredAt, schemaVersion, data}), every payload whole (without --json: one line per event, its fields cut at 160 characters)')
    .action(async (runId: string, opts: { type?: string[]; afterSeq?: number; limit?: number; follow?: boolean; json?: boolean }) => {
      const filter: EventFilter = { types: await eventTypes(opts.type ?? []), afterSeq: opts.afterSeq ?? -1, limit: opts.limit ?? Infinity };
      await withReadSide(async (side) => {
        if (opts.follow) await followEvents(side.source, runId, filter, opts.json === true);
        else await printEvents(side.store, runId, filter, opts.json === true);
      });
    });

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
        const [{ runsWithHarnessGone }, models] = await Promise.all([import('../../modules/runs/run-liveness.js'), side.readModels()]);
        await models.catchUp();
        const runs = await matchingRuns(models, filter, runsWithHarnessGone(await side.locks()));
        if (opts.json) {
          const { canonicalJson } = await import('../../modules/ledger/events/canonical-json.js');
          for (const run of runs) process.stdout.write(jsonOut(`${canonicalJson(run)}\n`));
          return;
        }
        if (!runs.length) {
          process.stdout.write(filter.any ? 'no runs match\n' : 'no runs recorded yet\n');
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

/** The Nest app and its projection runner, for the commands that maintain projections. */
async function appSide() {
  const [{ withApp }, { ProjectionRunnerService }] = await Promise.all([import('./cli-support.js'), import('../../modules/readmodels/readmodels.module.js')]);
  return { withApp, ProjectionRunnerService };
}

/** A scheduled time (ISO UTC) as `2026-11-28 16:53:14`, or '-'. */
function startedAt(iso: string | null): string {
  return iso === null ? '-' : iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '');
}

/** `--type A,B --type C`: every value, split at commas. */
const collectList = (value: string, previous: string[] = []) => [...previous, ...value.split(',').map((v) => v.trim()).filter(Boolean)];

// ---- events ----

interface EventFilter {
  /** null: every type. */
  types: ReadonlySet<EventType> | null;
  afterSeq: number;
  limit: number;
}

async function eventTypes(names: string[]): Promise<ReadonlySet<EventType> | null> {
  if (!names.length) return null;
  const { EVENT_TYPES, isEventType } = await import('../../modules/ledger/events/catalog.js');
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
async function printEvents(store: EventStore, runId: string, filter: EventFilter, json: boolean): Promise<void> {
  const [{ streamName }, { runEventsFrom }, { canonicalJson }] = await Promise.all([
    import('../../modules/ledger/events/ids.js'),
    import('../../modules/query/run-reading.js'),
    import('../../modules/ledger/events/canonical-json.js'),
  ]);
  if ((await store.streamRevision(streamName(runId))) === null) throw new Error(`run "${runId}" has no events in the ${store.backend} ledger`);
  const rows = [['SEQ', 'OCCURRED AT', 'TYPE', 'DATA']];
  let count = 0;
  for await (const event of runEventsFrom(store, runId, filter)) {
    if (json) process.stdout.write(jsonOut(`${canonicalJson(event)}\n`));
    else rows.push([String(event.seq), event.occurredAt, event.type, eventLine(event.data)]);
    count += 1;
  }
  if (!json) process.stdout.write(count ? `${table(rows)}\n` : 'no events match\n');
}

/** The widest event type name (RolloutBatchRecorded …): the column --follow pads to. */
const TYPE_WIDTH = 24;
const CLOSING = new Set<EventType>(['RunCompleted', 'RunInterrupted']);
/** How many times (a second apart) `--follow` looks for the final tree head after the closing event. */
const SEAL_POLLS = 30;

/**
 * `events --follow`: the events recorded so far, then new ones as they are appended, until the run
 * closes and its final tree head is recorded, `--limit` events were printed, or Ctrl-C (exit 130).
 */
async function followEvents(source: RunSource, runId: string, filter: EventFilter, json: boolean): Promise<void> {
  const [{ followRunEvents }, { canonicalJson }] = await Promise.all([import('../../modules/query/follow.js'), import('../../modules/ledger/events/canonical-json.js')]);
  let printed = 0;
  const print = (event: A2rlEvent): boolean => {
    if (!matches(filter, event)) return true;
    // eventLine() shows the data inert; the other fields are the harness's own.
    process.stdout.write(json ? jsonOut(`${canonicalJson(event)}\n`) : `${String(event.seq).padEnd(6)}  ${event.occurredAt}  ${event.type.padEnd(TYPE_WIDTH)}  ${eventLine(event.data)}\n`);
    return ++printed < filter.limit;
  };
  await untilInterrupted(async (signal) => {
    let last: A2rlEvent | undefined;
    for await (const event of followRunEvents(source, runId, { signal })) {
      last = event;
      if (!print(event)) return;
    }
    if (!last || !CLOSING.has(last.type)) return; // interrupted by a signal
    for await (const event of sealOf(source, runId, last.seq, signal)) if (!print(event)) return;
  });
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
  sort: RunSort;
  limit?: number;
  offset?: number;
  json?: boolean;
}

interface RunFilter {
  task?: string;
  agent?: string;
  driver?: string;
  state?: string;
  failureClass?: string;
  sort: RunSort;
  limit: number;
  offset: number;
  /** Whether any filter was given (for the "nothing matches" line). */
  any: boolean;
}

function runFilter(o: RunsOptions): RunFilter {
  // Values were parsed and checked by commander (option-parsers.ts).
  const limit = o.limit ?? Infinity;
  const offset = o.offset ?? 0;
  const any = [o.task, o.agent, o.driver, o.state, o.failureClass, o.limit].some((v) => v !== undefined) || offset > 0;
  return { task: o.task, agent: o.agent, driver: o.driver, state: o.state, failureClass: o.failureClass, sort: o.sort, limit, offset, any };
}

/** One run as `a2rl runs` lists it: its run-list row with what its analysis adds (the attributed driver, scores, duration). */
export interface ListedRun {
  runId: string;
  task: string | null;
  agent: string | null;
  /** The model the agent called most, else the declared one (as on the scoreboard). */
  driver: string | null;
  declaredDriver: string | null;
  baseModel: string | null;
  state: RunListRow['state'];
  baseline: number | null;
  best: number | null;
  improvement: number | null;
  submissions: number;
  scheduledAt: string | null;
  durationS: number | null;
  eventCount: number;
  lastSeq: number;
  lastEventAt: string;
}

function listed(row: RunListRow, a: RunAnalysis | undefined): ListedRun {
  return {
    runId: row.runId, task: row.task, agent: row.agent, driver: a ? a.driver : row.driver, declaredDriver: row.driver, baseModel: row.baseModel, state: row.state,
    baseline: a?.baseline ?? null, best: a?.best ?? null, improvement: a?.improvement ?? null, submissions: a?.submissions.length ?? 0,
    scheduledAt: row.scheduledAt, durationS: a?.durationS ?? null, eventCount: row.eventCount, lastSeq: row.lastSeq, lastEventAt: row.lastEventAt,
  };
}

/**
 * The runs the filter keeps, in the order asked for: the run-list rows with their analyses (driver
 * and failure class as GET /runs reads them; no failure class before a run has ended). An open run
 * whose harness is `gone` is listed interrupted (run-liveness.ts).
 */
async function matchingRuns(models: ReadModels, f: RunFilter, gone: ReadonlySet<string>): Promise<LiveRun<ListedRun>[]> {
  const [{ liveRun }, { failureClassOf }, rows, analyses] = await Promise.all([
    import('../../modules/runs/run-liveness.js'),
    import('../../projections/run-analysis/analyze.js'),
    models.runList(),
    models.runAnalyses().then((list) => new Map(list.map((a) => [a.runId, a]))),
  ]);
  const runs = rows.map((r) => liveRun(listed(r, analyses.get(r.runId)), gone));
  const analysed = (r: LiveRun<ListedRun>) => {
    if (f.driver === undefined && f.failureClass === undefined) return true;
    const a = analyses.get(r.runId);
    return !!a && (f.driver === undefined || a.driver === f.driver) && (f.failureClass === undefined || (!r.harnessGone && failureClassOf(a) === f.failureClass));
  };
  const kept = runs.filter((r) => (f.task === undefined || r.task === f.task) && (f.agent === undefined || r.agent === f.agent) && (f.state === undefined || r.state === f.state) && analysed(r));
  return sortRuns(kept, f.sort).slice(f.offset, f.offset + f.limit);
}
