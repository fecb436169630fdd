import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { In, MoreThan, type DataSource, type Repository } from 'typeorm';
import { PROJECTIONS } from '../../projections/index.js';
import { REPORT_FORMATS, renderReport, type ReportFormat } from '../reports/render.js';
import type { ReportInput } from '../reports/report-model.js';
import { RunAnalysisRow } from '../../projections/run-analysis/run-analysis.entity.js';
import { AnalysisEvents } from '../../projections/run-analysis/analysis-events.js';
import { analyzeRun } from '../../projections/run-analysis/analyze.js';
import { analysisRow, runAnalysisProjection } from '../../projections/run-analysis/run-analysis.projection.js';
import type { RunAnalysis } from '../../projections/run-analysis/analysis.types.js';
import { artifactBlobReader, type BlobReader } from '../../projections/run-analysis/blob-reader.js';
import type { AnyProjection } from '../../projections/run-projection.js';
import { getTask } from '../../tasks/index.js';
import { ArtifactNotFoundError, artifactKey, type ArtifactStore } from '../artifacts/artifact-store.port.js';
import { EventStoreUnavailableError } from '../ledger/errors.js';
import type { EventStore, ReadAllOptions, ReadStreamOptions, RecordedEvent, Subscription } from '../ledger/event-store.port.js';
import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import { streamName } from '../ledger/events/ids.js';
import { RunSource } from '../query/run-source.js';
import { ProjectionFailedError, ProjectionRunner } from '../readmodels/projection-runner.js';
import type { ReadModelStores } from '../readmodels/read-models.port.js';
import { ArchivedCheckpointGrader } from '../grading/archived-grading.js';
import { LeafHashes, leafHash } from './merkle.js';
import { ChainVerifier, parseBytes, sealFailure, sealRelevant, type VerificationFailure } from './verify-chain.js';
import { storedColumnFailures } from './verify-columns.js';
import { integrityFailures } from './verify-integrity.js';

/**
 * `a2rl verify <runId>`: re-checks a run against everything it claims.
 *
 * 1. The chain: the stream's events, as canonical bytes, against every signed tree head and the
 *    public key (ChainVerifier), plus: the run is sealed and the store's revision agrees. The
 *    stream is read once and checked event by event (scanRun); only what later checks need is kept.
 *    The bytes are the stored bytes (RecordedEvent.bytes, at the schema version each event was
 *    written with), so events from before an upcaster still hash as signed. A stored event that no
 *    longer parses is reported at its seq. What the store keeps beside the bytes (stream, revision,
 *    its id and type columns, the decoded event) must say what the bytes say (verify-columns.ts).
 * 2. Artifacts: every blob an event references exists and hashes to its sha256 (and size).
 * 3. Projections: every projection is rebuilt from zero into a scratch read-model store from
 *    this run's verified events only (a single-run view of the ledger that re-reads the stream and
 *    checks each event against its verified leaf hash: projections are per run, and a whole-ledger
 *    rebuild would cost time proportional to every other run); each
 *    rebuilt row must equal the live row as canonical JSON, and the md/json/html reports rendered
 *    from the rebuilt rows must equal those rendered from the live ones, byte for byte.
 * 4. With `regrade`: each graded submission's checkpoint is restored from the artifact store and
 *    graded again by the task's evaluator; the score must equal the recorded one exactly.
 * 5. Integrity: no WorkspaceIntegrityChecked found data/ or models/ different from the manifest
 *    (verify-integrity.ts); a run with no such check has nothing to contradict it.
 */
export interface VerifyDeps {
  store: EventStore;
  artifacts: ArtifactStore;
  /** The live read models (as `a2rl runs` / `a2rl report` read them). */
  readModels: DataSource;
  /** Opens the scratch store the projections are rebuilt into (the read-model port). */
  readModelStores: Pick<ReadModelStores, 'openScratch'>;
  /** The live run source (`a2rl report` renders from it). */
  runs: RunSource;
  /** Brings the live read models up to date before they are compared. */
  catchUp: () => Promise<unknown>;
  /** The ledger's public key (PEM); null when there is none. */
  publicKeyPem: string | null;
  /** The task cache (`$A2RL_HOME/tasks`): private evaluation sets for --regrade. */
  taskCacheDir: string;
  /** Where `a2rl data fetch` stores paper-task datasets, for --regrade when the task cache is cold. */
  datasetsDir?: string;
  /** Where scratch stores and restored checkpoints go (default: the OS temp dir). */
  tmpDir?: string;
}

