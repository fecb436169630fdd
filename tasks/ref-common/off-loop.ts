import { EvaluatorError, InvalidCheckpointError, type EvaluationResult } from '../task-pack.js';
import { startWorker } from '../../modules/settings/worker-thread.js';

/** The reference packs whose evaluation runs in a worker (tasks/ref-evaluate-worker.ts knows where each one's is). */
export type ReferencePackId = 'ref-arith' | 'ref-judge' | 'ref-household';

export interface OffLoopLimits {
  /** From the moment the worker starts evaluating (its start-up does not count); then it is killed. */
  timeoutMs: number;
  /** The worker's heap (V8 old generation); past it the worker dies and the grading fails. */
  heapMb: number;
}

/** A reference evaluation takes well under a second; a minute is a checkpoint making it spin. */
export const REFERENCE_EVAL_LIMITS: OffLoopLimits = { timeoutMs: 60_000, heapMb: 512 };

/** What the worker posts: that it started evaluating, its result, or the error it threw. */
export type WorkerMessage =
  | { kind: 'evaluating' }
  | { kind: 'done'; result: EvaluationResult }
  | { kind: 'failed'; name: string; message: string };

/**
 * Evaluates an agent-written reference checkpoint in a worker thread, never on the harness's event
 * loop: however long the checkpoint makes the evaluation run (a crafted weights file can make it
 * loop for seconds), the harness keeps serving, recording and timing out. Past `timeoutMs`, on
 * `signal`'s abort or past its heap, the worker is terminated (V8 stops it even inside a loop) and
 * the grading fails as an EvaluatorError (score 0, never blamed on the agent, never cached);
 * InvalidCheckpointError and EvaluatorError thrown inside come back as themselves.
 */
export function evaluateOffLoop(pack: ReferencePackId, checkpointDir: string, privateDir: string, signal?: AbortSignal, limits: OffLoopLimits = REFERENCE_EVAL_LIMITS): Promise<EvaluationResult> {
  if (signal?.aborted) return Promise.reject(new EvaluatorError(`the ${pack} evaluation was cancelled before it started`));
  const worker = startWorker(new URL('../ref-evaluate-worker.js', import.meta.url), { pack, checkpointDir, privateDir }, { resourceLimits: { maxOldGenerationSizeMb: limits.heapMb } });
  return new Promise<EvaluationResult>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      void worker.terminate();
      outcome();
    };
    const kill = (why: string) => settle(() => reject(new EvaluatorError(why)));
    const onAbort = () => kill(`the ${pack} evaluation was stopped (cancelled, or past the grading's time limit); its worker was killed`);
    signal?.addEventListener('abort', onAbort, { once: true });
    worker.on('message', (message: WorkerMessage) => {
      if (message.kind === 'evaluating') {
        const seconds = Math.round(limits.timeoutMs / 100) / 10;
        timer = setTimeout(() => kill(`the ${pack} evaluator did not finish within ${seconds} s and was killed`), limits.timeoutMs);
      } else if (message.kind === 'done') settle(() => resolve(message.result));
      else settle(() => reject(rebuilt(message.name, message.message)));
    });
    worker.on('error', (err: Error & { code?: string }) => {
      const why = err.code === 'ERR_WORKER_OUT_OF_MEMORY' ? `ran out of its ${limits.heapMb} MB of memory and was killed` : `failed: ${err.message}`;
      kill(`the ${pack} evaluator ${why}`);
    });
    worker.on('exit', (code) => kill(`the ${pack} evaluator's worker exited (code ${code}) without a result`));
  });
}

/** The error the evaluation threw, as its own class where the harness tells them apart. */
function rebuilt(name: string, message: string): Error {
  if (name === 'InvalidCheckpointError') return new InvalidCheckpointError(message);
  if (name === 'EvaluatorError') return new EvaluatorError(message);
  const err = new Error(message);
  err.name = name;
  return err;
}
