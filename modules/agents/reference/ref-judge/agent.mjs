// Reference agent for ref-judge: SFT of router and templates first, then revises its training script
// (learn where topics and requested words sit; more list capacity) and submits after every round.
import { fileURLToPath } from 'node:url';
import { installScript, log, runEnv, runPlan } from '../shared/agent-kit.mjs';

const env = runEnv();
log(`task ref-judge, base model ${env.MODEL_PATH}`);
const script = installScript(env, fileURLToPath(new URL('.', import.meta.url)), 'train.mjs');
await runPlan(env, script, [
  { name: 'sft-1', why: 'SFT: router from categories, templates from delexicalised example responses' },
  { name: 'sft-2', why: 'add the slots stage: topic markers/stops and keyword markers from the data', patch: { stages: ['sft', 'slots'] } },
  { name: 'sft-3', why: 'more distinct list items (no repeated lines) and requested words in lists', patch: { listItems: 6, keywordsInLists: true } },
]);
