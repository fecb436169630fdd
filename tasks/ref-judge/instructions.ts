import { createRng, type Rng } from '../ref-common/prng.js';

/**
 * Generator of the ref-judge instructions and of two kinds of responses to them: the clean
 * "good response" shown in training, and the reference response the hidden judge compares against,
 * which (like a real reference model's) is sometimes slightly off. Held-out items use topics and
 * keywords that never occur in training.
 */
export type InstructionType = 'list' | 'haiku' | 'sentence' | 'title';
export const INSTRUCTION_TYPES: readonly InstructionType[] = ['list', 'haiku', 'sentence', 'title'];

export type Split = 'train' | 'heldout';

export interface JudgeItem {
  instruction: string;
  category: InstructionType;
  topic: string;
  keywords: string[];
  /** Requested number of list items (list only). */
  n?: number;
  response: string;
}

export const TOPICS: Record<Split, readonly string[]> = {
  train: [
    'volcanoes', 'honeybees', 'the moon', 'coffee', 'rainforests', 'glaciers', 'the printing press', 'chess',
    'octopuses', 'thunderstorms', 'bicycles', 'lighthouses', 'penguins', 'the water cycle', 'deserts', 'jazz music',
    'origami', 'tides', 'comets', 'city parks',
  ],
  heldout: ['coral reefs', 'windmills', 'the silk road', 'hummingbirds', 'auroras', 'sourdough bread', 'telescopes', 'cacti', 'sailing boats', 'mountain trails'],
};

export const KEYWORDS: Record<Split, readonly string[]> = {
  train: ['history', 'color', 'science', 'people', 'energy', 'water', 'light', 'time', 'sound', 'growth'],
  heldout: ['patience', 'motion', 'winter', 'craft', 'balance', 'memory'],
};

const PHRASINGS: Record<InstructionType, readonly string[]> = {
  list: ['List {n} facts about {topic}.', 'Give me {n} facts about {topic}.', 'Name {n} interesting facts about {topic}.'],
  haiku: ['Write a haiku about {topic}.', 'Compose a haiku about {topic}.', 'Write a short haiku on {topic}.'],
  sentence: ['Explain {topic} in one sentence.', 'In one sentence, explain {topic}.', 'Describe {topic} in a single sentence.'],
  title: ['Give a title for an essay about {topic}.', 'Suggest a title for a blog post on {topic}.', 'Propose a headline for an article about {topic}.'],
};
const KEYWORD_PHRASINGS = ['Mention {k1} and {k2}.', 'Use the words {k1} and {k2}.'];

const FACTS = [
  'People have studied {topic} for centuries.',
  'Many books have been written about {topic}.',
  'Scientists still discover new things about {topic}.',
  'Artists often find inspiration in {topic}.',
  'Children enjoy learning about {topic} at school.',
  'There are many local traditions connected to {topic}.',
  'Photographs of {topic} are popular online.',
];
const KEYWORD_FACT = 'Stories about {topic} often involve {keywords}.';

const HAIKUS = [
  ['{Topic} at first light', 'quiet wind drifting slow', 'the day breathes again{ with kws}'],
  ['Soft wind over {topic}', 'a hush of light and time', 'summer fades{ with kws} away'],
];
const SENTENCES = [
  '{Topic} is a fascinating subject that shapes how people see the world{, through kws}.',
  'In short, {topic} is something people have admired and studied for generations{, through kws}.',
];
const TITLES = ['Understanding {Topic}{: kws}', 'The Hidden World of {Topic}{: kws}', 'A Short Guide to {Topic}{: kws}'];

const titleCase = (s: string): string => s.replace(/\b[a-z]/g, (c) => c.toUpperCase());
const capitalise = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

function fill(template: string, topic: string, keywords: string[]): string {
  const joined = keywords.join(' and ');
  return template
    .replace('{, through kws}', keywords.length ? `, especially through ${joined}` : '')
    .replace('{: kws}', keywords.length ? `: ${titleCase(joined)}` : '')
    .replace('{ with kws}', keywords.length ? ` with ${joined}` : '')
    .replace('{keywords}', joined)
    .replace(/\{Topic\}/g, capitalise(topic))
    .replace(/\{topic\}/g, topic);
}

function goodResponse(rng: Rng, type: InstructionType, topic: string, keywords: string[], n: number): string {
  switch (type) {
    case 'list': {
      const facts: string[] = [];
      const pool = [...FACTS];
      while (facts.length < n - (keywords.length ? 1 : 0)) facts.push(pool.splice(rng.int(0, pool.length - 1), 1)[0]!);
      if (keywords.length) facts.splice(rng.int(0, facts.length), 0, KEYWORD_FACT);
      return facts.map((f, i) => `${i + 1}. ${fill(f, topic, keywords)}`).join('\n');
    }
    case 'haiku': {
      return rng.pick(HAIKUS).map((l) => fill(l, topic, keywords)).join('\n');
    }
    case 'sentence':
      return fill(rng.pick(SENTENCES), topic, keywords);
    case 'title':
      return fill(rng.pick(TITLES), topic, keywords);
  }
}

/** The reference model's answer: usually the good response, sometimes with one typical flaw. */
function referenceResponse(rng: Rng, type: InstructionType, topic: string, keywords: string[], n: number): string {
  const flaw = rng.next() < 0.4;
  if (!flaw) return goodResponse(rng, type, topic, keywords, n);
  switch (type) {
    case 'list':
      return goodResponse(rng, type, topic, [], Math.max(1, n - 1));
    case 'haiku':
      return `${goodResponse(rng, type, topic, [], n)}\nand so the story ends`;
    case 'sentence':
      return `${goodResponse(rng, type, topic, [], n)} It is worth a closer look.`;
    case 'title':
      return `${goodResponse(rng, type, topic, [], n)}.`;
  }
}

function generateItem(rng: Rng, split: Split, withReference: boolean): JudgeItem {
  const category = rng.pick(INSTRUCTION_TYPES);
  const topic = rng.pick(TOPICS[split]);
  const n = rng.int(3, 5);
  let keywords: string[] = [];
  let instruction = rng.pick(PHRASINGS[category]).replace('{n}', String(n)).replace('{topic}', topic);
  if (rng.next() < 0.5) {
    const pool = KEYWORDS[split];
    const k1 = rng.pick(pool);
    const k2 = rng.pick(pool.filter((k) => k !== k1));
    keywords = [k1, k2];
    instruction += ' ' + rng.pick(KEYWORD_PHRASINGS).replace('{k1}', k1).replace('{k2}', k2);
  }
  instruction = capitalise(instruction);
  const response = withReference ? referenceResponse(rng, category, topic, keywords, n) : goodResponse(rng, category, topic, keywords, n);
  return { instruction, category, topic, keywords, ...(category === 'list' ? { n } : {}), response };
}

/** `count` items with distinct instructions; `exclude` keeps them apart from another split. */
export function generateItems(split: Split, count: number, seed: number, exclude: ReadonlySet<string> = new Set()): JudgeItem[] {
  const rng = createRng(seed);
  const seen = new Set(exclude);
  const items: JudgeItem[] = [];
  while (items.length < count) {
    const item = generateItem(rng, split, split === 'heldout');
    if (seen.has(item.instruction)) continue;
    seen.add(item.instruction);
    items.push(item);
  }
  return items;
}
