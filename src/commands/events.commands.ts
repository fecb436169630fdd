import type { Command } from 'commander';
import type { A2rlEvent, EventType } from '../../modules/ledger/events/catalog.js';
import type { EventStore } from '../../modules/ledger/event-store.port.js';
import type { RunSource } from '../../modules/query/run-reading.js';
import { table } from './cli-support.js';
import { eventLine } from './event-line.js';
import { untilInterrupted } from './interrupt.js';
import { integerAtLeast } from './option-parsers.js';
import { withReadSide } from './read-side.js';
import { jsonOut } from './terminal.js';

// `a2rl events`: a run's events, read from the ledger without the Nest app (read-side.ts). Registered
// with the ledger's commands (ledger.commands.ts).

interface EventFilter {
  /** null: every type. */
  types: ReadonlySet<EventType> | null;
  afterSeq: number;
  limit: number;
}

/** `--type A,B --type C`: every value, split at commas. */
export const collectList = (value: string, previous: string[] = []) => [...previous, ...value.split(',').map((v) => v.trim()).filter(Boolean)];

export function registerEventsCommand(program: Command): void {
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

/**
 * `events --follow`: the events recorded so far, then new ones as they are appended, until the run
 * closes and its final tree head is recorded, `--limit` events were printed, or Ctrl-C (exit 130).
 */
async function followEvents(source: RunSource, runId: string, filter: EventFilter, json: boolean): Promise<void> {
  const [{ followUntilSealed }, { canonicalJson }] = await Promise.all([import('../../modules/query/follow-sealed.js'), import('../../modules/ledger/events/canonical-json.js')]);
  let printed = 0;
  await untilInterrupted(async (signal) => {
    for await (const event of followUntilSealed(source, runId, signal)) {
      if (!matches(filter, event)) continue;
      // eventLine() shows the data inert; the other fields are the harness's own.
      process.stdout.write(json ? jsonOut(`${canonicalJson(event)}\n`) : `${String(event.seq).padEnd(6)}  ${event.occurredAt}  ${event.type.padEnd(TYPE_WIDTH)}  ${eventLine(event.data)}\n`);
      if (++printed >= filter.limit) return;
    }
  });
}