export type VerifyStage = 'events' | 'chain' | 'artifacts' | 'projections' | 'reports' | 'regrade';

export interface VerifyProgress {
  stage: VerifyStage;
  done: number;
  total: number;
}

export interface VerifyOptions {
  regrade?: boolean;
  onProgress?: (progress: VerifyProgress) => void;
}

export interface VerifyResult {
  runId: string;
  ok: boolean;
  events: number;
  treeHeads: number;
  artifacts: number;
  /** Submissions re-graded (null without --regrade). */
  regraded: number | null;
  failures: VerificationFailure[];
}

/** The ledger has no events for the run. */
export class RunNotFoundError extends Error {
  override readonly name = 'RunNotFoundError';
  constructor(readonly runId: string, backend: string) {
    super(`run "${runId}" has no events in the ${backend} ledger`);
  }
}

export class RunVerifier {
  constructor(private readonly deps: VerifyDeps) {}

  async verify(runId: string, options: VerifyOptions = {}): Promise<VerifyResult> {
    const progress = options.onProgress ?? (() => undefined);
    const failures: VerificationFailure[] = [];

    // 1. One streaming read of the stream checks the chain and the stored columns event by event,
    // keeping only what later checks need (RunScan): memory does not grow with the run's events.
    const scan = await scanRun(this.deps.store, runId, this.deps.publicKeyPem, (done) => progress({ stage: 'events', done, total: 0 }));
    if (!scan.count) throw new RunNotFoundError(runId, this.deps.store.backend);
    failures.push(...scan.decodeFailures, ...scan.columnFailures);
    progress({ stage: 'chain', done: 0, total: scan.count });
    const undecodable = new Set(scan.decodeFailures.map((f) => f.seq));
    const chainFailures = scan.chain.failures.filter((f) => !(f.check === 'event' && undecodable.has(f.seq))); // said once, by the scan
    failures.push(...locateAlterations(scan.heads, chainFailures), ...sealFailure(scan.lastNonHead));
    progress({ stage: 'chain', done: scan.count, total: scan.count });
    const revision = await this.deps.store.streamRevision(streamName(runId));
    if (revision !== null && Number(revision) !== scan.count - 1) {
      failures.push({ check: 'sequence', seq: Number(revision), message: `the store says the stream's last revision is ${revision}, but ${scan.count} events (up to seq ${scan.count - 1}) are readable` });
    }

    const refs = scan.refs.list();
    failures.push(...(await checkArtifacts(this.deps.artifacts, refs, (done) => progress({ stage: 'artifacts', done, total: refs.length }))));
    failures.push(...(await this.checkProjections(runId, scan, progress)));
    // Last: the record checks out, and now what it says about the read-only world is judged.
    failures.push(...integrityFailures(scan.kept));

    let regraded: number | null = null;
    if (options.regrade) {
      const outcome = await this.regrade(scan.kept, progress);
      regraded = outcome.regraded;
      failures.push(...outcome.failures);
    }
    return {
      runId,
      ok: failures.length === 0,
      events: scan.count,
      treeHeads: scan.heads.length,
      artifacts: refs.length,
      regraded,
      failures,
    };
  }

