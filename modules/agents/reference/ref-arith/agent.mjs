// Reference agent for ref-arith: warm-up SFT on a small slice, then revises its training script
// (all the data; then self-training and reward-driven pruning) and submits after every round.
import { fileURLToPath } from 'node:url';
import { installScript, log, runEnv, runPlan } from '../shared/agent-kit.mjs';

const env = runEnv();
log(`task ref-arith, base model ${env.MODEL_PATH}`);
const script = installScript(env, fileURLToPath(new URL('.', import.meta.url)), 'train.mjs');
await runPlan(env, script, [
  { name: 'sft-1', why: 'warm-up SFT: unigram cue counts from the first 40 unambiguous problems' },
  { name: 'sft-2', why: 'SFT on all training problems', patch: { sftExamples: 600 } },
  {
    name: 'rl-3',
    why: 'add self-training on ambiguous problems and RL (reward = exact match on train) that prunes the table',
    patch: { stages: ['sft', 'selftrain', 'rl'], selfTrainEpochs: 2, rlPasses: 1 },
  },
]);
