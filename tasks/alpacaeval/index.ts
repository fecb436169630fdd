import { access, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { OpenAiClient } from '../../modules/serving/openai-client.js';
import { ConfigError } from '../../modules/settings/settings.port.js';
import { assertServableCheckpoint, copyBaseModel, DatasetMissingError, datasetDirOf, readDatasetJsonl } from '../paper-common/dataset.js';
import { loadProtocol, type EvalProtocol } from '../paper-common/protocol.js';
import { generate, mapLimit, SERVING_REQUIREMENTS, withServedModel } from '../paper-common/served-chat.js';
import { EvaluatorError, type EvaluationContext, type EvaluationResult, type OpenAiEndpoint, type TaskPack, type TaskPaths } from '../task-pack.js';
import { judgePrompt, MAX_JUDGE_ERROR_FRACTION, modelShownFirst, ORDER_SEED, parseVerdict, winRates, type Judgement } from './judging.js';

const TASK_ID = 'alpacaeval';
/** Stored names from modules/datasets/dataset-registry.ts. */
export const ALPACAEVAL_EVAL_FILE = 'alpaca_eval_gpt4_baseline.json';
export const ALPACA_PARQUET_FILE = 'alpaca_train.parquet';
/** Readable forms of the same training rows (a2rl has no parquet reader), looked for in this order. */
export const ALPACA_JSONL_FILE = 'alpaca_train.jsonl';
export const ALPACA_JSON_FILE = 'alpaca_data.json';
/** How many training instructions (the first N in dataset order) go to `data/`. */
export const TRAIN_COUNT_VARIABLE = 'A2RL_ALPACAEVAL_TRAIN_COUNT';
const DEFAULT_TRAIN_COUNT = 2000;
const BASE_MODEL = 'base-model';
const PRIVATE_FILE = 'eval.json';
/** tasks/alpacaeval/protocol.json: generation as the paper's harness does it (greedy, 512 tokens, chat template). */
export const PROTOCOL: EvalProtocol = loadProtocol(TASK_ID);
const MAX_TOKENS = PROTOCOL.request.maxTokens;
const JUDGE_MAX_TOKENS = Number(PROTOCOL.settings.judgeMaxTokens);
/** Requests in flight against the served model (vLLM batches them) and against the judge API. */
const CONCURRENCY = 16;
const JUDGE_CONCURRENCY = 8;
const JUDGE_TIMEOUT_MS = 120_000;

export interface AlpacaRow {
  instruction: string;
  input: string;
  output: string;
}

export interface EvalRow {
  instruction: string;
  /** The GPT-4 (turbo) baseline output the model is compared with. */
  baseline: string;
  dataset: string;
}

const DESCRIPTION = `# alpacaeval — instruction following judged against GPT-4 (L2, AlpacaEval 2.0)

Improve the base model (\`models/${BASE_MODEL}/\`, a Hugging Face checkpoint) at following open-ended instructions.

## Data
\`data/alpaca_train.jsonl\`: instructions from \`tatsu-lab/alpaca\` (by default the first ${DEFAULT_TRAIN_COUNT} in dataset
order; the operator may change the count with \`${TRAIN_COUNT_VARIABLE}\`), one \`{"instruction", "input", "output"}\` per
line (\`input\` is optional context, often empty; \`output\` is text-davinci-003's answer).

## Evaluation
The 805 AlpacaEval 2.0 instructions are answered by your checkpoint served with vLLM (OpenAI-compatible chat
completions, the model's own chat template, the instruction as the single user message, temperature 0 (as the paper's harness), at most
${MAX_TOKENS} new tokens). For each instruction a judge model compares your output with the GPT-4 baseline output
and names the better one; which of the two is shown first is a fixed per-instruction coin flip (to cancel the
judge's position bias). A reply that is not exactly a verdict is a judge error: excluded, and more than
${MAX_JUDGE_ERROR_FRACTION * 100}% of them fails the grading as an evaluator fault, never yours.

- win rate: share of judged instructions where your output won;
- length-controlled (LC) win rate: a logistic regression of the verdict on the length difference
  (characters, yours minus the baseline's), read at zero difference, so verbosity alone does not pay.

Score = LC win rate × 100.

## Submitting
Save a full model directory (\`save_pretrained\` weights, \`config.json\` and the tokenizer; merge LoRA adapters
first) under \`output/\` and submit its path.
`;

function trainCount(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[TRAIN_COUNT_VARIABLE]?.trim();
  if (!raw) return DEFAULT_TRAIN_COUNT;
  if (!/^[1-9]\d*$/.test(raw)) throw new ConfigError(TRAIN_COUNT_VARIABLE, `not a positive integer: "${raw}"`);
  return Number(raw);
}

async function materialize(paths: TaskPaths): Promise<void> {
  const count = trainCount();
  const datasetDir = datasetDirOf(TASK_ID, paths);
  const train = (await readTrainRows(datasetDir)).slice(0, count);
  const evalRows = await readEvalRows(datasetDir, ALPACAEVAL_EVAL_FILE);
  await Promise.all([mkdir(paths.dataDir, { recursive: true }), mkdir(paths.privateDir, { recursive: true })]);
  await writeFile(join(paths.dataDir, 'alpaca_train.jsonl'), train.map((r) => JSON.stringify(r)).join('\n') + '\n');
  await writeFile(join(paths.privateDir, PRIVATE_FILE), JSON.stringify(evalRows) + '\n');
  await copyBaseModel(TASK_ID, datasetDir, paths.modelDir);
}

const exists = (path: string) => access(path).then(() => true, () => false);

/** The training rows from the JSONL or JSON form; the registry's parquet alone is refused with how to convert it. */
async function readTrainRows(datasetDir: string): Promise<AlpacaRow[]> {
  let rows: unknown[];
  let source: string;
  if (await exists(join(datasetDir, ALPACA_JSONL_FILE))) {
    source = join(datasetDir, ALPACA_JSONL_FILE);
    rows = await readDatasetJsonl<unknown>(TASK_ID, datasetDir, ALPACA_JSONL_FILE);
  } else if (await exists(join(datasetDir, ALPACA_JSON_FILE))) {
    source = join(datasetDir, ALPACA_JSON_FILE);
    rows = await readJsonArray(source);
  } else {
    const parquet = join(datasetDir, ALPACA_PARQUET_FILE);
    const why = (await exists(parquet)) ? `${parquet} is parquet, which a2rl cannot read` : `no training data in ${datasetDir}`;
    throw new DatasetMissingError(
      `${why}: put the same rows in ${join(datasetDir, ALPACA_JSONL_FILE)} (python -c "import pandas as pd; ` +
        `pd.read_parquet('${parquet}').to_json('${join(datasetDir, ALPACA_JSONL_FILE)}', orient='records', lines=True)") ` +
        `or stanford_alpaca's ${ALPACA_JSON_FILE} in ${datasetDir}`,
    );
  }
  if (rows.length === 0) throw new DatasetMissingError(`${source} is empty`);
  return rows.map((row, i) => {
    const r = row as Partial<AlpacaRow> | null;
    if (typeof r?.instruction !== 'string' || typeof r.output !== 'string' || (r.input !== undefined && typeof r.input !== 'string')) {
      throw new DatasetMissingError(`${source} row ${i + 1} is not an Alpaca row {instruction, input, output}`);
    }
    return { instruction: r.instruction, input: r.input ?? '', output: r.output };
  });
}

async function readJsonArray(path: string): Promise<unknown[]> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(path, 'utf8'));
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    throw new DatasetMissingError(`${path} is ${missing ? 'missing' : 'not JSON (corrupt download?)'}: run \`a2rl data fetch ${TASK_ID}\``);
  }
  if (!Array.isArray(parsed)) throw new DatasetMissingError(`${path} is not a JSON array`);
  return parsed;
}