  /**
   * Rebuilds every projection from this run's events into a scratch store and compares rows and
   * reports with the live ones. The projections read the run again from the store through a view
   * that yields only the verified events: each one's bytes must hash to the leaf the scan recorded.
   * That one read feeds the keyed projections (a batch at a time) and, folded as it goes, the run
   * analysis and the reports: they get the events they read (AnalysisEvents), not the whole run.
   */
  private async checkProjections(runId: string, scan: RunScan, progress: (p: VerifyProgress) => void): Promise<VerificationFailure[]> {
    const failures: VerificationFailure[] = [];
    const blobs = artifactBlobReader(this.deps.artifacts);
    await this.deps.catchUp();
    const dir = await mkdtemp(path.join(this.deps.tmpDir ?? os.tmpdir(), 'a2rl-verify-'));
    let scratch: DataSource | undefined;
    try {
      scratch = await this.deps.readModelStores.openScratch(dir);
      const view = new VerifiedRunView(this.deps.store, runId, scan);
      const read = new AnalysisEvents();
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
        await runner.rebuild(undefined, (p) => progress({ stage: 'projections', done: p.processed, total }));
        view.tap = undefined;
        if (last) await this.rebuildAnalysis(scratch, read, last, blobs);
      } catch (error) {
        if (!(error instanceof ProjectionFailedError)) throw error;
        const seq = error.event.event.seq;
        return [{ check: 'projection', seq, message: `rebuilding projection ${error.projection} from zero failed at seq ${seq}: ${error.message}` }];
      }
      for (const projection of PROJECTIONS) failures.push(...(await compareRows(projection, runId, scratch, this.deps.readModels)));

      // Both sides render from the verified events the analysis read and one blob reader: what
      // differs is the analysis row, rebuilt or live. Each report is kept as its digest only; one
      // that differs is rendered again from both sides, to name the line. Rendering is pure, so when
      // the two analyses are the same JSON the inputs are identical and one rendering stands for both.
      const rebuiltSource = new ScratchRunSource(scratch, view, this.deps.runs.blobs);
      const events = read.finish();
      let rebuilt: ReportDigests | null, live: ReportDigests | null;
      try {
        const [rebuiltInput, liveInput] = [await rebuiltSource.reportInput(runId, events), await this.deps.runs.reportInput(runId, events)];
        rebuilt = await reportDigests(rebuiltInput);
        live = sameReportInput(rebuiltInput, liveInput) ? rebuilt : await reportDigests(liveInput);
      } catch (error) {
        if (error instanceof EventStoreUnavailableError) throw error;
        return [...failures, { check: 'report', message: `the reports cannot be rendered: ${(error as Error).message}` }];
      }
      for (const [i, format] of REPORT_FORMATS.entries()) {
        if (rebuilt === null || live === null) failures.push({ check: 'report', message: `no ${rebuilt === null ? 'rebuilt' : 'live'} run analysis to render the ${format} report from` });
        else if (rebuilt[format] !== live[format]) {
          const [fromRebuild, fromLive] = [(await renderFrom(rebuiltSource, runId, events, format))!, (await renderFrom(this.deps.runs, runId, events, format))!];
          failures.push({ check: 'report', message: `the ${format} report rendered from the live read models differs from the one rendered from a rebuild (first difference on line ${firstDifferentLine(fromLive, fromRebuild)})` });
        }
        progress({ stage: 'reports', done: i + 1, total: REPORT_FORMATS.length });
      }
      return failures;
    } finally {
      if (scratch?.isInitialized) await scratch.destroy();
      await rm(dir, { recursive: true, force: true });
    }
  }

  /**
   * The run-analysis projection's row, rebuilt as the runner rebuilds it (analyze, then the row)
   * from the events it reads, written to the scratch store; a failure is the runner's, at the run's last event.
   */
  private async rebuildAnalysis(scratch: DataSource, read: AnalysisEvents, last: RecordedEvent, blobs: BlobReader): Promise<void> {
    let row: RunAnalysisRow;
    try {
      row = analysisRow(await analyzeRun(read.finish(), blobs, read.count));
    } catch (cause) {
      if (cause instanceof EventStoreUnavailableError) throw cause;
      throw new ProjectionFailedError(runAnalysisProjection.name, last, { cause });
    }
    await scratch.getRepository(RunAnalysisRow).insert(row);
  }

  /** Restores each graded checkpoint from the artifact store and grades it again (from the scan's kept events). */
  private async regrade(events: readonly A2rlEvent[], progress: (p: VerifyProgress) => void): Promise<{ regraded: number; failures: VerificationFailure[] }> {
    const failures: VerificationFailure[] = [];
    const scheduled = events.find((e) => e.type === 'RunScheduled');
    const graded = events.filter((e): e is Extract<A2rlEvent, { type: 'SubmissionGraded' }> => e.type === 'SubmissionGraded');
    if (!graded.length) return { regraded: 0, failures };
    if (!scheduled) return { regraded: 0, failures: [{ check: 'regrade', message: 'the run has no RunScheduled event: its task is unknown' }] };
    let task;
    try {
      task = getTask(scheduled.data.task);
    } catch (error) {
      return { regraded: 0, failures: [{ check: 'regrade', seq: scheduled.seq, message: (error as Error).message }] };
    }
    // The same grading `a2rl regrade` does: restored from the artifact store, graded on the task cache's held-out set.
    const grader = await ArchivedCheckpointGrader.open({ task, artifacts: this.deps.artifacts, taskCacheDir: this.deps.taskCacheDir, datasetsDir: this.deps.datasetsDir, tmpDir: this.deps.tmpDir });
    const received = new Map<string, Extract<A2rlEvent, { type: 'SubmissionReceived' }>>();
    for (const e of events) if (e.type === 'SubmissionReceived') received.set(e.data.submissionId, e);
    const recordedVersion = events.find((e) => e.type === 'BaselineEvaluated')?.data.evaluatorVersion;
    let regraded = 0;
    for (const [i, grade] of graded.entries()) {
      const submission = received.get(grade.data.submissionId);
      if (!submission) {
        failures.push({ check: 'regrade', seq: grade.seq, message: `submission ${grade.data.submissionId} was graded but never received` });
        continue;
      }
      try {
        const { score } = await grader.grade(submission.data.manifest);
        regraded += 1;
        if (score !== grade.data.score) {
          const version = recordedVersion && recordedVersion !== task.evaluatorVersion ? ` (recorded with evaluator ${recordedVersion}, now ${task.evaluatorVersion})` : '';
          failures.push({ check: 'regrade', seq: grade.seq, message: `submission ${grade.data.submissionId} re-grades to ${score}, the ledger records ${grade.data.score}${version}` });
        }
      } catch (error) {
        failures.push({ check: 'regrade', seq: grade.seq, message: `submission ${grade.data.submissionId} (received at seq ${submission.seq}) could not be re-graded: ${(error as Error).message}` });
      }
      progress({ stage: 'regrade', done: i + 1, total: graded.length });
    }
    return { regraded, failures };
  }
}

