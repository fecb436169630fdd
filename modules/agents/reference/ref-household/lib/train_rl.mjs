// Online RL (REINFORCE with a batch-mean baseline) on training layouts rolled out through the grading
// API's environment endpoints, so every rollout is recorded by the harness.
// Usage: node train_rl.mjs --init <checkpoint> --out <checkpoint>
import { requiredArgs } from './args.mjs';
import { EpisodeView, addLogProbGradient, features, loadWeights, probabilities, rng, sample, saveCheckpoint } from './policy.mjs';

const CONFIG = {"iterations":10,"episodes":32,"lr":1,"temperature":1,"seedStart":100000,"samplingSalt":12345};
const opt = requiredArgs(['init', 'out']);
const url = process.env.GRADING_SERVER_URL?.replace(/\/$/, '');
if (!url) throw new Error('GRADING_SERVER_URL is not set');

async function call(path, body) {
  const headers = { 'content-type': 'application/json' };
  if (process.env.A2RL_RUN_TOKEN) headers.authorization = `Bearer ${process.env.A2RL_RUN_TOKEN}`;
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${path} -> HTTP ${res.status}: ${await res.text()}`);
  return res.json();
}

/** One sampled episode on training layout `seed`: the decisions taken and the return. */
async function rollout(w, seed) {
  const random = rng(seed ^ CONFIG.samplingSalt);
  let { session_id, observation, admissible_actions: actions } = await call('/env/reset', { seed });
  const view = new EpisodeView(observation);
  const decisions = [];
  let ret = 0;
  for (;;) {
    const featureLists = actions.map((a) => features(view, a));
    const probs = probabilities(w, featureLists, CONFIG.temperature);
    const chosen = sample(probs, random);
    decisions.push({ featureLists, probs, chosen });
    const r = await call('/env/step', { session_id, action: actions[chosen] });
    view.observe(actions[chosen], r.observation);
    ret += r.reward;
    if (r.done) return { decisions, ret };
    actions = r.admissible_actions;
  }
}

const w = loadWeights(opt.init);
let seed = CONFIG.seedStart;
for (let it = 0; it < CONFIG.iterations; it++) {
  const seeds = Array.from({ length: CONFIG.episodes }, () => seed++);
  // Episodes of a batch run concurrently; the update below is order-independent of their timing.
  const episodes = await Promise.all(seeds.map((s) => rollout(w, s)));
  const mean = episodes.reduce((a, e) => a + e.ret, 0) / episodes.length;
  const grad = new Map();
  for (const { decisions, ret } of episodes) {
    const advantage = ret - mean;
    if (advantage === 0) continue;
    for (const d of decisions) addLogProbGradient(grad, d.featureLists, d.probs, d.chosen, advantage / CONFIG.temperature);
  }
  for (const [f, g] of grad) w[f] = (w[f] ?? 0) + (CONFIG.lr * g) / episodes.length;
  const steps = episodes.reduce((a, e) => a + e.decisions.length, 0);
  console.log(`iteration ${it + 1}/${CONFIG.iterations}: success ${(mean * 100).toFixed(1)}% over ${episodes.length} episodes, ${steps} steps`);
}
saveCheckpoint(opt.out, w, { trainedWith: 'REINFORCE', init: opt.init, ...CONFIG });
console.log(`wrote ${opt.out}`);