/** AlpacaEval's file (`[{instruction, output, generator, dataset}]`) or the pack's private copy (`baseline` for `output`). */
async function readEvalRows(dir: string, file: string): Promise<EvalRow[]> {
  const path = join(dir, file);
  const rows = await readJsonArray(path);
  if (rows.length === 0) throw new DatasetMissingError(`${path} is empty`);
  return rows.map((row, i) => {
    const r = row as { instruction?: unknown; output?: unknown; baseline?: unknown; dataset?: unknown } | null;
    const baseline = r?.baseline ?? r?.output;
    if (typeof r?.instruction !== 'string' || typeof baseline !== 'string') {
      throw new DatasetMissingError(`${path} item ${i + 1} has no instruction and baseline output`);
    }
    return { instruction: r.instruction, baseline, dataset: typeof r.dataset === 'string' ? r.dataset : '' };
  });
}

interface JudgeReply {
  judgement: Judgement;
  tokens: number;
  reply: string;
}

async function judgeOne(client: OpenAiClient, row: EvalRow, output: string, signal?: AbortSignal): Promise<JudgeReply> {
  const modelFirst = modelShownFirst(row.instruction);
  const messages = modelFirst ? judgePrompt(row.instruction, output, row.baseline) : judgePrompt(row.instruction, row.baseline, output);
  const generation = await client.chat(messages, { maxTokens: JUDGE_MAX_TOKENS, signal });
  const verdict = parseVerdict(generation.text);
  const preference = verdict === null ? null : (verdict === 'a') === modelFirst ? 1 : 0;
  return {
    judgement: { preference, lengthDiff: output.length - row.baseline.length },
    tokens: generation.promptTokens + generation.completionTokens,
    reply: generation.text,
  };
}

