// Behaviour cloning: maximise log p(expert action) of the linear softmax policy on data/demos.jsonl.
// Usage: node train_sft.mjs --data <demos.jsonl> --init <checkpoint> --out <checkpoint>
import { readFileSync } from 'node:fs';
import { requiredArgs } from './args.mjs';
import { EpisodeView, addLogProbGradient, features, loadWeights, probabilities, saveCheckpoint } from './policy.mjs';

const CONFIG = {"epochs":8,"lr":0.5,"l2":0.001};
const opt = { ...CONFIG, ...requiredArgs(['data', 'init', 'out']) };
const demos = readFileSync(opt.data, 'utf8').trim().split('\n').map((l) => JSON.parse(l));

// Precompute every decision's feature lists once: the view only depends on the demo itself.
const decisions = [];
for (const demo of demos) {
  const view = new EpisodeView(demo.steps[0].observation);
  demo.steps.forEach((s, i) => {
    const featureLists = s.admissible_actions.map((a) => features(view, a));
    decisions.push({ featureLists, chosen: s.admissible_actions.indexOf(s.action) });
    view.observe(s.action, demo.steps[i + 1]?.observation ?? demo.final_observation);
  });
}

const w = loadWeights(opt.init);
for (let epoch = 0; epoch < opt.epochs; epoch++) {
  let nll = 0;
  for (const { featureLists, chosen } of decisions) {
    const probs = probabilities(w, featureLists);
    nll -= Math.log(probs[chosen]);
    const grad = new Map();
    addLogProbGradient(grad, featureLists, probs, chosen, 1);
    for (const [f, g] of grad) w[f] = (w[f] ?? 0) * (1 - opt.lr * opt.l2) + opt.lr * g;
  }
  console.log(`epoch ${epoch + 1}/${opt.epochs} mean nll ${(nll / decisions.length).toFixed(4)}`);
}
saveCheckpoint(opt.out, w, { trainedWith: 'behaviour cloning', demos: demos.length, epochs: opt.epochs });
console.log(`wrote ${opt.out}`);
