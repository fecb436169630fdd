import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { assertServableCheckpoint, copyBaseModel, DatasetMissingError, datasetDirOf, readDatasetJsonl } from '../paper-common/dataset.js';
import { mapLimit, SERVING_REQUIREMENTS, withServedModel } from '../paper-common/served-chat.js';
import { EvaluatorError, type EvaluationContext, type EvaluationResult, type TaskPack, type TaskPaths } from '../task-pack.js';
import { DSQA_FILE, isSetAnswer, readDsqaCsv, type DsqaItem } from './dataset.js';
import { judgeAnswer } from './judge.js';
import { FORCE_REQUEST, MAX_STEPS, NO_ANSWER, PROTOCOL, reactPrompt, runEpisode } from './react.js';
import { searchBackendFromEnv } from './search.js';
import { splitItems, splitOf } from './split.js';

const TASK_ID = 'deepsearchqa';
const BASE_MODEL = 'base-model';
export const VISIBLE_FILE = 'train.jsonl';
export const PRIVATE_FILE = 'test.jsonl';
/** Episodes in flight: bounded by the search backend's rate limits more than by vLLM. */
const CONCURRENCY = 4;
/** Judge calls in flight (the harness's 8 judge threads). */
const JUDGE_CONCURRENCY = 8;
const { visibleCount: VISIBLE_COUNT, privateCount: PRIVATE_COUNT } = splitOf(PROTOCOL);
const stops = PROTOCOL.request.stop.map((s) => JSON.stringify(s)).join(', ');
const indent = (text: string) => text.split('\n').map((line) => (line ? `    ${line}` : '')).join('\n');

const DESCRIPTION = `# deepsearchqa — multi-step web research questions (L3, ReAct + search, LLM judge)

Improve the base model (\`models/${BASE_MODEL}/\`, a Hugging Face checkpoint) as a search agent on DeepSearchQA.

## Data
\`data/${VISIBLE_FILE}\`: ${VISIBLE_COUNT} DeepSearchQA items, one
\`{"problem", "problem_category", "answer", "answer_type"}\` per line (\`answer_type\` is \`Single Answer\` or
\`Set Answer\`). As in the paper's harness, the 900 items are shuffled as Hugging Face \`datasets\` does with
\`Dataset.shuffle(seed=42)\`; the first ${VISIBLE_COUNT} are yours, the next ${PRIVATE_COUNT} are the private evaluation set.

## Evaluation
As the paper's harness does: your checkpoint is served with vLLM and prompted with raw text completions (no chat
template), temperature ${PROTOCOL.request.temperature}, at most ${PROTOCOL.request.maxTokens} new tokens per step, stop sequences ${stops}, for at most
${MAX_STEPS} steps per question. The prompt starts as

${indent(reactPrompt('<problem>', '<answer_type>'))}

Each reply is stripped and appended after a space. Its action is the first \`Action: search[<query>]\` or
\`Action: answer[<answer>]\` in it. A search appends \`\\nObservation: <top ${PROTOCOL.postprocess.searchResults} result snippets joined by " | ">\\nThought:\`.
A reply without an action gets \`\\nAction: answer[\` appended and one more completion (at most
${FORCE_REQUEST.maxTokens} tokens, stop \`]\`), which is the answer. After ${MAX_STEPS} steps the last answer written is taken, else
\`${NO_ANSWER}\`.

Each answer is graded by ONE call to an LLM judge comparing it with the gold answer (a \`Set Answer\` must contain
all gold items; order and minor wording do not matter); the reply "correct" counts. If the judge call fails,
string matching decides. Score = accuracy × 100.

## Submitting
Save a full model directory (\`save_pretrained\` weights, \`config.json\` and the tokenizer; merge LoRA adapters
first) under \`output/\` and submit its path.
`;

