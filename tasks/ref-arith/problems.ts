import { createRng, type Rng } from '../ref-common/prng.js';
import type { ArithOp } from './model.js';

/**
 * Generator of the ref-arith word problems. Each problem is a start quantity followed by 2–4 step
 * sentences; each step's operation is signalled only by a worded cue ("found 5 more", "halved").
 * The held-out split uses names, objects, sentence frames and cue phrasings that never occur in the
 * training split, but every cue word it relies on does occur there, so a model that learned the
 * cue words (rather than whole training sentences) generalises.
 */
export interface ArithProblem {
  question: string;
  answer: number;
  steps: number;
}

export type Split = 'train' | 'heldout';

interface CueFamily {
  op: ArithOp;
  /** Fixed operand ("doubled" → 2); absent when the operand is the step's number. */
  arg?: number;
  train: string[];
  heldout: string[];
}

// {n} = the step's number, {obj} = the object noun, {pos} = possessive pronoun.
const CUES: readonly CueFamily[] = [
  { op: 'add', train: ['found {n} more {obj}'], heldout: ['found another {n} {obj} in a drawer'] },
  { op: 'add', train: ['bought {n} more {obj}'], heldout: ['bought {n} extra {obj}'] },
  { op: 'add', train: ['received {n} {obj} as a gift'], heldout: ['received {n} {obj} from a cousin'] },
  { op: 'add', train: ['collected {n} more {obj}'], heldout: ['collected {n} {obj} on a walk'] },
  { op: 'add', train: ['won {n} {obj} at the fair'], heldout: ['won {n} {obj} in a raffle'] },
  { op: 'add', train: ['was given {n} {obj}'], heldout: ['was given another {n} {obj}'] },
  { op: 'add', train: ['picked up {n} {obj} at school'], heldout: [] },
  { op: 'sub', train: ['gave away {n} {obj}'], heldout: ['gave {n} {obj} away to friends'] },
  { op: 'sub', train: ['lost {n} {obj}'], heldout: ['lost {n} of {pos} {obj}'] },
  { op: 'sub', train: ['sold {n} {obj}'], heldout: ['sold {n} {obj} to a neighbor'] },
  { op: 'sub', train: ['donated {n} {obj} to the school'], heldout: ['donated {n} {obj} to charity'] },
  { op: 'sub', train: ['traded away {n} {obj}'], heldout: [] },
  { op: 'sub', train: ['misplaced {n} {obj}'], heldout: ['misplaced {n} of the {obj}'] },
  { op: 'sub', train: ['used up {n} {obj}'], heldout: [] },
  { op: 'mul', train: ['ended up with {n} times as many {obj}'], heldout: ['had {n} times as many {obj} as before'] },
  { op: 'mul', train: ['made {pos} pile of {obj} {n} times bigger'], heldout: [] },
  { op: 'mul', arg: 2, train: ['doubled {pos} {obj}'], heldout: ['doubled the number of {obj}'] },
  { op: 'mul', arg: 3, train: ['tripled {pos} {obj}'], heldout: ['tripled the pile of {obj}'] },
  { op: 'mul', arg: 2, train: ['had twice as many {obj} as before'], heldout: ['ended up with twice as many {obj}'] },
  { op: 'div', train: ['split {pos} {obj} equally among {n} friends and kept one share'], heldout: ['split {pos} {obj} evenly into {n} piles and kept one pile'] },
  { op: 'div', train: ['divided {pos} {obj} into {n} equal groups and kept one group'], heldout: ['divided the {obj} into {n} equal bags and kept one bag'] },
  { op: 'div', arg: 2, train: ['halved {pos} {obj}'], heldout: ['halved the number of {obj}'] },
  { op: 'div', arg: 2, train: ['gave half of {pos} {obj} to a friend'], heldout: ['gave half of the {obj} to {pos} brother'] },
];

interface Person {
  name: string;
  pro: string;
  pos: string;
}

const she = (name: string): Person => ({ name, pro: 'she', pos: 'her' });
const he = (name: string): Person => ({ name, pro: 'he', pos: 'his' });

/** Exported so the specs can prove the held-out names and objects never reach the training data. */
export const PEOPLE: Record<Split, readonly Person[]> = {
  train: [
    she('Mia'), he('Liam'), she('Ava'), he('Noah'), she('Emma'), he('Lucas'), she('Zoe'), he('Ethan'),
    she('Ruby'), he('Omar'), she('Lena'), he('Hugo'), she('Nora'), he('Felix'), she('Ivy'), he('Jonas'),
  ],
  heldout: [she('Priya'), he('Diego'), she('Yuki'), he('Kwame'), she('Ingrid'), he('Tariq'), she('Anouk'), he('Mateo')],
};

