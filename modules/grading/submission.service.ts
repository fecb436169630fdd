import { createHash } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { BadRequestException, HttpException, HttpStatus, Inject, Injectable, ServiceUnavailableException } from '@nestjs/common';
import pTimeout from 'p-timeout';
import type { EventData, EventType, SubmissionRejected } from '../ledger/events/catalog.js';
import { causedBy } from '../ledger/events/causation.js';
import type { EvaluationResult } from '../../tasks/task-pack.js';
import { createEvaluationContext } from '../serving/model-server.js';
import { loadServingConfig } from '../serving/serving.config.js';
import { archiveCheckpoint, type ArchivedCheckpoint } from './checkpoint-archive.js';
import { GRADING_OPTIONS, type GradingOptions } from './grading.options.js';
import { KeyedMutex } from '../ledger/keyed-mutex.js';
import { deviceLocks, GpuRequestError, gradingDevice } from './gpus.js';
import type { ActiveRun, GradeRecord, SubmissionEntry } from './run-registry.js';
import { SubmissionRefusedError } from './submission-refused.error.js';
import { resolveCheckpointDir } from './workspace-path.js';

/**
 * The answer to `POST /submit`: the paper's entry (score 0 and `error` when grading failed), `best`
 * as the paper's full best entry, and a2rl's best graded score as `best_score` (null until one is graded).
 */
export interface SubmitResponse extends SubmissionEntry {
  best: SubmissionEntry;
  best_score: number | null;
  /** Every submission given an id, refused ones included. */
  total_submissions: number;
}

type Outcome = { ok: true; grade: GradeRecord; duplicateOf?: string } | { ok: false; reasonClass: 'invalid_checkpoint' | 'evaluator_error'; message: string };

/** What one answered submission was: its request as the agent sent it and when it arrived. */
interface Submitted {
  submissionId: string;
  modelPath: string;
  arrivedMs: number;
}

const MAX_MESSAGE = 4000;

/**
 * `POST /submit`: resolve and check the path, archive the checkpoint by content, grade it (one
 * grading at a time per device, under a timeout) and record what happened. Every submission that
 * passed authentication and request validation (the body, then `gpu`) gets a `sub-<n>` id and at
 * least one ledger event; one the evaluator answered (graded or not) also gets the paper's entry.
 */
@Injectable()
export class SubmissionService {
  private readonly devices = new KeyedMutex();

  constructor(@Inject(GRADING_OPTIONS) private readonly options: GradingOptions) {}

  /** A `gpu` this server cannot grade on is a bad request: 400 `{error, available_gpus}`, given no id and recorded nowhere. */
  submit(run: ActiveRun, modelPath: string, gpu: number | string | null | undefined): Promise<SubmitResponse> {
    const arrivedMs = Date.now();
    let device: string;
    try {
      device = gradingDevice(gpu, run.ctx.gpus ?? this.options.availableGpus);
    } catch (err) {
      if (!(err instanceof GpuRequestError)) throw err;
      throw new BadRequestException({ statusCode: 400, error: err.message, available_gpus: err.availableGpus });
    }
    return run.track(this.process(run, modelPath, device, arrivedMs));
  }

