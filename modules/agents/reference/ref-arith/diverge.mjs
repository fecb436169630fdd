// faulty-diverge on ref-arith: the same trainer with its labels inverted (add↔sub, mul↔div), so the
// one checkpoint it submits is worse than the base model.
import { fileURLToPath } from 'node:url';
import { installScript, log, runEnv, runPlan } from '../shared/agent-kit.mjs';

const env = runEnv();
log('task ref-arith (diverging trainer)');
const script = installScript(env, fileURLToPath(new URL('.', import.meta.url)), 'train.mjs');
await runPlan(env, script, [
  { name: 'diverge-1', why: 'SFT on all problems with inverted operation labels', patch: { sftExamples: 600, flipOps: true } },
]);
