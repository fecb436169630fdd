import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { evaluateOffLoop } from '../ref-common/off-loop.js';
import { assertManifest, readCheckpointJson, readJsonl, writeCheckpoint, writeJsonl } from '../ref-common/checkpoint-files.js';
import type { EvaluationResult, TaskPack, TaskPaths } from '../task-pack.js';
import { generateItems, INSTRUCTION_TYPES, type JudgeItem } from './instructions.js';
import { lengthControlledWinRate, preference, wordCount } from './judge.js';
import { loadJudgeModel, respond } from './model.js';

export const REF_JUDGE_FORMAT = 'a2rl-ref/ref-judge/1';
const BASE_MODEL = 'judge-template-base';
const TRAIN_SIZE = 400;
const TEST_SIZE = 200;
const TRAIN_SEED = 0x10d6e;
const TEST_SEED = 0x5ec2e7;

const BASE_WEIGHTS = {
  router: {},
  default_type: 'generic',
  templates: { generic: 'Here is a response about {topic}. I hope it helps.' },
  list_items: [],
  topic_markers: ['about'],
  topic_stops: ['.'],
  keyword_markers: [],
};

const DESCRIPTION = `# ref-judge — instruction following judged against a reference (L2, AlpacaEval-style)

Instructions ask for a list of N facts, a haiku, a one-sentence explanation or a title about a topic,
sometimes asking to mention given words. A hidden judge compares your model's response with a
reference response for each held-out instruction (unseen topics and words) and decides which it
prefers (format compliance, coverage of the topic and requested words, defects, and — like real LLM
judges — a bias for longer answers). Reported: win rate and length-controlled (LC) win rate, where a
logistic regression of the judge's preference on the length difference removes the length effect as
in AlpacaEval 2.0. **Score = LC win rate × 100.**

## Data
\`data/train.jsonl\`: ${TRAIN_SIZE} lines \`{"instruction", "category": "list"|"haiku"|"sentence"|"title", "topic",
"keywords": [...], "response"}\` where \`topic\` and \`keywords\` are the instruction's subject and requested words and
\`response\` is a good answer.

## Model (\`models/${BASE_MODEL}/\`)
A checkpoint is a directory with \`manifest.json\` (\`{"format": "${REF_JUDGE_FORMAT}"}\`) and \`weights.json\`:
\`\`\`
{ "router": {"<phrase>": {"type": "<type>", "weight": <number>}}, "default_type": "<type>",
  "templates": {"<type>": "<template>"}, "list_items": ["<template>", ...],
  "topic_markers": ["<phrase>", ...], "topic_stops": ["<substring>", ...], "keyword_markers": ["<phrase>", ...] }
\`\`\`
How the model answers an instruction:
- Routing: the instruction is tokenised into lowercase words and numbers; each router phrase whose tokens
  occur contiguously adds its weight to its type; the heaviest type wins (ties: alphabetical); with none,
  \`default_type\`. A type without a template uses \`default_type\`'s template.
- Slots: \`{topic}\` = the text after the earliest topic marker (matched as whole words, case-insensitive)
  up to the earliest topic stop (plain case-insensitive substring), trailing punctuation removed, or empty.
  \`{keywords}\` = the text after the earliest keyword marker up to the next \`.\`, split on commas and
  "and", joined with " and ". \`{n}\` = the first number in the instruction (default 3, at most 10).
  \`{Topic}\`/\`{Keywords}\` are title-cased. \`{items}\` = n lines \`k. <list_items[(k-1) mod len]>\`.
- \`[[ … ]]\` marks an optional part of a template, dropped when a slot inside it is empty.

The base model routes everything to one generic sentence, so it loses almost every comparison.
`;

interface PrivateRow extends Omit<JudgeItem, 'response'> {
  reference: string;
}

/** Scores a checkpoint on this thread: the pack's `evaluate` runs it in a worker (ref-common/off-loop.ts). */
export async function evaluateRefJudge(checkpointDir: string, privateDir: string, signal?: AbortSignal): Promise<EvaluationResult> {
  await assertManifest(checkpointDir, REF_JUDGE_FORMAT);
  const model = loadJudgeModel(await readCheckpointJson(checkpointDir, 'weights.json'));
  const rows = await readJsonl<PrivateRow>(join(privateDir, 'test.jsonl'));
  signal?.throwIfAborted();
  const preferences: number[] = [];
  const lengthDiffs: number[] = [];
  const byType: Record<string, number[]> = {};
  let modelWords = 0;
  for (const row of rows) {
    const response = respond(model, row.instruction);
    const p = preference(row, response, row.reference);
    preferences.push(p);
    lengthDiffs.push(wordCount(response) - wordCount(row.reference));
    (byType[row.category] ??= []).push(p);
    modelWords += wordCount(response);
  }
  const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
  const winRate = mean(preferences);
  const { lcWinRate, lengthCoefficient } = lengthControlledWinRate(preferences, lengthDiffs);
  const round = (x: number): number => Math.round(x * 10000) / 100;
  return {
    score: round(lcWinRate),
    details: {
      winRate: round(winRate),
      lcWinRate: round(lcWinRate),
      lengthCoefficient: Math.round(lengthCoefficient * 1000) / 1000,
      meanWords: Math.round((modelWords / Math.max(1, rows.length)) * 10) / 10,
      winRateByType: Object.fromEntries(INSTRUCTION_TYPES.map((t) => [t, round(mean(byType[t] ?? []))])),
      total: rows.length,
    },
  };
}

async function materialize(paths: TaskPaths): Promise<void> {
  const train = generateItems('train', TRAIN_SIZE, TRAIN_SEED);
  const test = generateItems('heldout', TEST_SIZE, TEST_SEED, new Set(train.map((i) => i.instruction)));
  await Promise.all([mkdir(paths.dataDir, { recursive: true }), mkdir(paths.privateDir, { recursive: true })]);
  await writeJsonl(join(paths.dataDir, 'train.jsonl'), train.map((i) => ({ instruction: i.instruction, category: i.category, topic: i.topic, keywords: i.keywords, response: i.response })));
  await writeJsonl(
    join(paths.privateDir, 'test.jsonl'),
    test.map(({ response, ...rest }): PrivateRow => ({ ...rest, reference: response })),
  );
  await writeCheckpoint(paths.modelDir, { format: REF_JUDGE_FORMAT, name: BASE_MODEL }, 'weights.json', BASE_WEIGHTS);
}

export const refJudge: TaskPack = {
  reference: true,
  id: 'ref-judge',
  level: 2,
  title: 'Instruction following judged against a reference (win rate, length-controlled win rate)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'ref-judge-eval-1',
  description: DESCRIPTION,
  materialize,
  evaluate: (checkpointDir, privateDir, signal) => evaluateOffLoop('ref-judge', checkpointDir, privateDir, signal),
};