const percent = (x: number) => Math.round(x * 10000) / 100;

async function evaluate(checkpointDir: string, privateDir: string, signal?: AbortSignal, ctx?: EvaluationContext): Promise<EvaluationResult> {
  const judge: OpenAiEndpoint | null | undefined = ctx?.judge;
  if (ctx && !judge) throw new EvaluatorError('alpacaeval needs a judge: set A2RL_JUDGE_URL and A2RL_JUDGE_MODEL (and A2RL_JUDGE_API_KEY if the endpoint needs one)');
  await assertServableCheckpoint(checkpointDir);
  const rows = await readEvalRows(privateDir, PRIVATE_FILE);
  const outputs = await withServedModel(TASK_ID, ctx, checkpointDir, signal, (model) =>
    mapLimit(rows, CONCURRENCY, (row) => generate(model, PROTOCOL.request, { messages: [{ role: 'user', content: row.instruction }] }, { signal })),
  );
  const client = new OpenAiClient(judge!, JUDGE_TIMEOUT_MS);
  const replies = await mapLimit(rows, JUDGE_CONCURRENCY, (row, i) => judgeOne(client, row, outputs[i]!, signal));
  const rates = winRates(replies.map((r) => r.judgement));
  const errors = replies.flatMap((r, index) => (r.judgement.preference === null ? [{ index, reply: r.reply.slice(0, 200) }] : []));
  if (rates.judged === 0 || errors.length > MAX_JUDGE_ERROR_FRACTION * rows.length) {
    throw new EvaluatorError(
      `the judge ${judge!.model} gave no parseable verdict for ${errors.length} of ${rows.length} instructions ` +
        `(more than ${MAX_JUDGE_ERROR_FRACTION * 100}% allowed); first reply: ${JSON.stringify(errors[0]?.reply ?? '')}`,
    );
  }
  return {
    score: percent(rates.lcWinRate),
    details: {
      winRate: percent(rates.winRate),
      lcWinRate: percent(rates.lcWinRate),
      lengthCoefficient: rates.lengthCoefficient,
      judged: rates.judged,
      total: rows.length,
      judgeErrors: rates.judgeErrors,
      judgeErrorItems: errors.slice(0, 20),
      judgeTokens: replies.reduce((sum, r) => sum + r.tokens, 0),
      judgeModel: judge!.model,
      orderSeed: ORDER_SEED,
      // Per instruction, '1' when the model's output was shown as "Output (a)".
      modelShownFirst: rows.map((r) => (modelShownFirst(r.instruction) ? '1' : '0')).join(''),
      meanOutputChars: Math.round(outputs.reduce((sum, o) => sum + o.length, 0) / rows.length),
    },
  };
}

export const alpacaeval: TaskPack = {
  id: TASK_ID,
  level: 2,
  title: 'AlpacaEval 2.0 instruction following (pairwise judge vs GPT-4, LC win rate)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'alpacaeval-eval-2',
  protocol: PROTOCOL,
  description: DESCRIPTION,
  requirements: [
    ...SERVING_REQUIREMENTS,
    { kind: 'dataset' },
    { kind: 'judge' },
  ],
  materialize,
  evaluate,
};
