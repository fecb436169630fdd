import { createHash } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { In, MoreThan, type DataSource, type Repository } from 'typeorm';
import { PROJECTIONS } from '../../projections/index.js';
import { REPORT_FORMATS, renderBuiltReport, renderReport, type ReportFormat } from '../reports/render.js';
import { buildReport, OUTPUT_TAIL_BYTES, type ReportInput } from '../reports/report-model.js';
import { RunAnalysisRow } from '../../projections/run-analysis/run-analysis.entity.js';
import { AnalysisEvents } from '../../projections/run-analysis/analysis-events.js';
import { analyzeRun } from '../../projections/run-analysis/analyze.js';
import { analysisRow, runAnalysisProjection } from '../../projections/run-analysis/run-analysis.projection.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { artifactBlobReader, type BlobReader } from '../../projections/blob-reader.js';
import type { AnyProjection } from '../../projections/run-projection.js';
import { EventStoreUnavailableError } from '../ledger/errors.js';
import type { EventStore, ReadAllOptions, ReadStreamOptions, RecordedEvent, Subscription } from '../ledger/event-store.port.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import { streamName } from '../ledger/events/ids.js';
import { RunSource } from '../query/run-source.js';
import { ProjectionFailedError, ProjectionRunner } from '../readmodels/projection-runner.js';
import { leafHash } from '../ledger/merkle.js';
import type { VerificationFailure } from './verify-chain.js';
import { readResilient, type RunScan, type VerifyDeps, type VerifyProgress } from './verify-model.js';

// `a2rl verify --rebuild` (verify.service.ts, step 3): the derived read models and reports rebuilt
// from the verified events and compared with the live ones. Imported only when asked for: it pulls
// in every projection, the renderers and TypeORM, which the record check does not need.

/**
 * Rebuilds every projection from this run's events into a scratch store and compares rows and
 * reports with the live ones. The projections read the run again from the store through a view
 * that yields only the verified events: each one's bytes must hash to the leaf the scan recorded.
 * That one read feeds the keyed projections (a batch at a time) and, folded as it goes, the run
 * analysis and the reports: they get the events they read (AnalysisEvents), not the whole run.
 */
