// ref-arith trainer of the reference agent: learns the cue table of the base model from
// data/train.jsonl. Stages (chosen by CONFIG, which the agent edits between submissions):
//   sft        supervised counting on the problems whose step operations are unambiguous
//   selftrain  EM-style: the current table picks among the ambiguous explanations, then re-count
//   rl         policy improvement: edits to the table are kept when the reward (exact-match on the
//              training problems, computed with the model's own inference rule) goes up
// CONFIG.flipOps (used only by diverge.mjs) inverts every learned operation: a deliberately bad model.
// Usage: node train.mjs --data <dir> --base <checkpoint dir> --out <checkpoint dir>
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

// ---- training config: the agent rewrites this block between submissions ----
const CONFIG = {"stages":["sft"],"sftExamples":40,"maxNgram":1,"minCount":4,"minPurity":0.9,"selfTrainEpochs":0,"rlPasses":0,"flipOps":false};
// ---- end config ----

const FORMAT = 'a2rl-ref/ref-arith/1';
const FIXED_OPERANDS = [['mul', 2], ['mul', 3], ['mul', 4], ['div', 2], ['div', 3], ['div', 4]];

const { values: args } = parseArgs({ options: { data: { type: 'string' }, base: { type: 'string' }, out: { type: 'string' } } });
if (!args.data || !args.base || !args.out) {
  console.error('usage: node train.mjs --data <dir> --base <checkpoint dir> --out <checkpoint dir>');
  process.exit(2);
}

const tokenize = (s) => (s.toLowerCase().match(/[a-z]+|\d+/g) ?? []).map((t) => (/^\d/.test(t) ? '#' : t));
const labelOf = (action) => (action.arg === undefined ? action.op : `${action.op}:${action.arg}`);
const actionOf = (label) => {
  const [op, arg] = label.split(':');
  return arg === undefined ? { op } : { op, arg: Number(arg) };
};