export const OBJECTS: Record<Split, readonly string[]> = {
  train: ['marbles', 'stickers', 'stamps', 'coins', 'pencils', 'seashells', 'beads', 'postcards', 'buttons', 'crayons'],
  heldout: ['acorns', 'pebbles', 'ribbons', 'feathers', 'badges', 'magnets'],
};

const FRAMES: Record<Split, readonly string[]> = {
  train: ['Then {pro} {p}.', 'Next, {name} {p}.', 'After that, {pro} {p}.', '{name} {p}.'],
  heldout: ['Later that day, {pro} {p}.', 'On Sunday, {name} {p}.', 'A week later, {pro} {p}.'],
};

const OPENINGS = ['{name} had {n} {obj}.', '{name} has {n} {obj}.', '{name} started with {n} {obj}.'];
const QUESTIONS = ['How many {obj} does {name} have now?', 'How many {obj} does {pro} have at the end?'];
const OP_WEIGHTS: Record<ArithOp, number> = { add: 3, sub: 3, mul: 2, div: 2 };
const MAX_VALUE = 1000;

const fill = (template: string, slots: Record<string, string>): string =>
  template.replace(/\{(\w+)\}/g, (_, key: string) => slots[key] ?? `{${key}}`);

const capitalise = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

/** One step applied to `value`, or undefined when this cue cannot apply (keeps every value an integer ≤ MAX_VALUE). */
function applyCue(rng: Rng, cue: CueFamily, value: number): { operand: number; result: number } | undefined {
  switch (cue.op) {
    case 'add': {
      const n = rng.int(2, 25);
      return value + n <= MAX_VALUE ? { operand: n, result: value + n } : undefined;
    }
    case 'sub': {
      if (value < 4) return undefined;
      const n = rng.int(2, Math.min(25, value - 1));
      return { operand: n, result: value - n };
    }
    case 'mul': {
      const n = cue.arg ?? rng.int(2, 4);
      return value * n <= MAX_VALUE ? { operand: n, result: value * n } : undefined;
    }
    case 'div': {
      const options = cue.arg !== undefined ? [cue.arg] : [2, 3, 4, 5];
      const fits = options.filter((n) => value % n === 0 && value / n >= 1);
      if (fits.length === 0) return undefined;
      const n = rng.pick(fits);
      return { operand: n, result: value / n };
    }
  }
}

function generateProblem(rng: Rng, split: Split): ArithProblem {
  const person = rng.pick(PEOPLE[split]);
  const obj = rng.pick(OBJECTS[split]);
  const frames = split === 'train' ? FRAMES.train : [...FRAMES.train, ...FRAMES.heldout];
  const stepCount = rng.weighted({ '2': 4, '3': 4, '4': 2 });
  let value = rng.int(4, 60);
  const sentences = [fill(rng.pick(OPENINGS), { name: person.name, n: String(value), obj })];
  for (let i = 0; i < Number(stepCount); i++) {
    for (;;) {
      const op = rng.weighted(OP_WEIGHTS);
      const family = rng.pick(CUES.filter((c) => c.op === op));
      const phrasings = split === 'heldout' && family.heldout.length > 0 && rng.next() < 0.6 ? family.heldout : family.train;
      const step = applyCue(rng, family, value);
      if (!step) continue;
      const phrase = fill(rng.pick(phrasings), { n: String(step.operand), obj, pos: person.pos });
      sentences.push(capitalise(fill(rng.pick(frames), { pro: person.pro, name: person.name, p: phrase })));
      value = step.result;
      break;
    }
  }
  sentences.push(fill(rng.pick(QUESTIONS), { obj, name: person.name, pro: person.pro }));
  return { question: sentences.join(' '), answer: value, steps: Number(stepCount) };
}

/** `count` distinct problems of a split; the same seed always yields the same list. */
export function generateProblems(split: Split, count: number, seed: number, exclude: ReadonlySet<string> = new Set()): ArithProblem[] {
  const rng = createRng(seed);
  const seen = new Set(exclude);
  const problems: ArithProblem[] = [];
  while (problems.length < count) {
    const problem = generateProblem(rng, split);
    if (seen.has(problem.question)) continue;
    seen.add(problem.question);
    problems.push(problem);
  }
  return problems;
}