/** Event types the checks after the scan read (integrity, regrade): a few per run, kept whole. */
const KEPT_TYPES = new Set<A2rlEvent['type']>(['RunScheduled', 'BaselineEvaluated', 'SubmissionReceived', 'SubmissionGraded', 'WorkspaceIntegrityChecked']);

/**
 * What one streaming read of a run leaves for the later checks. Events and their bytes are dropped
 * as soon as they are checked; what grows with the run is the leaf hashes (32 bytes an event, so
 * the projection view can prove it re-reads the verified bytes), one entry per distinct blob, the
 * signed heads (bounded by the signing rate) and the failures found.
 */
interface RunScan {
  /** Entries read, decodable or not (the next seq). */
  count: number;
  /** Events the store cannot decode. */
  decodeFailures: VerificationFailure[];
  /** Stored columns that disagree with the bytes. */
  columnFailures: VerificationFailure[];
  chain: ChainVerifier;
  /** Revisions the store cannot decode: the projection view skips them, as the rebuild always has. */
  undecodable: Set<number>;
  leaves: LeafHashes;
  /** Each TreeHeadSigned's seq and size, in seq order. */
  heads: Array<{ seq: number; treeSize: number }>;
  /** The last valid event that is not a head (the seal check). */
  lastNonHead?: { seq: number; type: A2rlEvent['type'] };
  /** Every referenced blob, once per sha256. */
  refs: ArtifactRefs;
  /** Events of KEPT_TYPES. */
  kept: A2rlEvent[];
}

/**
 * Reads the run's stream once and checks each event as it comes: stored columns against the
 * bytes, then the chain (ChainVerifier: parse, validity, canonical form, seq, heads, signatures).
 * An event the store can no longer decode does not end the read: it is reported at its seq,
 * checked as an empty (invalid) chain entry, and reading resumes after it.
 */
