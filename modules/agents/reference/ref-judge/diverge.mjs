// faulty-diverge on ref-judge: the same trainer with its routing labels rotated and its topic/keyword
// markers dropped, so the one checkpoint it submits is worse than the base model.
import { fileURLToPath } from 'node:url';
import { installScript, log, runEnv, runPlan } from '../shared/agent-kit.mjs';

const env = runEnv();
log('task ref-judge (diverging trainer)');
const script = installScript(env, fileURLToPath(new URL('.', import.meta.url)), 'train.mjs');
await runPlan(env, script, [
  { name: 'diverge-1', why: 'SFT with rotated routing labels and no slot markers', patch: { stages: ['sft', 'slots'], rotateTypes: true } },
]);
