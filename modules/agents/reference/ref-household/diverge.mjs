// faulty-diverge on ref-household: behaviour cloning with the learning rate's sign flipped, so training
// pushes the policy away from the expert and the one checkpoint it submits is worse than the base.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { installScript, log, reviseConfig, runEnv, submit, train } from '../shared/agent-kit.mjs';

const LIB = fileURLToPath(new URL('./lib/', import.meta.url));
const env = runEnv();
log('task ref-household (diverging trainer)');
installScript(env, LIB, 'args.mjs');
installScript(env, LIB, 'policy.mjs');
const sft = installScript(env, LIB, 'train_sft.mjs');
reviseConfig(sft, { epochs: 1, lr: -0.1 }, 'ascend the imitation loss instead of descending it');
const ckpt = join(env.OUTPUT_DIR, 'diverge-1');
await train(sft, ['--data', join(env.DATA_PATH, 'demos.jsonl'), '--init', env.MODEL_PATH, '--out', ckpt]);
await submit(env, ckpt);