async function scanRun(store: EventStore, runId: string, publicKeyPem: string | null, onProgress: (done: number) => void): Promise<RunScan> {
  const scan: RunScan = {
    count: 0, decodeFailures: [], columnFailures: [], chain: new ChainVerifier(runId, publicKeyPem), undecodable: new Set(),
    leaves: new LeafHashes(), heads: [], refs: new ArtifactRefs(), kept: [],
  };
  const check = (bytes: Buffer, recorded?: RecordedEvent) => {
    const parsed = parseBytes(bytes);
    if (recorded) scan.columnFailures.push(...storedColumnFailures(recorded, parsed));
    const event = scan.chain.push({ bytes }, parsed);
    scan.leaves.push(scan.chain.lastLeaf!);
    scan.count += 1;
    if (scan.count % 1000 === 0) onProgress(scan.count);
    if (!event) return;
    scan.refs.add(event);
    if (event.type === 'TreeHeadSigned') scan.heads.push({ seq: event.seq, treeSize: event.data.treeSize });
    if (sealRelevant(event)) scan.lastNonHead = { seq: event.seq, type: event.type };
    if (KEPT_TYPES.has(event.type)) scan.kept.push(event);
  };
  const onUndecodable = (revision: bigint, error: Error) => {
    scan.decodeFailures.push({ check: 'event', seq: Number(revision), message: `the stored event cannot be decoded: ${error.message}` });
    scan.undecodable.add(Number(revision));
    check(Buffer.alloc(0));
  };
  for await (const recorded of readResilient(store, streamName(runId), 0n, onUndecodable)) check(recorded.bytes, recorded);
  if (scan.count) scan.chain.finish();
  onProgress(scan.count);
  return scan;
}

/**
 * A stream's events from `from` on. An event the store cannot decode is handed to `onUndecodable`
 * and reading resumes after it; past the store's last revision an error is the store's, and thrown.
 */
async function* readResilient(store: EventStore, stream: string, from: bigint, onUndecodable: (revision: bigint, error: Error) => void): AsyncGenerator<RecordedEvent> {
  let last: bigint | null | undefined;
  for (;;) {
    try {
      for await (const recorded of store.readStream(stream, { fromRevision: from })) {
        from = recorded.revision + 1n;
        yield recorded;
      }
      return;
    } catch (error) {
      last ??= await store.streamRevision(stream);
      if (error instanceof EventStoreUnavailableError || last === null || from > last) throw error;
      onUndecodable(from, error as Error);
      from += 1n;
    }
  }
}

/**
 * A head whose root does not match says only that something it covers changed; the previous head
 * that still matches narrows that down to the events between the two, which the message names.
 */
function locateAlterations(heads: ReadonlyArray<{ seq: number; treeSize: number }>, failures: VerificationFailure[]): VerificationFailure[] {
  const bad = new Set(failures.filter((f) => f.check === 'tree-head').map((f) => f.seq));
  let verifiedSize = 0;
  const range = new Map<number, string>();
  for (const head of heads) {
    if (!bad.has(head.seq)) verifiedSize = Math.max(verifiedSize, head.treeSize);
    else if (head.treeSize > verifiedSize) range.set(head.seq, verifiedSize === head.treeSize - 1 ? `seq ${verifiedSize}` : `seqs ${verifiedSize}–${head.treeSize - 1}`);
  }
  return failures.map((f) =>
    f.check === 'tree-head' && f.seq !== undefined && range.has(f.seq) && f.message.includes('the signed head says')
      ? { ...f, message: `${f.message}: an event in ${range.get(f.seq)} differs from what was signed` }
      : f,
  );
}

export interface ArtifactRef {
  sha256: string;
  size?: number;
  /** The key the event names, when it names one. */
  key?: string;
  /** First event referencing it, and what it is there. */
  seq: number;
  role: string;
}

/** Every blob the run's events reference, once per sha256 (the first reference wins). */
export function artifactRefs(events: readonly A2rlEvent[]): ArtifactRef[] {
  const refs = new ArtifactRefs();
  for (const e of events) refs.add(e);
  return refs.list();
}

/** artifactRefs folded one event at a time: one entry per distinct sha256, never the events. */
export class ArtifactRefs {
  private readonly refs = new Map<string, ArtifactRef>();

