import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { assertServableCheckpoint, copyBaseModel, DatasetMissingError, datasetDirOf, readDatasetJsonl } from '../paper-common/dataset.js';
import { mapLimit, SERVING_REQUIREMENTS, withServedModel } from '../paper-common/served-chat.js';
import { EvaluatorError, type EvaluationContext, type EvaluationResult, type TaskPack, type TaskPaths } from '../task-pack.js';
import { DSQA_FILE, isSetAnswer, readDsqaCsv, type DsqaItem } from './dataset.js';
import { judgeAnswer, type Judgement } from './judge.js';
import { MAX_STEPS, MAX_TOKENS_PER_STEP, runEpisode } from './react.js';
import { searchBackendFromEnv } from './search.js';
import { PRIVATE_COUNT, SPLIT_SEED, splitItems, VISIBLE_COUNT } from './split.js';

const TASK_ID = 'deepsearchqa';
const BASE_MODEL = 'base-model';
export const VISIBLE_FILE = 'train.jsonl';
export const PRIVATE_FILE = 'test.jsonl';
/** Episodes in flight: bounded by the search backend's rate limits more than by vLLM. */
const CONCURRENCY = 4;
/**
 * Above this share of questions with an unparseable judge reply the judge is considered broken and
 * the evaluation fails (EvaluatorError) instead of scoring; below it, those questions count wrong.
 */
export const JUDGE_ERROR_TOLERANCE = 0.1;

const DESCRIPTION = `# deepsearchqa — multi-step web research questions (L3, ReAct + search, LLM judge)

Improve the base model (\`models/${BASE_MODEL}/\`, a Hugging Face checkpoint) as a search agent on DeepSearchQA.

## Data
\`data/${VISIBLE_FILE}\`: ${VISIBLE_COUNT} DeepSearchQA items, one
\`{"problem", "problem_category", "answer", "answer_type"}\` per line (\`answer_type\` is \`Single Answer\` or
\`Set Answer\`). The dataset is shuffled with Python's \`random.Random(${SPLIT_SEED}).shuffle\`; the first
${VISIBLE_COUNT} items are yours, the next ${PRIVATE_COUNT} are the private evaluation set.

## Evaluation
Your checkpoint is served with vLLM (chat completions, its own chat template, temperature 0, at most
${MAX_TOKENS_PER_STEP} new tokens per step) and runs a ReAct loop of at most ${MAX_STEPS} steps per question.
The first user message is:

    Answer the question using web search. Work in steps; end every reply with exactly one action:
    Search[<query>] runs a web search and shows you the top results as an Observation.
    Answer[<final answer>] ends the task. If the question asks for several items, give all of them in one Answer, separated by commas.
    You have at most ${MAX_STEPS} steps. You may reason briefly before the action.

    Question: <problem>

The first \`Search[...]\` or \`Answer[...]\` of a reply is its action (generation stops at \`\\nObservation:\`).
A search answers as a user message \`Observation:\` followed by up to 5 results
(\`[i] title (url)\` and a snippet). A reply without a well-formed action costs a step and gets
\`Observation: invalid action. ...\`; the observation before the last step adds
\`This is your last step: reply with Answer[<final answer>].\` No answer after ${MAX_STEPS} steps is wrong.

The answer is graded by an LLM judge (CORRECT / INCORRECT) against the gold answer; a \`Set Answer\`
is judged item by item and is correct only when every gold item is present (extra items are not
penalised). Score = accuracy × 100.

## Submitting
Save a full model directory (\`save_pretrained\` weights, \`config.json\` and the tokenizer; merge LoRA adapters
first) under \`output/\` and submit its path.
`;

async function materialize(paths: TaskPaths): Promise<void> {
  const datasetDir = datasetDirOf(TASK_ID, paths);
  const items = await readDsqaCsv(datasetDir);
  const needed = VISIBLE_COUNT + PRIVATE_COUNT;
  if (items.length < needed) {
    throw new DatasetMissingError(`${join(datasetDir, DSQA_FILE)} holds ${items.length} items, the split needs at least ${needed}: run \`a2rl data fetch ${TASK_ID}\``);
  }
  items.forEach((item, i) => {
    if (item.problem.trim() === '' || item.answer.trim() === '') throw new DatasetMissingError(`${join(datasetDir, DSQA_FILE)} record ${i + 1} has an empty problem or answer`);
  });
  const split = splitItems(items);
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
    mapLimit(items, CONCURRENCY, (item) => runEpisode(model, item.problem, search, signal)),
  );
  const noAnswer: Judgement = { verdict: 'incorrect', calls: 0, errors: 0 };
  const judgements = await mapLimit(items, CONCURRENCY, (item, i) => {
    const answer = episodes[i]!.answer;
    return answer === null ? Promise.resolve(noAnswer) : judgeAnswer(judge!, item, answer, signal);
  });

  const total = items.length;
  const judgeErrors = judgements.filter((j) => j.verdict === 'error').length;
  if (total > 0 && judgeErrors / total > JUDGE_ERROR_TOLERANCE) {
    throw new EvaluatorError(`the judge gave unparseable replies (neither CORRECT nor INCORRECT) on ${judgeErrors} of ${total} questions: check A2RL_JUDGE_MODEL`);
  }
  const correct = judgements.filter((j) => j.verdict === 'correct').length;
  const byType = (set: boolean) => {
    const idx = items.flatMap((item, i) => (isSetAnswer(item) === set ? [i] : []));
    return { correct: idx.filter((i) => judgements[i]!.verdict === 'correct').length, total: idx.length };
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
      unanswered: episodes.filter((e) => e.answer === null).length,
      steps: sum((i) => episodes[i]!.steps),
      meanSteps: total === 0 ? 0 : sum((i) => episodes[i]!.steps) / total,
      searches: sum((i) => episodes[i]!.searches),
      malformedActions: sum((i) => episodes[i]!.malformed),
      searchBackend: search.name,
      judgeCalls: sum((i) => judgements[i]!.calls),
      judgeErrors,
      judgeErrorReplies: sum((i) => judgements[i]!.errors),
    },
  };
}

export const deepsearchqa: TaskPack = {
  id: TASK_ID,
  level: 3,
  title: 'DeepSearchQA multi-step web research (ReAct + search, LLM judge, served with vLLM)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'deepsearchqa-eval-1',
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