  private async process(run: ActiveRun, modelPath: string, device: string, arrivedMs: number): Promise<SubmitResponse> {
    const submissionId = run.nextSubmissionId();
    const request: Submitted = { submissionId, modelPath, arrivedMs };
    let archived: ArchivedCheckpoint | undefined;
    let received: unknown; // the stored SubmissionReceived: what its grading or rejection names as its cause
    try {
      if (Date.now() >= run.deadline.getTime()) {
        throw new SubmissionRefusedError(409, 'budget_exhausted', `the run's budget is exhausted (deadline ${run.deadline.toISOString()}); no more submissions are graded`);
      }
      const target = await resolveCheckpointDir(run.ctx.workspace, modelPath);
      try {
        archived = await archiveCheckpoint({
          checkpoint: target,
          artifacts: run.ctx.artifacts,
          stagingRoot: this.options.stagingDir,
          maxBytes: run.ctx.limits?.checkpointBytes,
        });
      } finally {
        await target.close();
      }
      received = await record(run, 'SubmissionReceived', {
        submissionId,
        modelPath: target.rel,
        manifest: archived.manifest,
        checkpoint: archived.manifestBlob,
      });
    } catch (err) {
      if (archived) await rm(archived.stagedDir, { recursive: true, force: true });
      if (err instanceof SubmissionRefusedError) {
        if (err.limit) await record(run, 'LimitReached', { ...err.limit, scope: submissionId }); // its action (the submission refused) is the limit's own
        await reject(run, submissionId, err.reasonClass, err.message);
        throw new HttpException({ statusCode: err.status, error: err.message, reason: err.reasonClass, submission_id: submissionId }, err.status);
      }
      if (err instanceof ServiceUnavailableException) throw err;
      // Storage trouble while archiving: the harness's fault, never the agent's.
      const message = `the checkpoint could not be archived: ${hideHostPaths(messageOf(err), run)}`;
      await reject(run, submissionId, 'infra_error', message).catch(() => undefined);
      throw new ServiceUnavailableException({ statusCode: 503, error: message, reason: 'infra_error', submission_id: submissionId });
    }
    const { stagedDir, manifestBlob } = archived;
    try {
      await run.beforeGrading?.(submissionId);
      // The grade is recorded under the device lock too, so an identical submission waiting for
      // the lock finds it and the ledger shows the original graded before its duplicates.
      const outcome = await this.onDevice(device, async (): Promise<Outcome> => {
        const earlier = run.gradesByContent.get(manifestBlob.sha256);
        const result: Outcome = earlier ? { ok: true, grade: earlier, duplicateOf: earlier.submissionId } : await this.grade(run, submissionId, stagedDir, device);
        if (!result.ok) {
          await reject(run, submissionId, result.reasonClass, result.message, received);
          return result;
        }
        const { score, details, items } = result.grade;
        await record(run, 'SubmissionGraded', {
          submissionId,
          score,
          details: result.duplicateOf ? { duplicateOf: result.duplicateOf } : details,
          ...(items && !result.duplicateOf ? { items } : {}),
          ...causedBy(received, { submissionId }),
        });
        if (!earlier) run.gradesByContent.set(manifestBlob.sha256, result.grade);
        run.best = run.best === null ? score : Math.max(run.best, score);
        return result;
      });
      const answer = outcome.ok ? this.answer(run, request, outcome.grade.score) : this.answer(run, request, null, outcome);
      try {
        run.onSubmitted?.();
      } catch {
        // Bookkeeping of the caller (run_meta.json); the grade is recorded either way.
      }
      return answer;
    } finally {
      await rm(stagedDir, { recursive: true, force: true });
    }
  }

  /** Holds the lock of every GPU in `device` (always in the same order), so no two gradings share one. */
  private onDevice<R>(device: string, work: () => Promise<R>): Promise<R> {
    return deviceLocks(device).reduceRight<() => Promise<R>>((inner, key) => () => this.devices.run(key, inner), work)();
  }

  private async grade(run: ActiveRun, submissionId: string, dir: string, device: string): Promise<Outcome> {
    const limitMs = this.options.evaluatorTimeoutMs;
    const abort = new AbortController();
    let result: EvaluationResult;
    let servers: readonly unknown[] = [];
    try {
      // Read per grading: a bad serving variable fails this grading as an evaluator error naming it.
      // A LoRA adapter is applied to the base model the run gave its agent.
      const ctx = createEvaluationContext(loadServingConfig(), device, {}, { baseModelDir: run.ctx.workspace.baseModelDir });
      servers = ctx.servers;
      // Past the limit the evaluation is told to stop (its signal) and the grading fails as a timeout.
      result = await pTimeout(run.ctx.task.evaluate(dir, run.ctx.privateDir, abort.signal, ctx), {
        milliseconds: limitMs,
        fallback: () => {
          abort.abort();
          throw new EvaluatorTimeout(`the evaluator did not finish within ${Math.round(limitMs / 1000)} s`);
        },
      });
    } catch (err) {
      if (errorName(err) === 'InvalidCheckpointError') {
        return { ok: false, reasonClass: 'invalid_checkpoint', message: `invalid checkpoint: ${hideHostPaths(messageOf(err), run, dir)}` };
      }
      return { ok: false, reasonClass: 'evaluator_error', message: `evaluator error (not caused by your checkpoint): ${hideHostPaths(messageOf(err), run, dir)}` };
    }
    const score = result?.score;
    if (typeof score !== 'number' || !Number.isFinite(score) || score < 0 || score > 100) {
      return { ok: false, reasonClass: 'evaluator_error', message: `evaluator error (not caused by your checkpoint): score ${String(score)} is not in 0–100` };
    }
    const details = result.details && typeof result.details === 'object' && !Array.isArray(result.details) ? result.details : {};
    let items: GradeRecord['items'];
    try {
      items = Array.isArray(result.items) && result.items.length > 0 ? await storeItems(run, result.items) : undefined;
    } catch (err) {
      return { ok: false, reasonClass: 'evaluator_error', message: `evaluator error (not caused by your checkpoint): the graded items could not be stored: ${hideHostPaths(messageOf(err), run, dir)}` };
    }
    // How each server a2rl started for this grading was confined (modules/serving/confinement.ts): a fact of the grading.
    const grade: GradeRecord = { submissionId, score, details: servers.length ? { ...details, serverIsolation: servers } : details };
    return { ok: true, grade: items ? { ...grade, items } : grade };
  }