  add(e: A2rlEvent): void {
    const seq = e.seq;
    switch (e.type) {
      case 'WorkspacePrepared':
        for (const f of e.data.dataManifest) this.use({ sha256: f.sha256, size: f.size, seq, role: `workspace file ${f.path}` });
        break;
      case 'FileChanged':
        if (e.data.sha256) this.use({ sha256: e.data.sha256, size: e.data.size, key: e.data.key, seq, role: `content of ${e.data.path}` });
        break;
      case 'SubmissionReceived':
        for (const f of e.data.manifest) this.use({ sha256: f.sha256, size: f.size, seq, role: `checkpoint file ${f.path} of submission ${e.data.submissionId}` });
        if (e.data.checkpoint) this.use({ ...blob(e.data.checkpoint), seq, role: `checkpoint manifest of submission ${e.data.submissionId}` });
        break;
      case 'AgentOutput':
        this.use({ ...blob(e.data.chunk), seq, role: `agent ${e.data.stream} chunk` });
        break;
      case 'RolloutBatchRecorded':
        if (e.data.trajectories) this.use({ ...blob(e.data.trajectories), seq, role: `trajectories of ${e.data.env}` });
        break;
      default:
        break;
    }
  }

  list(): ArtifactRef[] {
    return [...this.refs.values()];
  }

  private use(ref: ArtifactRef): void {
    if (!this.refs.has(ref.sha256)) this.refs.set(ref.sha256, ref);
  }
}

const blob = (ref: EventData<'AgentOutput'>['chunk']) => ({ sha256: ref.sha256, size: ref.size, key: ref.key });

/** Each referenced blob exists, hashes to its sha256 and has its size; its key is the content address. */
export async function checkArtifacts(artifacts: ArtifactStore, refs: readonly ArtifactRef[], onProgress: (done: number) => void = () => undefined): Promise<VerificationFailure[]> {
  const failures: VerificationFailure[] = [];
  let done = 0;
  const check = async (ref: ArtifactRef) => {
    const key = artifactKey(ref.sha256);
    const fail = (message: string) => failures.push({ check: 'artifact', seq: ref.seq, artifact: key, message: `${ref.role}: ${message}` });
    if (ref.key !== undefined && ref.key !== key) fail(`the event names key ${ref.key}, but its sha256 is stored under ${key}`);
    try {
      const { sha256, size } = await hashStream(await artifacts.get(ref.sha256));
      if (sha256 !== ref.sha256) fail(`blob ${key} was altered: its content hashes to ${sha256}`);
      else if (ref.size !== undefined && size !== ref.size) fail(`blob ${key} is ${size} bytes, the event says ${ref.size}`);
    } catch (error) {
      if (!(error instanceof ArtifactNotFoundError)) throw error;
      fail(`blob ${key} is missing from the artifact store`);
    }
    done += 1;
    if (done % 100 === 0 || done === refs.length) onProgress(done);
  };
  // A few reads at a time: object stores are latency-bound, the filesystem does not mind.
  const queue = [...refs];
  await Promise.all(Array.from({ length: Math.min(4, queue.length) }, async () => {
    for (let ref = queue.shift(); ref; ref = queue.shift()) await check(ref);
  }));
  return failures.sort((a, b) => a.seq! - b.seq! || (a.artifact! < b.artifact! ? -1 : 1));
}

async function hashStream(stream: AsyncIterable<unknown>): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    const bytes = chunk as Buffer;
    hash.update(bytes);
    size += bytes.length;
  }
  return { sha256: hash.digest('hex'), size };
}

/** Moved to the grading module, shared with `a2rl regrade`; re-exported for this module's callers. */
export { restoreCheckpoint } from '../grading/archived-grading.js';

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
  for await (const page of keyPages(rebuiltRepo, key, {})) {
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
  return a.events === b.events && a.blobs === b.blobs && a.level === b.level && canonicalJson(a.analysis) === canonicalJson(b.analysis);
}

/** The sha256 of the run's report in every format (null: no analysis to render it from). */
async function reportDigests(input: ReportInput | null): Promise<ReportDigests | null> {
  if (!input) return null;
  const out = {} as ReportDigests;
  for (const format of REPORT_FORMATS) out[format] = createHash('sha256').update(await renderReport(input, format)).digest('hex');
  return out;
}

async function renderFrom(source: RunSource, runId: string, events: readonly A2rlEvent[], format: ReportFormat): Promise<string | null> {
  const input = await source.reportInput(runId, events);
  return input && renderReport(input, format);
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
