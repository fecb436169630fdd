// The agent's implementation of the ref-household policy features (data/README.md, "Checkpoint format"):
// episode tracking, sparse features, linear scores, softmax sampling, checkpoint I/O.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const FORMAT = 'a2rl-ref/ref-household/1';
const APPLIANCE = { clean: 'sinkbasin 1', heat: 'microwave 1', cool: 'fridge 1' };

const typeOf = (name) => name.slice(0, name.lastIndexOf(' '));

export function parseGoal(observation) {
  const m = observation.match(/Your task is to: (?:put some (\w+) in (.+?)\.|(clean|heat|cool) some (\w+) and put it in (.+?)\.)\s*$/);
  if (!m) throw new Error(`no goal in observation: ${observation.slice(0, 120)}`);
  return m[1] !== undefined ? { kind: 'pick', object: m[1], target: m[2] } : { kind: m[3], object: m[4], target: m[5] };
}

/** What the agent knows mid-episode, from its own actions and the observations they got. */
export class EpisodeView {
  constructor(firstObservation) {
    this.goal = parseGoal(firstObservation);
    this.holding = null;
    this.visited = new Set();
    this.treated = new Set();
    this.step = 0;
  }

  get phase() {
    if (this.holding === null) return 'find';
    if (typeOf(this.holding) !== this.goal.object) return 'wrong';
    return this.goal.kind !== 'pick' && !this.treated.has(this.holding) ? 'treat' : 'place';
  }

  observe(action, observation) {
    this.step++;
    let m;
    if ((m = action.match(/^go to (.+)$/)) && observation.startsWith('You arrive at ')) this.visited.add(m[1]);
    else if ((m = action.match(/^take (.+) from .+$/)) && observation.startsWith('You pick up ')) this.holding = m[1];
    else if (action.startsWith('put ') && observation.startsWith('You put ')) this.holding = null;
    else if ((m = action.match(/^(clean|heat|cool) (.+) with .+$/)) && observation.startsWith(`You ${m[1]} the `)) {
      if (m[1] === this.goal.kind) this.treated.add(m[2]);
      else if (m[1] !== 'clean' && this.goal.kind !== 'clean') this.treated.delete(m[2]);
    }
  }
}

export function features(view, action) {
  const phase = view.phase;
  let verb, obj = null, rec = null, m;
  if ((m = action.match(/^go to (.+)$/))) [verb, rec] = ['go', m[1]];
  else if ((m = action.match(/^(open|close) (.+)$/))) [verb, rec] = [m[1], m[2]];
  else if ((m = action.match(/^(take|put|clean|heat|cool) (.+?) (?:from|in\/on|with) (.+)$/))) [verb, obj, rec] = [m[1], m[2], m[3]];
  else verb = action.split(' ')[0];
  const out = [`${phase}:${verb}`];
  if (obj !== null) out.push(`${phase}:${verb}:obj=${typeOf(obj) === view.goal.object ? 'goal' : 'other'}`);
  if (rec !== null) {
    const role = rec === view.goal.target ? 'target' : rec === APPLIANCE[view.goal.kind] ? 'appliance' : 'other';
    out.push(`${phase}:${verb}:rec=${role}`);
  }
  if (verb === 'go') {
    out.push(`${phase}:go:${view.visited.has(rec) ? 'visited' : 'new'}`);
    if (phase === 'find') out.push(`find:go:${view.goal.object}@${typeOf(rec)}`);
  }
  return out;
}

export const score = (w, feats) => feats.reduce((s, f) => s + (w[f] ?? 0), 0);

/** Softmax over the actions' scores at `temperature`. */
export function probabilities(w, featureLists, temperature = 1) {
  const scores = featureLists.map((f) => score(w, f) / temperature);
  const max = Math.max(...scores);
  const exps = scores.map((s) => Math.exp(s - max));
  const z = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / z);
}

/** Adds `scale * (features(chosen) - E_p[features])`: the gradient of log p(chosen) for a linear softmax. */
export function addLogProbGradient(grad, featureLists, probs, chosen, scale) {
  for (const f of featureLists[chosen]) grad.set(f, (grad.get(f) ?? 0) + scale);
  featureLists.forEach((fl, i) => {
    for (const f of fl) grad.set(f, (grad.get(f) ?? 0) - scale * probs[i]);
  });
}

/** Seeded PRNG (mulberry32) so training is reproducible. */
export function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function sample(probs, random) {
  let r = random();
  for (let i = 0; i < probs.length; i++) if ((r -= probs[i]) < 0) return i;
  return probs.length - 1;
}

export function loadWeights(dir) {
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
  if (manifest.format !== FORMAT) throw new Error(`${dir}: unexpected checkpoint format ${manifest.format}`);
  return { ...JSON.parse(readFileSync(join(dir, 'policy.json'), 'utf8')).weights };
}

export function saveCheckpoint(dir, weights, meta) {
  mkdirSync(dir, { recursive: true });
  const rounded = Object.fromEntries(
    Object.entries(weights)
      .filter(([, v]) => Math.abs(v) > 1e-9)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => [k, Math.round(v * 1e6) / 1e6]),
  );
  writeFileSync(join(dir, 'policy.json'), JSON.stringify({ weights: rounded }, null, 1) + '\n');
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify({ format: FORMAT, ...meta }, null, 2) + '\n');
}