export async function checkProjections(deps: VerifyDeps, runId: string, scan: RunScan, progress: (p: VerifyProgress) => void): Promise<VerificationFailure[]> {
  const failures: VerificationFailure[] = [];
  const { readModels, readModelStores, runs, catchUp } = deps;
  if (!readModels || !readModelStores || !runs || !catchUp) throw new Error('verifying with rebuild needs the live read models');
  const blobs = artifactBlobReader(deps.artifacts);
  await catchUp();
  const dir = await mkdtemp(path.join(deps.tmpDir ?? os.tmpdir(), 'a2rl-verify-'));
  let scratch: DataSource | undefined;
  const restoreGrowth = limitHeapGrowth();
  try {
    scratch = await readModelStores.openScratch(dir);
    const view = new VerifiedRunView(deps.store, runId, scan);
    // The stdout chunks beyond what the report's output section shows are counted, not held.
    const read = new AnalysisEvents({ outputTailBytes: OUTPUT_TAIL_BYTES });
    let last: RecordedEvent | undefined;
    view.tap = (recorded) => {
      if (last && recorded.event.seq <= last.event.seq) return; // a second read of the view
      read.add(recorded.event);
      last = recorded;
    };
    // The run analysis is built below from the same read; any other run projection by the runner.
    const runner = new ProjectionRunner(view, scratch, PROJECTIONS.filter((p) => p !== runAnalysisProjection), { blobs, heldRunBytes: Infinity });
    const total = scan.count - scan.decodeFailures.length;
    try {
      const compact = collectorEvery(COLLECT_EVERY_EVENTS);
      compact(0);
      await runner.rebuild(undefined, (p) => {
        progress({ stage: 'projections', done: p.processed, total });
        compact(p.processed);
      });
      compact(Infinity);
      view.tap = undefined;
      if (last) await rebuildAnalysis(scratch, read, last, blobs);
      collectGarbage();
    } catch (error) {
      if (!(error instanceof ProjectionFailedError)) throw error;
      const seq = error.event.event.seq;
      return [{ check: 'projection', seq, message: `rebuilding projection ${error.projection} from zero failed at seq ${seq}: ${error.message}` }];
    }
    for (const projection of PROJECTIONS) failures.push(...(await compareRows(projection, runId, scratch, readModels)));

    // Both sides render from the verified events the analysis read and one blob reader: what
    // differs is the analysis row, rebuilt or live. Each report is kept as its digest only; one
    // that differs is rendered again from both sides, to name the line. Rendering is pure, so when
    // the two analyses are the same JSON the inputs are identical and one rendering stands for both.
    const rebuiltSource = new ScratchRunSource(scratch, view, runs.blobs);
    const events = read.finish();
    let rebuilt: ReportDigests | null, live: ReportDigests | null;
    try {
      const [rebuiltInput, liveInput] = [withOmitted(await rebuiltSource.reportInput(runId, events), read), withOmitted(await runs.reportInput(runId, events), read)];
      collectGarbage();
      rebuilt = await reportDigests(rebuiltInput);
      live = sameReportInput(rebuiltInput, liveInput) ? rebuilt : await reportDigests(liveInput);
    } catch (error) {
      if (error instanceof EventStoreUnavailableError) throw error;
      return [...failures, { check: 'report', message: `the reports cannot be rendered: ${(error as Error).message}` }];
    }
    for (const [i, format] of REPORT_FORMATS.entries()) {
      if (rebuilt === null || live === null) failures.push({ check: 'report', message: `no ${rebuilt === null ? 'rebuilt' : 'live'} run analysis to render the ${format} report from` });
      else if (rebuilt[format] !== live[format]) {
        const [fromRebuild, fromLive] = [(await renderFrom(rebuiltSource, runId, read, format))!, (await renderFrom(runs, runId, read, format))!];
        failures.push({ check: 'report', message: `the ${format} report rendered from the live read models differs from the one rendered from a rebuild (first difference on line ${firstDifferentLine(fromLive, fromRebuild)})` });
      }
      progress({ stage: 'reports', done: i + 1, total: REPORT_FORMATS.length });
    }
    return failures;
  } finally {
    restoreGrowth();
    if (scratch?.isInitialized) await scratch.destroy();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * While the rebuild runs, V8 lets the heap grow by at most HEAP_GROWING_PERCENT over what survived
 * its last full collection before it collects again (V8's `--heap-growing-percent`, which it reads
 * at each collection), instead of its own factor of up to 4 on a fast machine: the rebuild holds the
 * run's events and allocates far more than it keeps (on the audit bench's 1M events, peak RSS 495
 * MB without, 454 MB with, for 5-7% more time). Returns what puts V8's default back; where the
 * runtime refuses the flag, nothing changes.
 */
function limitHeapGrowth(): () => void {
  try {
    setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
    return () => setFlagsFromString('--heap-growing-percent=0');
  } catch {
    return () => undefined;
  }
}

const HEAP_GROWING_PERCENT = 20;

/**
 * The run-analysis projection's row, rebuilt as the runner rebuilds it (analyze, then the row)
 * from the events it reads, written to the scratch store; a failure is the runner's, at the run's last event.
 */
async function rebuildAnalysis(scratch: DataSource, read: AnalysisEvents, last: RecordedEvent, blobs: BlobReader): Promise<void> {
  let row: RunAnalysisRow;
  try {
    row = analysisRow(await analyzeRun(read.finish(), blobs, read.count));
  } catch (cause) {
    if (cause instanceof EventStoreUnavailableError) throw cause;
    throw new ProjectionFailedError(runAnalysisProjection.name, last, { cause });
  }
  await scratch.getRepository(RunAnalysisRow).insert(row);
}

/**
 * A full garbage collection, where the runtime allows one (the `gc` global exposed through V8's
 * flags). The rebuild reads the whole run and allocates far more than it keeps; left to itself V8
 * grows the heap well past what is live (a 1M-event run: ~0.7 GB resident for ~0.25 GB live),
 * so the rebuild collects at its phase boundaries and every COLLECT_EVERY_EVENTS events, keeping
 * the process near its live memory. Each collection costs tens of milliseconds.
 */
function collectGarbage(): void {
  collector ??= exposedGc();
  collector();
}

let collector: (() => void) | undefined;

/** V8's `gc`, exposed on first use (a flag V8 reads when a context is created), or nothing where it cannot be. */
function exposedGc(): () => void {
  try {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as unknown;
    return typeof gc === 'function' ? (gc as () => void) : () => undefined;
  } catch {
    return () => undefined;
  }
}

const COLLECT_EVERY_EVENTS = 100_000;
/** Rows compared between collections (hydrated rows are garbage as soon as they are compared). */
const COLLECT_EVERY_ROWS = 50_000;

/** A collector for a count that grows: collects when the count crosses each multiple of `every` (and at 0 and Infinity). */
function collectorEvery(every: number): (done: number) => void {
  let next = 0;
  return (done) => {
    if (done < next) return;
    collectGarbage();
    next = done + every;
  };
}

/** Rows compared per query: memory holds a page of rebuilt rows and their live counterparts, not a projection's rows. */
const ROWS_PER_PAGE = 2000;

/**
 * Rows of one projection for this run: rebuilt (all scratch rows, a page at a time in key order)
 * against live (the rows with the same keys, and of this run when the entity has a runId column;
 * then also every live row of the run that the rebuild lacks).
 */
async function compareRows(projection: AnyProjection, runId: string, scratch: DataSource, live: DataSource): Promise<VerificationFailure[]> {
  const meta = scratch.getMetadata(projection.entity);
  const key = meta.primaryColumns[0].propertyName;
  const byRun = meta.columns.some((c) => c.propertyName === 'runId');
  const [rebuiltRepo, liveRepo] = [scratch.getRepository(projection.entity), live.getRepository(projection.entity)];
  const keyOf = (row: object) => (row as Record<string, unknown>)[key];
  const ofRun = byRun ? { runId } : {};
  const failures: VerificationFailure[] = [];
  const fail = (message: string) => failures.push({ check: 'projection', message: `${projection.name} row ${message}` });
  let matched = 0;
  const compact = collectorEvery(COLLECT_EVERY_ROWS);
  for await (const page of keyPages(rebuiltRepo, key, {})) {
    compact(matched);
    const liveRows = await liveRepo.find({ where: { [key]: In(page.map(keyOf)), ...ofRun } as object });
    const liveByKey = new Map(liveRows.map((row) => [String(keyOf(row)), row]));
    for (const row of page) {
      const other = liveByKey.get(String(keyOf(row)));
      if (!other) fail(`${String(keyOf(row))} is missing from the live read model`);
      else {
        matched += 1;
        if (canonicalJson(row) !== canonicalJson(other)) fail(`${String(keyOf(row))} differs from its rebuild from zero (${differingFields(other, row)})`);
      }
    }
  }
  if (byRun && (await liveRepo.count({ where: ofRun as object })) > matched) {
    for await (const page of keyPages(liveRepo, key, ofRun)) {
      const rebuilt = new Set((await rebuiltRepo.find({ where: { [key]: In(page.map(keyOf)) } as object, select: { [key]: true } as never })).map((r) => String(keyOf(r))));
      for (const row of page) if (!rebuilt.has(String(keyOf(row)))) fail(`${String(keyOf(row))} is in the live read model but not in a rebuild from zero`);
    }
  }
  return failures;
}

/** A table's rows matching `where`, in primary-key order, ROWS_PER_PAGE at a time (keyset pages). */
async function* keyPages(repo: Repository<object>, key: string, where: object): AsyncGenerator<object[]> {
  let last: unknown;
  for (;;) {
    const page = await repo.find({ where: { ...where, ...(last === undefined ? {} : { [key]: MoreThan(last) }) } as object, order: { [key]: 'ASC' } as object, take: ROWS_PER_PAGE });
    if (page.length) yield page;
    if (page.length < ROWS_PER_PAGE) return;
    last = (page[page.length - 1] as Record<string, unknown>)[key];
  }
}

function differingFields(live: object, rebuilt: object): string {
  const a = live as Record<string, unknown>;
  const b = rebuilt as Record<string, unknown>;
  const fields = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort().filter((k) => canonicalJson(a[k] ?? null) !== canonicalJson(b[k] ?? null));
  const show = (v: unknown) => {
    const text = canonicalJson(v ?? null);
    return text.length > 60 ? `${text.slice(0, 59)}…` : text;
  };
  return fields.slice(0, 5).map((k) => `${k}: live ${show(a[k])}, rebuilt ${show(b[k])}`).join('; ') + (fields.length > 5 ? `; and ${fields.length - 5} more fields` : '');
}

type ReportDigests = Record<ReportFormat, string>;

/** Inputs a pure renderer turns into the same bytes: the same events and blob reader, level and analysis (as canonical JSON). */
function sameReportInput(a: ReportInput | null, b: ReportInput | null): boolean {
  if (a === null || b === null) return a === b;
  return a.events === b.events && a.omittedOutput === b.omittedOutput && a.blobs === b.blobs && a.level === b.level && canonicalJson(a.analysis) === canonicalJson(b.analysis);
}

/** The sha256 of the run's report in every format (null: no analysis to render it from), the report built once. */
async function reportDigests(input: ReportInput | null): Promise<ReportDigests | null> {
  if (!input) return null;
  const report = await buildReport(input);
  collectGarbage();
  const out = {} as ReportDigests;
  for (const format of REPORT_FORMATS) {
    out[format] = createHash('sha256').update(renderBuiltReport(report, input.events, format)).digest('hex');
    collectGarbage();
  }
  return out;
}

async function renderFrom(source: RunSource, runId: string, read: AnalysisEvents, format: ReportFormat): Promise<string | null> {
  const input = withOmitted(await source.reportInput(runId, read.finish()), read);
  return input && renderReport(input, format);
}

/** A report input over the folded events, with the output chunks the fold counted instead of holding. */
function withOmitted(input: ReportInput | null, read: AnalysisEvents): ReportInput | null {
  return input && { ...input, omittedOutput: read.omittedOutput };
}

function firstDifferentLine(a: string, b: string): number {
  const [x, y] = [a.split('\n'), b.split('\n')];
  let i = 0;
  while (i < x.length && i < y.length && x[i] === y[i]) i++;
  return i + 1;
}

/** The run as the scratch read models have it, with the verified events: same rendering path as the live RunSource. */
class ScratchRunSource extends RunSource {
  constructor(private readonly scratch: DataSource, private readonly view: VerifiedRunView, readonly blobs: BlobReader) {
    super();
  }

  async runs(): Promise<RunAnalysis[]> {
    const rows = await this.scratch.getRepository(RunAnalysisRow).find({ order: { runId: 'ASC' } });
    return rows.map((row) => JSON.parse(row.analysis) as RunAnalysis);
  }

  async run(runId: string): Promise<RunAnalysis | null> {
    const row = await this.scratch.getRepository(RunAnalysisRow).findOneBy({ runId });
    return row ? (JSON.parse(row.analysis) as RunAnalysis) : null;
  }

  async events(runId: string): Promise<A2rlEvent[]> {
    const events: A2rlEvent[] = [];
    for await (const recorded of this.view.readStream(streamName(runId))) events.push(recorded.event);
    return events;
  }
}

/**
 * A read-only ledger of one run's verified events, read again from the store as the projections
 * ask: they rebuild from exactly the events that were verified (each re-read event's bytes must
 * hash to the leaf the scan recorded, or the read fails), skip those the store cannot decode, and
 * never see other runs. Positions are the events' revisions.
 */
class VerifiedRunView implements EventStore {
  private readonly stream: string;
  /** Sees every event the view yields, in order (the verifier folds the analysis's events from the rebuild's read). */
  tap: ((recorded: RecordedEvent) => void) | undefined;

  constructor(private readonly store: EventStore, private readonly runId: string, private readonly scan: RunScan) {
    this.stream = streamName(runId);
  }

  get backend(): EventStore['backend'] {
    return this.store.backend;
  }

  append(): never {
    throw new Error('the verification view of the ledger is read-only');
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    if (stream !== this.stream) return;
    yield* this.read(options.fromRevision ?? 0n, options.maxCount ?? Infinity);
  }

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    if ((options.category ?? 'run') !== 'run') return;
    const from = options.after == null ? 0n : BigInt(options.after) + 1n;
    for await (const recorded of this.read(from, options.maxCount ?? Infinity)) {
      recorded.position = String(recorded.revision); // a fresh object from the adapter: no copy per event
      yield recorded;
    }
  }

  subscribeAll(): Subscription {
    throw new Error('the verification view of the ledger has no live subscription');
  }

  async streamRevision(stream: string): Promise<bigint | null> {
    return stream === this.stream && this.scan.count ? BigInt(this.scan.count - 1) : null;
  }

  identity(): Promise<string> {
    return this.store.identity();
  }

  async close(): Promise<void> {}

  private async *read(from: bigint, maxCount: number): AsyncGenerator<RecordedEvent> {
    if (maxCount <= 0 || from >= BigInt(this.scan.count)) return;
    let left = maxCount;
    for await (const recorded of readResilient(this.store, this.stream, from, () => undefined)) {
      const seq = Number(recorded.revision);
      if (seq >= this.scan.count) return; // appended after the scan: not verified
      if (this.scan.undecodable.has(seq)) continue; // decodes now, did not when verified
      if (!leafHash(recorded.bytes).equals(this.scan.leaves.get(seq)!)) {
        throw new Error(`run ${this.runId}: the stored event at seq ${seq} changed while the run was being verified; verify again`);
      }
      this.tap?.(recorded);
      yield recorded;
      if (--left <= 0) return;
    }
  }
}
