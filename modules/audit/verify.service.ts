import { getTask } from '../../tasks/index.js';
import { ArtifactNotFoundError, artifactKey, type ArtifactStore } from '../artifacts/artifact-store.port.js';
import { HASH_CHUNK, hashFile, hashStream, type ContentHash } from '../artifacts/file-hash.js';
import type { EventStore, RecordedEvent } from '../ledger/event-store.port.js';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { streamName } from '../ledger/events/ids.js';
import { ArchivedCheckpointGrader } from '../grading/archived-grading.js';
import { LeafHashes } from '../ledger/merkle.js';
import { ChainVerifier, parseBytes, sealFailure, sealRelevant, type VerificationFailure } from './verify-chain.js';
import { storedColumnFailures } from './verify-columns.js';
import { integrityFailures } from './verify-integrity.js';
import { ArtifactRefs, type ArtifactRef } from './artifact-refs.js';
import { KEPT_TYPES, scanRecord, type RecordScan } from './record-scan.js';

export { artifactRefs, type ArtifactRef } from './artifact-refs.js';
export { readResilient, type RunScan, type VerifyDeps, type VerifyOptions, type VerifyProgress, type VerifyStage } from './verify-model.js';
import { readResilient, type RunScan, type VerifyDeps, type VerifyOptions, type VerifyProgress } from './verify-model.js';

/**
 * `a2rl verify <runId>`: re-checks a run against everything it claims.
 *
 * 1. The record: every event's bytes against the signed tree heads and the public key, the stored
 *    columns against the bytes, the seal. First the fast check (record-scan.ts: one read, a parse
 *    and two hashes an event, a long run read in parallel segments); when it cannot vouch for the
 *    record, or with `rebuild`, the full check (ChainVerifier: every event parsed, validated and
 *    re-encoded canonically), which names each failure at its seq. The stream is read once and
 *    checked event by event (scanRun); only what later checks need is kept.
 *    The bytes are the stored bytes (RecordedEvent.bytes, at the schema version each event was
 *    written with), so events from before an upcaster still hash as signed. A stored event that no
 *    longer parses is reported at its seq. What the store keeps beside the bytes (stream, revision,
 *    its id and type columns, the decoded event) must say what the bytes say (verify-columns.ts).
 * 2. Artifacts: every blob an event references exists and hashes to its sha256 (and size).
 * 3. With `rebuild` (the derived read models, not the record; verify-rebuild.ts): every projection
 *    is rebuilt from zero into a scratch read-model store from this run's verified events only (a single-run view of the ledger that re-reads the stream and
 *    checks each event against its verified leaf hash: projections are per run, and a whole-ledger
 *    rebuild would cost time proportional to every other run); each
 *    rebuilt row must equal the live row as canonical JSON, and the md/json/html reports rendered
 *    from the rebuilt rows must equal those rendered from the live ones, byte for byte.
 * 4. With `regrade`: each graded submission's checkpoint is restored from the artifact store and
 *    graded again by the task's evaluator; the score must equal the recorded one exactly.
 * 5. Integrity: no WorkspaceIntegrityChecked found data/ or models/ different from the manifest
 *    (verify-integrity.ts); a run with no such check has nothing to contradict it.
 */
export interface VerifyResult {
  runId: string;
  ok: boolean;
  events: number;
  treeHeads: number;
  artifacts: number;
  /** Whether the projections and reports were rebuilt and compared (--rebuild). */
  projections: boolean;
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
    // 1. The record: the fast check, unless the projections need the full scan's leaves; when the
    // fast check cannot vouch for the record, the full one says exactly what is wrong.
    const record = options.rebuild ? null : await this.checkRecord(runId, progress);
    const scan = record ? null : await this.scanFully(runId, progress);
    const checked = record ?? scan!;
    const failures: VerificationFailure[] = [...(scan?.failures ?? [])];

    failures.push(...(await checkArtifacts(this.deps.artifacts, checked.refs, (done) => progress({ stage: 'artifacts', done, total: checked.refs.length }))));
    if (scan && options.rebuild) {
      const { checkProjections } = await import('./verify-rebuild.js');
      failures.push(...(await checkProjections(this.deps, runId, scan.scan, progress)));
    }
    // Last: the record checks out, and now what it says about the read-only world is judged.
    failures.push(...integrityFailures(checked.kept));

    let regraded: number | null = null;
    if (options.regrade) {
      const outcome = await this.regrade(checked.kept, progress);
      regraded = outcome.regraded;
      failures.push(...outcome.failures);
    }
    return {
      runId,
      ok: failures.length === 0,
      events: checked.count,
      treeHeads: checked.heads.length,
      artifacts: checked.refs.length,
      projections: options.rebuild === true,
      regraded,
      failures,
    };
  }

  /** The fast check of the record (record-scan.ts): what later checks need, or null when it found something to say. */
  private async checkRecord(runId: string, progress: (p: VerifyProgress) => void): Promise<RecordScan | null> {
    const { store, publicKeyPem, parallelRead } = this.deps;
    const parallel = parallelRead && store.backend !== 'memory' ? parallelRead : undefined;
    const record = await scanRecord(store, runId, publicKeyPem, { parallel, pages: parallel?.pages, onProgress: (done) => progress({ stage: 'events', done, total: 0 }) });
    if (record === null) throw new RunNotFoundError(runId, store.backend);
    if ('anomaly' in record) return null;
    progress({ stage: 'chain', done: record.count, total: record.count });
    return record;
  }

  /** The full check (scanRun): every event parsed, validated and re-encoded, every failure named at its seq. */
  private async scanFully(runId: string, progress: (p: VerifyProgress) => void): Promise<{ scan: RunScan; count: number; heads: RunScan['heads']; refs: ArtifactRef[]; kept: A2rlEvent[]; failures: VerificationFailure[] }> {
    const failures: VerificationFailure[] = [];
    // One streaming read of the stream checks the chain and the stored columns event by event,
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
    return { scan, count: scan.count, heads: scan.heads, refs: scan.refs.list(), kept: scan.kept, failures };
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


/**
 * Each referenced blob exists, hashes to its sha256 and has its size; its key is the content
 * address. A store of local files has them read by descriptor into one buffer (file-hash.ts), others
 * as streams.
 */
export async function checkArtifacts(artifacts: ArtifactStore, refs: readonly ArtifactRef[], onProgress: (done: number) => void = () => undefined): Promise<VerificationFailure[]> {
  const failures: VerificationFailure[] = [];
  const localFile = artifacts.localFile?.bind(artifacts);
  const buffer = localFile ? Buffer.allocUnsafe(HASH_CHUNK) : null;
  const hashOf = async (sha256: string): Promise<ContentHash> => {
    if (!localFile) return hashStream(await artifacts.get(sha256));
    try {
      return await hashFile(localFile(sha256), buffer!);
    } catch (error) {
      throw (error as NodeJS.ErrnoException).code === 'ENOENT' ? new ArtifactNotFoundError(sha256) : error;
    }
  };
  let done = 0;
  const check = async (ref: ArtifactRef) => {
    const key = artifactKey(ref.sha256);
    const fail = (message: string) => failures.push({ check: 'artifact', seq: ref.seq, artifact: key, message: `${ref.role}: ${message}` });
    if (ref.key !== undefined && ref.key !== key) fail(`the event names key ${ref.key}, but its sha256 is stored under ${key}`);
    try {
      const { sha256, size } = await hashOf(ref.sha256);
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

/** Moved to the grading module, shared with `a2rl regrade`; re-exported for this module's callers. */
export { restoreCheckpoint } from '../grading/archived-grading.js';

