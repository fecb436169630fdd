import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { assertServableCheckpoint, copyBaseModel, DatasetMissingError, datasetDirOf, readDatasetJsonl } from '../paper-common/dataset.js';
import { chatCompletion, mapLimit, SERVING_REQUIREMENTS, withServedModel, type ChatMessage } from '../paper-common/served-chat.js';
import type { EvaluationContext, EvaluationResult, TaskPack, TaskPaths } from '../task-pack.js';
import { extractAnswer, goldAnswer, isCorrect } from './extract.js';

const TASK_ID = 'gsm8k';
/** Files of the fetched dataset (`$A2RL_HOME/datasets/gsm8k/`), GSM8K's own `main` config as JSON Lines. */
export const GSM8K_TRAIN_FILE = 'train.jsonl';
export const GSM8K_TEST_FILE = 'test.jsonl';
const BASE_MODEL = 'base-model';
const MAX_TOKENS = 512;
/** Requests in flight against the served model (vLLM batches them). */
const CONCURRENCY = 16;

export interface Gsm8kRow {
  question: string;
  answer: string;
}

/** The evaluation prompt: one user turn, rendered with the model's chat template by the server. */
export function gsm8kPrompt(question: string): ChatMessage[] {
  return [{ role: 'user', content: `${question}\n\nSolve the problem step by step. Put the final answer after "####".` }];
}

const DESCRIPTION = `# gsm8k — grade-school math word problems (L1, exact match)

Improve the base model (\`models/${BASE_MODEL}/\`, a Hugging Face checkpoint) at solving GSM8K problems.

## Data
\`data/train.jsonl\`: the GSM8K train split, one \`{"question": "...", "answer": "<worked solution>\\n#### <number>"}\` per line.

## Evaluation
The held-out GSM8K test split (1,319 problems) is answered by your checkpoint served with vLLM
(OpenAI-compatible chat completions, the model's own chat template, temperature 0, at most ${MAX_TOKENS} new tokens).
Each problem is one user message:

    <question>

    Solve the problem step by step. Put the final answer after "####".

The predicted answer is the first number after the last \`####\` of the reply, else the last number in the
reply; \`$\`, thousands commas and a zero decimal part are ignored (\`$1,200.00\` = \`1200\`). It must equal
the reference number exactly. Score = accuracy × 100.

## Submitting
Save a full model directory (\`save_pretrained\` weights, \`config.json\` and the tokenizer; merge LoRA adapters
first) under \`output/\` and submit its path.
`;

async function materialize(paths: TaskPaths): Promise<void> {
  const datasetDir = datasetDirOf(TASK_ID, paths);
  const train = await readRows(datasetDir, GSM8K_TRAIN_FILE);
  const test = await readRows(datasetDir, GSM8K_TEST_FILE);
  await Promise.all([mkdir(paths.dataDir, { recursive: true }), mkdir(paths.privateDir, { recursive: true })]);
  await writeFile(join(paths.dataDir, 'train.jsonl'), toJsonl(train));
  await writeFile(join(paths.privateDir, 'test.jsonl'), toJsonl(test));
  await copyBaseModel(TASK_ID, datasetDir, paths.modelDir);
}

async function readRows(datasetDir: string, file: string): Promise<Gsm8kRow[]> {
  const rows = await readDatasetJsonl<Gsm8kRow>(TASK_ID, datasetDir, file);
  if (rows.length === 0) throw new DatasetMissingError(`${join(datasetDir, file)} is empty: run \`a2rl data fetch ${TASK_ID}\``);
  for (const [i, row] of rows.entries()) {
    if (typeof row?.question !== 'string' || typeof row.answer !== 'string' || !/####\s*\S/.test(row.answer)) {
      throw new DatasetMissingError(`${join(datasetDir, file)} line ${i + 1} is not a GSM8K row {question, answer: "... #### <n>"}`);
    }
  }
  // Only the two fields, in GSM8K's order: the visible file is exactly the dataset's content.
  return rows.map((r) => ({ question: r.question, answer: r.answer }));
}

const toJsonl = (rows: readonly object[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';

async function evaluate(checkpointDir: string, privateDir: string, signal?: AbortSignal, ctx?: EvaluationContext): Promise<EvaluationResult> {
  await assertServableCheckpoint(checkpointDir);
  const rows = await readDatasetJsonl<Gsm8kRow>(TASK_ID, privateDir, 'test.jsonl');
  const golds = rows.map((r) => goldAnswer(r.answer));
  const predictions = await withServedModel(TASK_ID, ctx, checkpointDir, signal, (model) =>
    mapLimit(rows, CONCURRENCY, async (row) => extractAnswer(await chatCompletion(model, gsm8kPrompt(row.question), { maxTokens: MAX_TOKENS, signal }))),
  );
  const correct = predictions.filter((p, i) => isCorrect(p, golds[i]!)).length;
  const accuracy = rows.length === 0 ? 0 : correct / rows.length;
  return {
    score: Math.round(accuracy * 10000) / 100,
    details: { accuracy, correct, total: rows.length, unanswered: predictions.filter((p) => p === null).length },
  };
}

export const gsm8k: TaskPack = {
  id: TASK_ID,
  level: 1,
  title: 'GSM8K grade-school math (exact match, served with vLLM)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'gsm8k-eval-1',
  description: DESCRIPTION,
  requirements: [...SERVING_REQUIREMENTS, { kind: 'dataset' }],
  materialize,
  evaluate,
};
