import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { assertServableCheckpoint, copyBaseModel, DatasetMissingError, datasetDirOf, readDatasetJsonl } from '../paper-common/dataset.js';
import { fillTemplate, loadProtocol, protocolString, ProtocolError, type EvalProtocol } from '../paper-common/protocol.js';
import { generate, mapLimit, SERVING_REQUIREMENTS, withServedModel, type ChatMessage } from '../paper-common/served-chat.js';
import type { EvaluationContext, EvaluationResult, TaskPack, TaskPaths } from '../task-pack.js';
import { extractAnswer, goldAnswer, isCorrect, NO_PREDICTION } from './extract.js';

const TASK_ID = 'gsm8k';
/** Files of the fetched dataset (`$A2RL_HOME/datasets/gsm8k/`), GSM8K's own `main` config as JSON Lines. */
export const GSM8K_TRAIN_FILE = 'train.jsonl';
export const GSM8K_TEST_FILE = 'test.jsonl';
const BASE_MODEL = 'base-model';
/** tasks/gsm8k/protocol.json: OpenCompass gsm8k_gen_1d7fe4 as the paper's harness runs it. */
export const PROTOCOL: EvalProtocol = loadProtocol(TASK_ID);
const USER_TEMPLATE = protocolString(PROTOCOL, 'prompt', 'userTemplate');
const CUT_AT = protocolString(PROTOCOL, 'postprocess', 'predictionCutAt');
const FEW_SHOT = fewShot(PROTOCOL);
/** Requests in flight against the served model (vLLM batches them). */
const CONCURRENCY = 16;

export interface Gsm8kRow {
  question: string;
  answer: string;
}

function fewShot(protocol: EvalProtocol): { question: string; answer: string }[] {
  const shots = protocol.prompt.fewShot;
  if (!Array.isArray(shots) || !shots.every((x) => typeof x?.question === 'string' && typeof x?.answer === 'string')) {
    throw new ProtocolError('tasks/gsm8k/protocol.json: prompt.fewShot must be [{question, answer}]');
  }
  return shots as { question: string; answer: string }[];
}

/** The evaluation messages: the fixed few-shot rounds (user question, assistant worked answer), then the question. */
export function gsm8kPrompt(question: string): ChatMessage[] {
  return [
    ...FEW_SHOT.flatMap((shot): ChatMessage[] => [
      { role: 'user', content: fillTemplate(USER_TEMPLATE, { question: shot.question }) },
      { role: 'assistant', content: shot.answer },
    ]),
    { role: 'user', content: fillTemplate(USER_TEMPLATE, { question }) },
  ];
}

const indent = (text: string) => text.split('\n').map((line) => (line ? `    ${line}` : '')).join('\n');

const DESCRIPTION = `# gsm8k — grade-school math word problems (L1, exact match)

Improve the base model (\`models/${BASE_MODEL}/\`, a Hugging Face checkpoint) at solving GSM8K problems.

## Data
\`data/train.jsonl\`: the GSM8K train split, one \`{"question": "...", "answer": "<worked solution>\\n#### <number>"}\` per line.

## Evaluation
As the paper's harness does (OpenCompass \`gsm8k_gen_1d7fe4\`): the held-out GSM8K test split (1,319 problems) is
answered by your checkpoint served with vLLM (chat completions, the model's own chat template, temperature
${PROTOCOL.request.temperature}, at most ${PROTOCOL.request.maxTokens} new tokens). Each problem is a ${FEW_SHOT.length}-shot conversation: ${FEW_SHOT.length} fixed
worked examples as earlier user/assistant turns, then the problem. Every user turn is

${indent(USER_TEMPLATE.replace('{question}', '<question>'))}

and each example's assistant turn is a worked solution ending \`The answer is <number>\`.

The prediction is taken as OpenCompass does: \`<think>…</think>\` reasoning is dropped, the reply is cut at its
first \`${CUT_AT}\`, and the last number left (\`-?\\d+\\.\\d+|-?\\d+\`; a comma splits a number) is the answer (none:
wrong). It is correct when it equals the reference (the text after \`#### \`, commas removed) within 1e-6.
Score = accuracy × 100.

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
  const references = rows.map((r) => goldAnswer(r.answer));
  const replies = await withServedModel(TASK_ID, ctx, checkpointDir, signal, (model) =>
    mapLimit(rows, CONCURRENCY, (row) => generate(model, PROTOCOL.request, { messages: gsm8kPrompt(row.question) }, { signal })),
  );
  const items = references.map((reference, index) => gradeReply(index, replies[index]!, reference));
  const correct = items.filter((item) => item.correct).length;
  const accuracy = rows.length === 0 ? 0 : correct / rows.length;
  return {
    score: Math.round(accuracy * 10000) / 100,
    details: { accuracy, correct, total: rows.length, unanswered: items.filter((item) => item.prediction === NO_PREDICTION).length },
    items,
  };
}

/** One test row as graded: the raw reply, the prediction OpenCompass's post-processing takes from it, the reference and the verdict. */
function gradeReply(index: number, reply: string, reference: string) {
  const prediction = extractAnswer(reply, CUT_AT);
  return { index, reply, prediction, reference, correct: isCorrect(prediction, reference) };
}

export const gsm8k: TaskPack = {
  id: TASK_ID,
  level: 1,
  title: 'GSM8K grade-school math (exact match, served with vLLM)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'gsm8k-eval-2',
  protocol: PROTOCOL,
  description: DESCRIPTION,
  requirements: [...SERVING_REQUIREMENTS, { kind: 'dataset' }],
  materialize,
  evaluate,
};
