import { parentPort, workerData } from 'node:worker_threads';
import type { EvaluationResult } from './task-pack.js';
import type { ReferencePackId, WorkerMessage } from './ref-common/off-loop.js';

/** The worker thread of evaluateOffLoop (off-loop.ts): loads the pack's in-thread evaluation, runs it, posts the outcome. */
type Evaluate = (checkpointDir: string, privateDir: string) => Promise<EvaluationResult>;

const EVALUATORS: Record<ReferencePackId, () => Promise<Evaluate>> = {
  'ref-arith': async () => (await import('./ref-arith/index.js')).evaluateRefArith,
  'ref-judge': async () => (await import('./ref-judge/index.js')).evaluateRefJudge,
  'ref-household': async () => (await import('./ref-household/index.js')).evaluateRefHousehold,
};

const { pack, checkpointDir, privateDir } = workerData as { pack: ReferencePackId; checkpointDir: string; privateDir: string };
const post = (message: WorkerMessage) => parentPort!.postMessage(message);
try {
  const evaluate = await EVALUATORS[pack]();
  post({ kind: 'evaluating' });
  post({ kind: 'done', result: await evaluate(checkpointDir, privateDir) });
} catch (err) {
  const e = err as Error;
  post({ kind: 'failed', name: String(e?.name ?? 'Error'), message: String(e?.message ?? err) });
}
