import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { DataSource } from 'typeorm';
import { PROJECTIONS } from '../../projections/index.js';
import { REPORT_FORMATS, renderReport, type ReportFormat } from '../reports/render.js';
import { RunAnalysisRow } from '../../projections/run-analysis/run-analysis.entity.js';
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
import { materializeTask } from '../runs/workspace.js';
import { createEvaluationContext } from '../serving/model-server.js';
import { loadServingConfig } from '../serving/serving.config.js';
import { sealFailures, verifyEventChain, type ChainEntry, type VerificationFailure } from './verify-chain.js';
import { storedColumnFailures } from './verify-columns.js';
import { integrityFailures } from './verify-integrity.js';

/**
 * `a2rl verify <runId>`: re-checks a run against everything it claims.
 *
 * 1. The chain: the stream's events, as canonical bytes, against every signed tree head and the
 *    public key (verifyEventChain), plus: the run is sealed and the store's revision agrees.
 *    The bytes are the stored bytes (RecordedEvent.bytes, at the schema version each event was
 *    written with), so events from before an upcaster still hash as signed. A stored event that no
 *    longer parses is reported at its seq. What the store keeps beside the bytes (stream, revision,
 *    its id and type columns, the decoded event) must say what the bytes say (verify-columns.ts).
 * 2. Artifacts: every blob an event references exists and hashes to its sha256 (and size).
 * 3. Projections: every projection is rebuilt from zero into a scratch read-model store from
 *    this run's verified events only (an in-memory single-run view of the ledger: projections are
 *    per run, and a whole-ledger rebuild would cost time proportional to every other run); each
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

    const read = await readRun(this.deps.store, runId, (done) => progress({ stage: 'events', done, total: 0 }));
    if (!read.entries.length) throw new RunNotFoundError(runId, this.deps.store.backend);
    failures.push(...read.failures, ...read.columnFailures);
    progress({ stage: 'chain', done: 0, total: read.entries.length });
    const chain = verifyEventChain(runId, read.entries, this.deps.publicKeyPem);
    const undecodable = new Set(read.failures.map((f) => f.seq));
    const chainFailures = chain.failures.filter((f) => !(f.check === 'event' && undecodable.has(f.seq))); // said once, by readRun
    failures.push(...locateAlterations(chain.events, chainFailures), ...sealFailures(chain.events));
    progress({ stage: 'chain', done: read.entries.length, total: read.entries.length });
    const revision = await this.deps.store.streamRevision(streamName(runId));
    if (revision !== null && Number(revision) !== read.entries.length - 1) {
      failures.push({ check: 'sequence', seq: Number(revision), message: `the store says the stream's last revision is ${revision}, but ${read.entries.length} events (up to seq ${read.entries.length - 1}) are readable` });
    }
    const events = chain.events;

    const refs = artifactRefs(events);
    failures.push(...(await checkArtifacts(this.deps.artifacts, refs, (done) => progress({ stage: 'artifacts', done, total: refs.length }))));
    failures.push(...(await this.checkProjections(runId, read.recorded, events, progress)));
    // Last: the record checks out, and now what it says about the read-only world is judged.
    failures.push(...integrityFailures(events));

    let regraded: number | null = null;
    if (options.regrade) {
      const outcome = await this.regrade(events, progress);
      regraded = outcome.regraded;
      failures.push(...outcome.failures);
    }
    return {
      runId,
      ok: failures.length === 0,
      events: read.entries.length,
      treeHeads: events.filter((e) => e.type === 'TreeHeadSigned').length,
      artifacts: refs.length,
      regraded,
      failures,
    };
  }

  /** Rebuilds every projection from this run's events into a scratch store and compares rows and reports with the live ones. */
  private async checkProjections(runId: string, recorded: RecordedEvent[], events: A2rlEvent[], progress: (p: VerifyProgress) => void): Promise<VerificationFailure[]> {
    const failures: VerificationFailure[] = [];
    const blobs = artifactBlobReader(this.deps.artifacts);
    await this.deps.catchUp();
    const dir = await mkdtemp(path.join(this.deps.tmpDir ?? os.tmpdir(), 'a2rl-verify-'));
    let scratch: DataSource | undefined;
    try {
      scratch = await this.deps.readModelStores.openScratch(dir);
      const runner = new ProjectionRunner(new SingleRunView(this.deps.store.backend, runId, recorded), scratch, PROJECTIONS, { blobs });
      try {
        await runner.catchUp(undefined, (p) => progress({ stage: 'projections', done: p.processed, total: recorded.length }));
      } catch (error) {
        if (!(error instanceof ProjectionFailedError)) throw error;
        const seq = error.event.event.seq;
        return [{ check: 'projection', seq, message: `rebuilding projection ${error.projection} from zero failed at seq ${seq}: ${error.message}` }];
      }
      for (const projection of PROJECTIONS) failures.push(...(await compareRows(projection, runId, scratch, this.deps.readModels)));

      const source = new ScratchRunSource(scratch, events, blobs);
      for (const [i, format] of REPORT_FORMATS.entries()) {
        // The live side reads the ledger again (as `a2rl report` does): a stored event that no
        // longer decodes makes it fail, which is a finding, not a reason to stop verifying.
        let rebuilt: string | null, live: string | null;
        try {
          [rebuilt, live] = [await renderFrom(source, runId, format), await renderFrom(this.deps.runs, runId, format)];
        } catch (error) {
          if (error instanceof EventStoreUnavailableError) throw error;
          failures.push({ check: 'report', message: `the reports cannot be rendered: ${(error as Error).message}` });
          break;
        }
        if (rebuilt === null || live === null) failures.push({ check: 'report', message: `no ${rebuilt === null ? 'rebuilt' : 'live'} run analysis to render the ${format} report from` });
        else if (rebuilt !== live) failures.push({ check: 'report', message: `the ${format} report rendered from the live read models differs from the one rendered from a rebuild (first difference on line ${firstDifferentLine(live, rebuilt)})` });
        progress({ stage: 'reports', done: i + 1, total: REPORT_FORMATS.length });
      }
      return failures;
    } finally {
      if (scratch?.isInitialized) await scratch.destroy();
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** Restores each graded checkpoint from the artifact store and grades it again. */
  private async regrade(events: A2rlEvent[], progress: (p: VerifyProgress) => void): Promise<{ regraded: number; failures: VerificationFailure[] }> {
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
    const { privateDir } = await materializeTask(task, this.deps.taskCacheDir, this.deps.datasetsDir);
    const received = new Map<string, Extract<A2rlEvent, { type: 'SubmissionReceived' }>>();
    for (const e of events) if (e.type === 'SubmissionReceived') received.set(e.data.submissionId, e);
    const recordedVersion = events.find((e) => e.type === 'BaselineEvaluated')?.data.evaluatorVersion;
    const root = await mkdtemp(path.join(this.deps.tmpDir ?? os.tmpdir(), 'a2rl-regrade-'));
    let regraded = 0;
    try {
      for (const [i, grade] of graded.entries()) {
        const submission = received.get(grade.data.submissionId);
        if (!submission) {
          failures.push({ check: 'regrade', seq: grade.seq, message: `submission ${grade.data.submissionId} was graded but never received` });
          continue;
        }
        const dir = path.join(root, String(i));
        try {
          await restoreCheckpoint(this.deps.artifacts, submission.data.manifest, dir);
          const { score } = await task.evaluate(dir, privateDir, undefined, createEvaluationContext(loadServingConfig(), 'cpu'));
          regraded += 1;
          if (score !== grade.data.score) {
            const version = recordedVersion && recordedVersion !== task.evaluatorVersion ? ` (recorded with evaluator ${recordedVersion}, now ${task.evaluatorVersion})` : '';
            failures.push({ check: 'regrade', seq: grade.seq, message: `submission ${grade.data.submissionId} re-grades to ${score}, the ledger records ${grade.data.score}${version}` });
          }
        } catch (error) {
          failures.push({ check: 'regrade', seq: grade.seq, message: `submission ${grade.data.submissionId} (received at seq ${submission.seq}) could not be re-graded: ${(error as Error).message}` });
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
        progress({ stage: 'regrade', done: i + 1, total: graded.length });
      }
    } finally {
      await rm(root, { recursive: true, force: true });
    }
    return { regraded, failures };
  }
}

interface RunRead {
  entries: ChainEntry[];
  recorded: RecordedEvent[];
  /** Events the store cannot decode. */
  failures: VerificationFailure[];
  /** Stored columns that disagree with the bytes. */
  columnFailures: VerificationFailure[];
}

/**
 * Reads the run's stream. An event the store can no longer decode does not end the read: it is
 * reported at its seq, kept as an empty (invalid) chain entry, and reading resumes after it.
 */
async function readRun(store: EventStore, runId: string, onProgress: (done: number) => void): Promise<RunRead> {
  const stream = streamName(runId);
  const out: RunRead = { entries: [], recorded: [], failures: [], columnFailures: [] };
  const last = await store.streamRevision(stream);
  let from = 0n;
  for (;;) {
    try {
      for await (const recorded of store.readStream(stream, { fromRevision: from })) {
        out.columnFailures.push(...storedColumnFailures(recorded));
        out.entries.push({ bytes: recorded.bytes });
        out.recorded.push(recorded);
        from = recorded.revision + 1n;
        if (out.entries.length % 1000 === 0) onProgress(out.entries.length);
      }
      onProgress(out.entries.length);
      return out;
    } catch (error) {
      // Past the store's last revision the error cannot be one event's: it is the store's.
      if (error instanceof EventStoreUnavailableError || last === null || from > last) throw error;
      out.failures.push({ check: 'event', seq: Number(from), message: `the stored event cannot be decoded: ${(error as Error).message}` });
      out.entries.push({ bytes: Buffer.alloc(0) });
      from += 1n;
    }
  }
}

/**
 * A head whose root does not match says only that something it covers changed; the previous head
 * that still matches narrows that down to the events between the two, which the message names.
 */
function locateAlterations(events: A2rlEvent[], failures: VerificationFailure[]): VerificationFailure[] {
  const bad = new Set(failures.filter((f) => f.check === 'tree-head').map((f) => f.seq));
  let verifiedSize = 0;
  const range = new Map<number, string>();
  for (const e of events) {
    if (e.type !== 'TreeHeadSigned') continue;
    if (!bad.has(e.seq)) verifiedSize = Math.max(verifiedSize, e.data.treeSize);
    else if (e.data.treeSize > verifiedSize) range.set(e.seq, verifiedSize === e.data.treeSize - 1 ? `seq ${verifiedSize}` : `seqs ${verifiedSize}–${e.data.treeSize - 1}`);
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
  const refs = new Map<string, ArtifactRef>();
  const add = (ref: ArtifactRef) => {
    if (!refs.has(ref.sha256)) refs.set(ref.sha256, ref);
  };
  for (const e of events) {
    const seq = e.seq;
    switch (e.type) {
      case 'WorkspacePrepared':
        for (const f of e.data.dataManifest) add({ sha256: f.sha256, size: f.size, seq, role: `workspace file ${f.path}` });
        break;
      case 'FileChanged':
        if (e.data.sha256) add({ sha256: e.data.sha256, size: e.data.size, key: e.data.key, seq, role: `content of ${e.data.path}` });
        break;
      case 'SubmissionReceived':
        for (const f of e.data.manifest) add({ sha256: f.sha256, size: f.size, seq, role: `checkpoint file ${f.path} of submission ${e.data.submissionId}` });
        if (e.data.checkpoint) add({ ...blob(e.data.checkpoint), seq, role: `checkpoint manifest of submission ${e.data.submissionId}` });
        break;
      case 'AgentOutput':
        add({ ...blob(e.data.chunk), seq, role: `agent ${e.data.stream} chunk` });
        break;
      case 'RolloutBatchRecorded':
        if (e.data.trajectories) add({ ...blob(e.data.trajectories), seq, role: `trajectories of ${e.data.env}` });
        break;
      default:
        break;
    }
  }
  return [...refs.values()];
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

/** Writes a checkpoint's files from the artifact store into `dir`, checking each one's sha256. */
export async function restoreCheckpoint(artifacts: ArtifactStore, manifest: EventData<'SubmissionReceived'>['manifest'], dir: string): Promise<void> {
  for (const entry of manifest) {
    const parts = entry.path.split('/');
    if (path.isAbsolute(entry.path) || parts.some((p) => p === '' || p === '.' || p === '..')) {
      throw new Error(`checkpoint path "${entry.path}" is not a plain relative path`);
    }
    const target = path.join(dir, ...parts);
    await mkdir(path.dirname(target), { recursive: true });
    const hash = createHash('sha256');
    const hashing = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        done(null, chunk);
      },
    });
    await pipeline(await artifacts.get(entry.sha256), hashing, createWriteStream(target, { flags: 'wx' }));
    const actual = hash.digest('hex');
    if (actual !== entry.sha256) throw new Error(`checkpoint file ${entry.path}: blob ${artifactKey(entry.sha256)} hashes to ${actual}`);
  }
}

/** Rows of one projection for this run: rebuilt (all scratch rows) against live (same keys, or the run's rows when the entity has a runId column). */
async function compareRows(projection: AnyProjection, runId: string, scratch: DataSource, live: DataSource): Promise<VerificationFailure[]> {
  const meta = scratch.getMetadata(projection.entity);
  const key = meta.primaryColumns[0].propertyName;
  const rebuilt = await scratch.getRepository(projection.entity).find({ order: { [key]: 'ASC' } });
  const byRun = meta.columns.some((c) => c.propertyName === 'runId');
  const repo = live.getRepository(projection.entity);
  const liveRows = byRun
    ? await repo.find({ where: { runId } as object, order: { [key]: 'ASC' } })
    : (await Promise.all(rebuilt.map((row) => repo.findOneBy({ [key]: (row as Record<string, unknown>)[key] } as object)))).filter((r) => r !== null);
  const keyOf = (row: object) => String((row as Record<string, unknown>)[key]);
  const liveByKey = new Map(liveRows.map((row) => [keyOf(row), row]));
  const failures: VerificationFailure[] = [];
  const fail = (message: string) => failures.push({ check: 'projection', message: `${projection.name} row ${message}` });
  for (const row of rebuilt) {
    const other = liveByKey.get(keyOf(row));
    liveByKey.delete(keyOf(row));
    if (!other) fail(`${keyOf(row)} is missing from the live read model`);
    else if (canonicalJson(row) !== canonicalJson(other)) fail(`${keyOf(row)} differs from its rebuild from zero (${differingFields(other, row)})`);
  }
  for (const extra of liveByKey.keys()) fail(`${extra} is in the live read model but not in a rebuild from zero`);
  return failures;
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

async function renderFrom(source: RunSource, runId: string, format: ReportFormat): Promise<string | null> {
  const input = await source.reportInput(runId);
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
  constructor(private readonly scratch: DataSource, private readonly runEvents: A2rlEvent[], readonly blobs: BlobReader) {
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
    return this.runEvents.filter((e) => e.runId === runId);
  }
}

/**
 * A read-only ledger holding one run's already-read events: the projections rebuild from exactly
 * the events that were verified, and never see other runs. Positions are the events' indexes.
 */
class SingleRunView implements EventStore {
  private readonly stream: string;

  constructor(readonly backend: EventStore['backend'], runId: string, private readonly recorded: RecordedEvent[]) {
    this.stream = streamName(runId);
  }

  append(): never {
    throw new Error('the verification view of the ledger is read-only');
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    if (stream !== this.stream) return;
    const from = this.recorded.findIndex((r) => r.revision >= (options.fromRevision ?? 0n));
    if (from < 0) return;
    yield* this.recorded.slice(from, from + (options.maxCount ?? Infinity));
  }

  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RecordedEvent> {
    const from = options.after == null ? 0 : Number(options.after) + 1;
    const to = from + (options.maxCount ?? Infinity);
    for (let i = from; i < Math.min(to, this.recorded.length); i++) yield { ...this.recorded[i], position: String(i) };
  }

  subscribeAll(): Subscription {
    throw new Error('the verification view of the ledger has no live subscription');
  }

  async streamRevision(stream: string): Promise<bigint | null> {
    return stream === this.stream && this.recorded.length ? this.recorded[this.recorded.length - 1].revision : null;
  }

  async close(): Promise<void> {}
}
