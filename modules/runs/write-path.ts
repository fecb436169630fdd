import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { Instrumentation } from '../instrumentation/instrumentation.js';
import { RunRecorder } from '../instrumentation/run-recorder.js';
import type { KnownSecret } from '../instrumentation/secret-redactor.js';
import type { EventData, EventType } from '../ledger/events/catalog.js';
import type { RecordedEvent } from '../ledger/event-store.port.js';
import type { LedgerService } from '../ledger/ledger.service.js';
import { runGuard, type RunGuard } from '../ledger/run-lifecycle.js';
import { evolveScores, initialRunScores, type RunScores } from '../ledger/run-scores.js';
import type { Clock } from '../ledger/tokens.js';
import { TreeHeadSigner } from '../ledger/tree-head-signer.js';
import { initSigningKey, keysDir, loadSigningKey, type SigningKey } from '../ledger/tree-head.js';
import type { RunLimits } from '../sandbox/limits.js';

// The one place a run's write path is wired: instrumentation (ordered lane, observers, redaction) →
// RunRecorder (lifecycle guard, batched appends) → TreeHeadSigner (holds appends while it signs a
// head) → LedgerService. Everything a run records goes in at the top (`record`).

/** Submissions and best score as recorded so far (progress lines, RunCompleted, the run's summary). */
export interface RunTally {
  /** Every submission id recorded so far (received, graded or rejected). */
  readonly submissions: ReadonlySet<string>;
  readonly best: number | null;
}

export interface WritePath {
  recorder: RunRecorder;
  /** The lifecycle rules the recorder applies; its state is the run's as recorded so far. */
  guard: RunGuard;
  signer: TreeHeadSigner;
  instrumentation: Instrumentation;
  tally: RunTally;
  /** Records one event of the run through the instrumentation's ordered lane. */
  record<T extends EventType>(type: T, data: EventData<T>): Promise<unknown>;
}

export interface WritePathOptions {
  runId: string;
  ledger: LedgerService;
  key: SigningKey;
  treeHeadEvery?: { events?: number; ms?: number };
  /** The workspace root the file observer watches. */
  root: string;
  artifacts: ArtifactStore;
  clock: Clock;
  limits: RunLimits;
  /** Every credential the harness knows: redacted from events and archived files. */
  secrets: KnownSecret[];
  /** A limit the harness accounts was exceeded: the agent is to be stopped. */
  onLimit: () => void;
  /** The lifecycle state to continue from (a run resumed from its ledger); default: a new run. */
  guard?: RunGuard;
  /** A resumed run's stored stream: the signer's tree, the lifecycle and the tally continue from it. */
  resumeFrom?: { stored: readonly RecordedEvent[]; scores: RunScores };
}

/** Wires a run's write path, from the observers down to the ledger. */
export function openWritePath(opts: WritePathOptions): WritePath {
  const { runId, ledger } = opts;
  const append = (data: EventData<'TreeHeadSigned'>) => ledger.record(runId, 'TreeHeadSigned', data);
  const signerOptions = { runId, key: opts.key, append, everyEvents: opts.treeHeadEvery?.events, everyMs: opts.treeHeadEvery?.ms };
  const resumed = opts.resumeFrom;
  const signer = resumed ? TreeHeadSigner.resume(signerOptions, resumed.stored) : new TreeHeadSigner(signerOptions);
  const guard = opts.guard ?? runGuard(resumed?.scores.lifecycle);
  const recorder = new RunRecorder({ runId, ledger, append: (batch) => signer.record(batch), guard });
  const tally = tallyOf(recorder, resumed?.scores);
  const instrumentation = new Instrumentation({ root: opts.root, recorder, artifacts: opts.artifacts, clock: opts.clock, limits: opts.limits, secrets: opts.secrets, onLimit: opts.onLimit });
  return { recorder, guard, signer, instrumentation, tally, record: (type, data) => instrumentation.record(type, data) };
}

/** The run-scores fold over the events this write path records. */
function tallyOf(recorder: RunRecorder, from: RunScores = initialRunScores): RunTally {
  let scores = from;
  recorder.onRecorded((event) => {
    scores = evolveScores(scores, event);
  });
  return {
    get submissions() {
      return scores.named;
    },
    get best() {
      return scores.best;
    },
  };
}

/** Signs a final head over a run's stored stream (nothing else writes to it any more). */
export async function sealStoredRun(ledger: LedgerService, runId: string, key: SigningKey): Promise<void> {
  const events: RecordedEvent[] = [];
  for await (const recorded of ledger.stored(runId)) events.push(recorded);
  const append = (data: EventData<'TreeHeadSigned'>) => ledger.record(runId, 'TreeHeadSigned', data);
  await TreeHeadSigner.resume({ runId, key, append }, events).seal();
}

/** The ledger's signing key under A2RL_HOME, created (and announced) on first use. */
export function signingKey(home: string, warn: (message: string) => void): SigningKey {
  const existing = loadSigningKey(home);
  if (existing) return existing;
  const created = initSigningKey(home);
  warn(`created the ledger signing key ${created.keyId} in ${keysDir(home)} (a2rl keys show prints its public key)`);
  return created;
}