  /** The paper's entry for this submission (score 0 when grading failed), added to the run's answers, with the best. */
  private answer(run: ActiveRun, request: Submitted, score: number | null, failure?: { reasonClass: 'invalid_checkpoint' | 'evaluator_error'; message: string }): SubmitResponse {
    const now = Date.now();
    const entry: SubmissionEntry = {
      submission_id: request.submissionId,
      timestamp: new Date(now).toISOString(),
      model_path: request.modelPath,
      score: score ?? 0,
      baseline_score: run.baselineScore,
      improvement: score === null ? null : score - run.baselineScore,
      elapsed_seconds: Math.round((now - request.arrivedMs) / 10) / 100,
      ...(failure ? { error: failure.message, reason: failure.reasonClass } : {}),
    };
    const best = run.addAnswer(entry);
    return { ...entry, best, best_score: run.best, total_submissions: run.totalSubmissions };
  }
}

/** The graded items as NDJSON in the run's artifact store (the event only references them: completions are bulky). */
async function storeItems(run: ActiveRun, items: NonNullable<EvaluationResult['items']>): Promise<NonNullable<GradeRecord['items']>> {
  const body = Buffer.from(items.map((item) => `${JSON.stringify(item)}\n`).join(''), 'utf8');
  const stored = await run.ctx.artifacts.put(body, { sha256: createHash('sha256').update(body).digest('hex'), size: body.length });
  return { sha256: stored.sha256, size: stored.size, key: stored.key };
}

class EvaluatorTimeout extends Error {
  override readonly name = 'EvaluatorTimeout';
}

/** Records through the run's recorder; a ledger that cannot record makes the request fail with 503. */
async function record<T extends EventType>(run: ActiveRun, type: T, data: EventData<T>): Promise<unknown> {
  try {
    return await run.ctx.record(type, data);
  } catch (err) {
    throw new ServiceUnavailableException({
      statusCode: HttpStatus.SERVICE_UNAVAILABLE,
      error: `the ledger could not record ${type}; try again later (${messageOf(err)})`,
    });
  }
}

/** Records a rejection; `received` is the stored SubmissionReceived when the submission got that far (its cause). */
async function reject(run: ActiveRun, submissionId: string, reasonClass: SubmissionRejected['reasonClass'], message: string, received?: unknown): Promise<void> {
  await record(run, 'SubmissionRejected', { submissionId, reasonClass, message: message.slice(0, MAX_MESSAGE), ...causedBy(received, { submissionId }) });
}

/**
 * Evaluator and storage errors go back to the agent: paths of the host in them (the staged copy, the
 * held-out set, A2RL_HOME) would let it map the machine, so every absolute path outside its workspace
 * is replaced by what it stands for.
 */
export function hideHostPaths(message: string, run: ActiveRun, stagedDir?: string): string {
  const named: Array<[string, string]> = [
    ...(stagedDir ? ([[stagedDir, '<submitted checkpoint>']] as Array<[string, string]>) : []),
    [run.ctx.privateDir, '<held-out data>'],
  ];
  let text = message;
  for (const [dir, name] of named) text = text.split(dir).join(name);
  const workspace = run.ctx.workspace.root;
  return text.replace(/(?<![\w.~:/>-])\/[^\s'"`:,;()<>[\]{}]+/g, (p) => (p === workspace || p.startsWith(`${workspace}/`) ? p : '<host path>'));
}

function errorName(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? String((err as Error).name) : undefined;
}

function messageOf(err: unknown): string {
  const text = err instanceof Error || (typeof err === 'object' && err !== null && 'message' in err) ? String((err as Error).message) : String(err);
  return text.slice(0, MAX_MESSAGE);
}