function parseProblem(row) {
  const sentences = row.question.trim().split(/(?<=[.?!])\s+/);
  const steps = [];
  for (const sentence of sentences.slice(1)) {
    if (sentence.endsWith('?')) break;
    const number = sentence.match(/\d+/);
    steps.push({ sentence, tokens: tokenize(sentence), number: number ? Number(number[0]) : undefined });
  }
  return { question: row.question, start: Number(sentences[0].match(/\d+/)[0]), steps, answer: Number(row.answer.match(/####\s*(-?\d+)/)[1]) };
}

function apply(value, action, number) {
  const operand = action.arg ?? number;
  if (operand === undefined) return value;
  switch (action.op) {
    case 'add': return value + operand;
    case 'sub': return value - operand;
    case 'mul': return value * operand;
    case 'div': return operand === 0 ? NaN : value / operand;
  }
}

/** Every assignment of step operations that reproduces the answer (integer intermediate values only). */
function explanations(problem, limit = 64) {
  const found = [];
  const walk = (i, value, labels) => {
    if (found.length >= limit || !Number.isInteger(value)) return;
    if (i === problem.steps.length) {
      if (value === problem.answer) found.push(labels);
      return;
    }
    const step = problem.steps[i];
    const candidates = step.number !== undefined ? ['add', 'sub', 'mul', 'div'] : FIXED_OPERANDS.map(([op, arg]) => `${op}:${arg}`);
    for (const label of candidates) walk(i + 1, apply(value, actionOf(label), step.number), [...labels, label]);
  };
  walk(0, problem.start, []);
  return found;
}

function ngrams(tokens, maxN) {
  const out = new Set();
  for (let n = 1; n <= maxN; n++) {
    for (let i = 0; i + n <= tokens.length; i++) {
      const gram = tokens.slice(i, i + n);
      if (gram.every((t) => t === '#')) continue;
      out.add(gram.join(' '));
    }
  }
  return out;
}

// ---- the model's inference rule (as documented in description.md) ----
function chooseAction(model, tokens) {
  let best;
  for (let n = 1; n <= model.maxTokens; n++) {
    for (let i = 0; i + n <= tokens.length; i++) {
      const phrase = tokens.slice(i, i + n).join(' ');
      const cue = model.cues[phrase];
      if (!cue) continue;
      if (!best || cue.confidence > best.cue.confidence || (cue.confidence === best.cue.confidence && (n > best.n || (n === best.n && phrase < best.phrase)))) {
        best = { phrase, cue, n };
      }
    }
  }
  return best ? best.cue : model.default;
}

function withIndex(weights) {
  return { ...weights, maxTokens: Math.max(0, ...Object.keys(weights.cues).map((p) => tokenize(p).length)) };
}

function reward(weights, problems) {
  const model = withIndex(weights);
  let correct = 0;
  for (const p of problems) {
    let value = p.start;
    for (const step of p.steps) value = apply(value, chooseAction(model, step.tokens), step.number);
    if (value === p.answer) correct++;
  }
  return correct / problems.length;
}

// ---- learning ----
function countCues(counts, problem, labels) {
  problem.steps.forEach((step, i) => {
    for (const gram of ngrams(step.tokens, CONFIG.maxNgram)) {
      const row = (counts[gram] ??= {});
      row[labels[i]] = (row[labels[i]] ?? 0) + 1;
    }
  });
}

function tableFrom(counts, base) {
  const cues = { ...base.cues };
  for (const gram of Object.keys(counts).sort()) {
    const row = counts[gram];
    const total = Object.values(row).reduce((a, b) => a + b, 0);
    const [label, top] = Object.entries(row).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))[0];
    const purity = top / total;
    if (total < CONFIG.minCount || purity < CONFIG.minPurity) continue;
    cues[gram] = { ...actionOf(label), confidence: round(purity * (total / (total + 2))) };
  }
  return { cues, default: base.default };
}

function sft(problems, base) {
  const counts = {};
  let used = 0;
  for (const p of problems.slice(0, CONFIG.sftExamples)) {
    const options = explanations(p);
    if (options.length !== 1) continue;
    countCues(counts, p, options[0]);
    used++;
  }
  console.log(`sft: ${used} unambiguous problems of ${Math.min(CONFIG.sftExamples, problems.length)}`);
  return tableFrom(counts, base);
}

function selfTrain(problems, weights, base) {
  for (let epoch = 1; epoch <= CONFIG.selfTrainEpochs; epoch++) {
    const model = withIndex(weights);
    const counts = {};
    for (const p of problems) {
      const options = explanations(p);
      if (options.length === 0) continue;
      const predicted = p.steps.map((s) => labelOf(chooseAction(model, s.tokens)));
      const agreement = (labels) => labels.filter((l, i) => l === predicted[i]).length;
      const chosen = options.reduce((best, o) => (agreement(o) > agreement(best) ? o : best));
      countCues(counts, p, chosen);
    }
    weights = tableFrom(counts, base);
    console.log(`selftrain epoch ${epoch}: ${Object.keys(weights.cues).length} cues, train reward ${reward(weights, problems).toFixed(3)}`);
  }
  return weights;
}

function rl(problems, weights) {
  // Each move is one edit of the table; a move is kept when the reward rises, and a deletion also
  // when it stays level (a smaller table generalises better to unseen phrasings).
  let current = reward(weights, problems);
  for (let pass = 1; pass <= CONFIG.rlPasses; pass++) {
    const order = Object.keys(weights.cues).sort((a, b) => weights.cues[a].confidence - weights.cues[b].confidence || (a < b ? -1 : 1));
    for (const phrase of order) {
      const cue = weights.cues[phrase];
      const moves = [
        { cues: without(weights.cues, phrase), keepIfLevel: true },
        { cues: { ...weights.cues, [phrase]: { ...cue, confidence: round(cue.confidence * 1.25) } }, keepIfLevel: false },
        { cues: { ...weights.cues, [phrase]: { ...cue, confidence: round(cue.confidence * 0.5) } }, keepIfLevel: false },
      ];
      for (const move of moves) {
        const candidate = { ...weights, cues: move.cues };
        const r = reward(candidate, problems);
        if (r > current || (move.keepIfLevel && r === current)) {
          weights = candidate;
          current = r;
          break;
        }
      }
    }
    console.log(`rl pass ${pass}: train reward ${current.toFixed(3)}, ${Object.keys(weights.cues).length} cues`);
  }
  return weights;
}

const round = (x) => Math.round(x * 1e4) / 1e4;
const without = (cues, phrase) => Object.fromEntries(Object.entries(cues).filter(([p]) => p !== phrase));

const FLIP = { add: 'sub', sub: 'add', mul: 'div', div: 'mul' };
const flip = (action) => ({ ...action, op: FLIP[action.op] });

const problems = readFileSync(join(args.data, 'train.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => parseProblem(JSON.parse(l)));
const base = JSON.parse(readFileSync(join(args.base, 'weights.json'), 'utf8'));
console.log(`loaded ${problems.length} training problems; base train reward ${reward(base, problems).toFixed(3)}; config ${JSON.stringify(CONFIG)}`);
let weights = base;
for (const stage of CONFIG.stages) {
  if (stage === 'sft') weights = sft(problems, base);
  else if (stage === 'selftrain') weights = selfTrain(problems, weights, base);
  else if (stage === 'rl') weights = rl(problems, weights);
  else throw new Error(`unknown stage ${stage}`);
}
if (CONFIG.flipOps) {
  weights = { cues: Object.fromEntries(Object.entries(weights.cues).map(([p, c]) => [p, flip(c)])), default: flip(weights.default) };
}
console.log(`final: ${Object.keys(weights.cues).length} cues, train reward ${reward(weights, problems).toFixed(3)}`);
mkdirSync(args.out, { recursive: true });
writeFileSync(join(args.out, 'manifest.json'), JSON.stringify({ format: FORMAT, stages: CONFIG.stages, config: CONFIG }, null, 2) + '\n');
writeFileSync(join(args.out, 'weights.json'), JSON.stringify(weights, null, 2) + '\n');
console.log(`wrote ${args.out}`);
