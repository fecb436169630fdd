import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { evaluateOffLoop } from '../ref-common/off-loop.js';
import { assertManifest, readCheckpointJson, readJsonl, writeCheckpoint, writeJsonl } from '../ref-common/checkpoint-files.js';
import type { EvaluationResult, TaskPack, TaskPaths } from '../task-pack.js';
import { loadArithModel, solve } from './model.js';
import { generateProblems } from './problems.js';

export const REF_ARITH_FORMAT = 'a2rl-ref/ref-arith/1';
const BASE_MODEL = 'arith-cue-base';
const TRAIN_SIZE = 600;
const TEST_SIZE = 300;
const TRAIN_SEED = 0xa417;
const TEST_SEED = 0x7e57;

interface Row {
  question: string;
  /** GSM8K style: `#### <n>`. */
  answer: string;
}

const gsm8kAnswer = (n: number): string => `#### ${n}`;

function parseGsm8kAnswer(answer: string): number {
  const match = /####\s*(-?\d+)\s*$/.exec(answer);
  if (!match) throw new Error(`malformed answer ${JSON.stringify(answer)}`);
  return Number(match[1]);
}

/** The base model knows four cues and treats every other step as an addition. */
const BASE_WEIGHTS = {
  cues: {
    found: { op: 'add', confidence: 0.9 },
    'gave away': { op: 'sub', confidence: 0.9 },
    lost: { op: 'sub', confidence: 0.9 },
    sold: { op: 'sub', confidence: 0.9 },
  },
  default: { op: 'add' },
};

const DESCRIPTION = `# ref-arith — multi-step arithmetic word problems (L1, exact match)

Each problem starts with a quantity and applies 2–4 steps, each signalled only by a worded cue
("found 5 more", "gave away 3", "tripled", "split equally among 4 friends and kept one share").
The answer is the final whole number. Score = exact-match accuracy on a held-out set × 100.
The held-out problems use names, objects, sentence openings and phrasings you will not see in
training; the cue words they rely on do appear in the training data.

## Data
\`data/train.jsonl\`: ${TRAIN_SIZE} lines \`{"question": "...", "answer": "#### <n>"}\` (GSM8K style).

## Model (\`models/${BASE_MODEL}/\`)
A checkpoint is a directory with
- \`manifest.json\`: \`{"format": "${REF_ARITH_FORMAT}"}\` (other fields are free);
- \`weights.json\`: \`{"cues": {"<phrase>": {"op": "add"|"sub"|"mul"|"div", "arg"?: <number>, "confidence": <number>}, ...},
  "default": {"op": ..., "arg"?: <number>}}\`.

How the model answers: the question is split into sentences after \`.\`, \`?\` or \`!\`. The first sentence's first
number is the start value. Every later sentence, up to the one ending in \`?\`, is a step. A sentence is
tokenised into lowercase words and numbers (every number becomes the token \`#\`); a cue phrase is
tokenised the same way and matches when its tokens occur contiguously. Among the matching cues the
highest \`confidence\` wins (ties: more tokens, then alphabetical); with none, \`default\` applies. The
operand is the cue's \`arg\` if given, else the first number of the sentence (no number and no arg: the step
is skipped). Operations apply in order; the final value must equal the answer exactly.

The base model knows four cues and adds by default, so it solves few problems.
Submit a checkpoint directory under \`output/\`; an unloadable one is rejected with a message saying why.
`;

/** Scores a checkpoint on this thread: the pack's `evaluate` runs it in a worker (ref-common/off-loop.ts). */
export async function evaluateRefArith(checkpointDir: string, privateDir: string, signal?: AbortSignal): Promise<EvaluationResult> {
  await assertManifest(checkpointDir, REF_ARITH_FORMAT);
  const model = loadArithModel(await readCheckpointJson(checkpointDir, 'weights.json'));
  const rows = await readJsonl<Row & { steps: number }>(join(privateDir, 'test.jsonl'));
  signal?.throwIfAborted();
  let correct = 0;
  const bySteps: Record<string, { correct: number; total: number }> = {};
  for (const row of rows) {
    const ok = solve(model, row.question) === parseGsm8kAnswer(row.answer);
    const bucket = (bySteps[String(row.steps)] ??= { correct: 0, total: 0 });
    bucket.total++;
    if (ok) {
      bucket.correct++;
      correct++;
    }
  }
  const accuracy = rows.length === 0 ? 0 : correct / rows.length;
  return {
    score: Math.round(accuracy * 10000) / 100,
    details: {
      accuracy,
      correct,
      total: rows.length,
      accuracyBySteps: Object.fromEntries(Object.entries(bySteps).map(([k, b]) => [k, b.correct / b.total])),
      cues: model.cues.size,
    },
  };
}

async function materialize(paths: TaskPaths): Promise<void> {
  const train = generateProblems('train', TRAIN_SIZE, TRAIN_SEED);
  const test = generateProblems('heldout', TEST_SIZE, TEST_SEED, new Set(train.map((p) => p.question)));
  await Promise.all([mkdir(paths.dataDir, { recursive: true }), mkdir(paths.privateDir, { recursive: true })]);
  await writeJsonl(join(paths.dataDir, 'train.jsonl'), train.map((p) => ({ question: p.question, answer: gsm8kAnswer(p.answer) })));
  await writeJsonl(
    join(paths.privateDir, 'test.jsonl'),
    test.map((p) => ({ question: p.question, answer: gsm8kAnswer(p.answer), steps: p.steps })),
  );
  await writeCheckpoint(paths.modelDir, { format: REF_ARITH_FORMAT, name: BASE_MODEL }, 'weights.json', BASE_WEIGHTS);
}

export const refArith: TaskPack = {
  reference: true,
  id: 'ref-arith',
  level: 1,
  title: 'Multi-step arithmetic word problems with worded cues (exact match)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'ref-arith-eval-1',
  description: DESCRIPTION,
  materialize,
  evaluate: (checkpointDir, privateDir, signal) => evaluateOffLoop('ref-arith', checkpointDir, privateDir, signal),
};