async function materialize(paths: TaskPaths): Promise<void> {
  const datasetDir = datasetDirOf(TASK_ID, paths);
  const items = await readDsqaCsv(datasetDir);
  const expected = PROTOCOL.split.kind === 'rows' ? PROTOCOL.split.expectedRows[DSQA_FILE] : undefined;
  if (items.length !== expected) {
    throw new DatasetMissingError(`${join(datasetDir, DSQA_FILE)} holds ${items.length} items; the paper's split orders the ${expected} of the upstream release: run \`a2rl data fetch ${TASK_ID}\``);
  }
  items.forEach((item, i) => {
    if (item.problem.trim() === '' || item.answer.trim() === '') throw new DatasetMissingError(`${join(datasetDir, DSQA_FILE)} record ${i + 1} has an empty problem or answer`);
  });
  const split = splitItems(items, PROTOCOL);
  await Promise.all([mkdir(paths.dataDir, { recursive: true }), mkdir(paths.privateDir, { recursive: true })]);
  await writeFile(join(paths.dataDir, VISIBLE_FILE), toJsonl(split.visible));
  await writeFile(join(paths.privateDir, PRIVATE_FILE), toJsonl(split.private));
  await copyBaseModel(TASK_ID, datasetDir, paths.modelDir);
}

const toJsonl = (rows: readonly object[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';

async function evaluate(checkpointDir: string, privateDir: string, signal?: AbortSignal, ctx?: EvaluationContext): Promise<EvaluationResult> {
  await assertServableCheckpoint(checkpointDir);
  const items = await readDatasetJsonl<DsqaItem>(TASK_ID, privateDir, PRIVATE_FILE);
  const judge = ctx?.judge;
  if (ctx && !judge) throw new EvaluatorError('deepsearchqa needs an LLM judge: set A2RL_JUDGE_URL, A2RL_JUDGE_MODEL (and A2RL_JUDGE_API_KEY if needed)');
  const search = searchBackendFromEnv();
  const episodes = await withServedModel(TASK_ID, ctx, checkpointDir, signal, (model) =>
    mapLimit(items, CONCURRENCY, (item) => runEpisode(model, item.problem, item.answer_type, search, signal)),
  );
  // Every question is judged, an "I don't know" included, as in the harness.
  const judgements = await mapLimit(items, JUDGE_CONCURRENCY, (item, i) => judgeAnswer(judge!, item, episodes[i]!.answer, signal));

  const total = items.length;
  const correct = judgements.filter((j) => j.correct).length;
  const byType = (set: boolean) => {
    const idx = items.flatMap((item, i) => (isSetAnswer(item) === set ? [i] : []));
    return { correct: idx.filter((i) => judgements[i]!.correct).length, total: idx.length };
  };
  const sum = (pick: (i: number) => number) => items.reduce((acc, _, i) => acc + pick(i), 0);
  const accuracy = total === 0 ? 0 : correct / total;
  return {
    score: Math.round(accuracy * 10000) / 100,
    details: {
      accuracy,
      correct,
      total,
      single: byType(false),
      set: byType(true),
      unanswered: episodes.filter((e) => !e.answered).length,
      steps: sum((i) => episodes[i]!.steps),
      meanSteps: total === 0 ? 0 : sum((i) => episodes[i]!.steps) / total,
      searches: sum((i) => episodes[i]!.searches),
      searchErrors: sum((i) => episodes[i]!.searchErrors),
      forcedAnswers: sum((i) => episodes[i]!.forcedAnswers),
      searchBackend: search.name,
      judgeCalls: total,
      judgeFallbacks: judgements.filter((j) => j.fallback).length,
    },
  };
}

export const deepsearchqa: TaskPack = {
  id: TASK_ID,
  level: 3,
  title: 'DeepSearchQA multi-step web research (ReAct + search, LLM judge, served with vLLM)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'deepsearchqa-eval-2',
  protocol: PROTOCOL,
  description: DESCRIPTION,
  requirements: [
    ...SERVING_REQUIREMENTS,
    { kind: 'dataset' },
    { kind: 'judge' },
    { kind: 'search' },
  ],
  materialize,
  evaluate,
};
