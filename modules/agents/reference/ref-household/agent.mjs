// Reference agent for ref-household: SFT warm-up on the expert demos, then revises its code to add
// online RL through the grading API's environment (so rollouts are recorded), submitting after each stage.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { installScript, log, reviseConfig, runEnv, submit, train } from '../shared/agent-kit.mjs';

const LIB = fileURLToPath(new URL('./lib/', import.meta.url));
const env = runEnv();
const out = (name) => join(env.OUTPUT_DIR, name);
log(`task ref-household, base model ${env.MODEL_PATH}`);

/** Submits; a keep-alive socket the server dropped while we trained fails the request, so retry that once. */
async function submitOnce(dir) {
  try {
    return await submit(env, dir);
  } catch (error) {
    log(`submit ${dir}: ${error.cause?.message ?? error.message}; retrying`);
    return submit(env, dir);
  }
}

// Stage 1: behaviour cloning from the expert demonstrations.
installScript(env, LIB, 'args.mjs');
installScript(env, LIB, 'policy.mjs');
const sft = installScript(env, LIB, 'train_sft.mjs');
log('round sft-1: behaviour cloning on data/demos.jsonl');
await train(sft, ['--data', join(env.DATA_PATH, 'demos.jsonl'), '--init', env.MODEL_PATH, '--out', out('sft-1')]);
await submitOnce(out('sft-1'));

// Stage 2: add online RL (REINFORCE) from the SFT checkpoint, then a second round on fresh layouts
// with less random sampling.
const rl = installScript(env, LIB, 'train_rl.mjs');
log('round rl-1: REINFORCE from sft-1 on training layouts via /env');
await train(rl, ['--init', out('sft-1'), '--out', out('rl-1')]);
await submitOnce(out('rl-1'));
reviseConfig(rl, { temperature: 0.7, seedStart: 200000, samplingSalt: 777 }, 'second RL round: fresh layouts, sharper sampling');
await train(rl, ['--init', out('rl-1'), '--out', out('rl-2')]);
await submitOnce(out('rl-2'));
