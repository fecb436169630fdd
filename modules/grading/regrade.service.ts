import path from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { ARTIFACT_STORE } from '../artifacts/artifacts.module.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import { loadSigningKey, type SigningKey } from '../ledger/tree-head.js';
import { TreeHeadSigner } from '../ledger/tree-head-signer.js';
import type { RecordedEvent } from '../ledger/event-store.port.js';
import type { A2rlEvent, EventData, EventType } from '../ledger/events/catalog.js';
import { KeyedMutex } from '../ledger/keyed-mutex.js';
import { LedgerService } from '../ledger/ledger.service.js';
import { foldRunLifecycle, hasEnded, runGuard } from '../ledger/run-lifecycle.js';
import { SETTINGS, type Settings } from '../settings/settings.port.js';
import { getTask } from '../../tasks/index.js';
import type { EvaluationContext, TaskPack } from '../../tasks/task-pack.js';
import { ArchivedCheckpointGrader } from './archived-grading.js';
import { checkedScore, failureLine, MAX_REPEATS, newSeries } from './baseline-repeats.js';
import { scoreStats, type ScoreStats } from './score-stats.js';

export interface RegradeOptions {
  /** Gradings per submission (1..100). */
  repeat: number;
  /** Submission numbers (n of `sub-<n>`); default every graded submission. */
  submissions?: number[];
}

export interface SubmissionRegrade extends ScoreStats {
  submissionId: string;
  /** The score SubmissionGraded recorded during the run. */
  recorded: number;
  /** This request's scores, in order (failed gradings are left out and listed in `failures`). */
  scores: number[];
  failures: string[];
}

export interface RegradeResult {
  runId: string;
  task: string;
  /** GradingRepeated.series of this request's events. */
  series: string;
  repeat: number;
  evaluatorVersion: string;
  /** The evaluator version the run's baseline was graded with (null when not recorded). */
  recordedEvaluatorVersion: string | null;
  submissions: SubmissionRegrade[];
}

/** The request cannot be served as asked (unknown run or submission, open run, bad count): a 4xx for the API. */
export class RegradeRefusedError extends Error {
  override readonly name = 'RegradeRefusedError';
  constructor(message: string, readonly status: 400 | 404 | 409 = 400) {
    super(message);
  }
}

export interface RegradeDeps {
  ledger: Pick<LedgerService, 'record' | 'stored'>;
  artifacts: ArtifactStore;
  taskCacheDir: string;
  datasetsDir?: string;
  signingKey: () => SigningKey | null;
  tmpDir?: string;
  /** Task packs by id (default: the registered packs). */
  task?: (id: string) => TaskPack;
  /** The evaluation context per grading (default: the configured serving on 'cpu'). */
  context?: (baseModelDir: string) => EvaluationContext;
}

/**
 * Re-grades a closed run's archived checkpoints `repeat` times each, recording every grading as a
 * GradingRepeated event in the run's stream (which is then sealed again with a new signed head), and
 * returns each submission's mean, sample standard deviation, min and max: the evaluation noise of
 * that checkpoint (LLM judges, live web search, wall-clock limits).
 */
export async function regradeRun(deps: RegradeDeps, runId: string, opts: RegradeOptions): Promise<RegradeResult> {
  if (!Number.isInteger(opts.repeat) || opts.repeat < 1 || opts.repeat > MAX_REPEATS) throw new RegradeRefusedError(`repeat must be an integer from 1 to ${MAX_REPEATS}, got ${opts.repeat}`);
  const stored: RecordedEvent[] = [];
  for await (const recorded of deps.ledger.stored(runId)) stored.push(recorded);
  if (!stored.length) throw new RegradeRefusedError(`run "${runId}" has no events`, 404);
  const events = stored.map((r) => r.event);
  const lifecycle = foldRunLifecycle(events);
  if (!hasEnded(lifecycle.status) || (lifecycle.phase !== 'completed' && lifecycle.phase !== 'interrupted')) {
    throw new RegradeRefusedError(`run ${runId} is still open (${lifecycle.phase}): re-grade it once it has ended`, 409);
  }
  const scheduled = first(events, 'RunScheduled');
  if (!scheduled) throw new RegradeRefusedError(`run ${runId} has no RunScheduled event: its task is unknown`, 409);
  const targets = pickSubmissions(runId, events, opts.submissions);
  const key = deps.signingKey();
  if (!key) throw new Error('no ledger signing key to seal the run again after re-grading (`a2rl keys init`)');

  const task = (deps.task ?? getTask)(scheduled.data.task);
  const grader = await ArchivedCheckpointGrader.open({
    task, artifacts: deps.artifacts, taskCacheDir: deps.taskCacheDir, datasetsDir: deps.datasetsDir, tmpDir: deps.tmpDir,
    runManifest: first(events, 'WorkspacePrepared')?.data.dataManifest, context: deps.context,
  });
  const guard = runGuard(lifecycle);
  const append = (data: EventData<'TreeHeadSigned'>) => deps.ledger.record(runId, 'TreeHeadSigned', data);
  const signer = TreeHeadSigner.resume({ runId, key, append, everyMs: 24 * 3600_000 }, stored);
  const record = <T extends EventType>(type: T, data: EventData<T>) => {
    guard(type, data);
    return signer.record(() => deps.ledger.record(runId, type, data));
  };

  const series = newSeries('regrade');
  const results: SubmissionRegrade[] = [];
  try {
    for (const target of targets) {
      const scores: number[] = [];
      const failures: string[] = [];
      for (let repeat = 1; repeat <= opts.repeat; repeat++) {
        let outcome: { score: number; details?: Record<string, unknown> } | { error: string };
        try {
          const result = await grader.grade(target.manifest);
          outcome = { score: checkedScore(result.score), ...(smallDetails(result.details) ? { details: result.details } : {}) };
          scores.push(outcome.score);
        } catch (err) {
          outcome = { error: failureLine(err) };
          failures.push(outcome.error);
        }
        await record('GradingRepeated', { subject: 'submission', submissionId: target.submissionId, series, repeat, of: opts.repeat, evaluatorVersion: task.evaluatorVersion, ...outcome });
      }
      results.push({ submissionId: target.submissionId, recorded: target.recorded, scores, failures, ...scoreStats(scores) });
    }
  } finally {
    await signer.seal();
  }
  return {
    runId, task: task.id, series, repeat: opts.repeat, evaluatorVersion: task.evaluatorVersion,
    recordedEvaluatorVersion: first(events, 'BaselineEvaluated')?.data.evaluatorVersion ?? null,
    submissions: results,
  };
}

interface Target {
  submissionId: string;
  recorded: number;
  manifest: EventData<'SubmissionReceived'>['manifest'];
}

/** The graded submissions asked for (all by default), in the order they were graded. */
function pickSubmissions(runId: string, events: readonly A2rlEvent[], numbers?: number[]): Target[] {
  const received = new Map<string, EventData<'SubmissionReceived'>>();
  for (const e of events) if (e.type === 'SubmissionReceived') received.set(e.data.submissionId, e.data);
  const graded: Target[] = [];
  for (const e of events) {
    if (e.type !== 'SubmissionGraded') continue;
    const sub = received.get(e.data.submissionId);
    if (sub) graded.push({ submissionId: e.data.submissionId, recorded: e.data.score, manifest: sub.manifest });
  }
  if (!numbers?.length) {
    if (!graded.length) throw new RegradeRefusedError(`run ${runId} has no graded submission to re-grade`, 409);
    return graded;
  }
  return [...new Set(numbers)].map((n) => {
    const target = graded.find((g) => g.submissionId === `sub-${n}`);
    if (!target) throw new RegradeRefusedError(`run ${runId} has no graded submission sub-${n} (graded: ${graded.map((g) => g.submissionId).join(', ') || 'none'})`, 404);
    return target;
  });
}

function first<T extends A2rlEvent['type']>(events: readonly A2rlEvent[], type: T): Extract<A2rlEvent, { type: T }> | undefined {
  return events.find((e): e is Extract<A2rlEvent, { type: T }> => e.type === type);
}

/** Evaluator details are kept when small (events stay far below their size limit). */
const smallDetails = (details: unknown) => !!details && typeof details === 'object' && !Array.isArray(details) && JSON.stringify(details).length <= 16_384;

/** `a2rl regrade` and `POST /runs/:id/regrade`: regradeRun over the app's ledger and artifact store, one request per run at a time. */
@Injectable()
export class RegradeService {
  private readonly runs = new KeyedMutex();

  constructor(
    @Inject(ModuleRef) private readonly moduleRef: ModuleRef,
    @Inject(SETTINGS) private readonly settings: Settings,
  ) {}

  regrade(runId: string, opts: { repeat: number; submissions?: number[] }): Promise<RegradeResult> {
    return this.runs.run(runId, () => {
      // Resolved per request: the grading API's own tests build GradingModule without a ledger.
      const ledger = this.moduleRef.get(LedgerService, { strict: false });
      const artifacts = this.moduleRef.get<ArtifactStore>(ARTIFACT_STORE, { strict: false });
      const { home } = this.settings;
      return regradeRun(
        { ledger, artifacts, taskCacheDir: path.join(home, 'tasks'), datasetsDir: path.join(home, 'datasets'), signingKey: () => loadSigningKey(home) },
        runId,
        opts,
      );
    });
  }
}
