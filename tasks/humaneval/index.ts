import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { assertServableCheckpoint, copyBaseModel, DatasetMissingError, datasetDirOf, readDatasetJsonl } from '../paper-common/dataset.js';
import { chatCompletion, mapLimit, SERVING_REQUIREMENTS, withServedModel } from '../paper-common/served-chat.js';
import { EvaluatorError, type EvaluationContext, type EvaluationResult, type TaskPack, type TaskPaths } from '../task-pack.js';
import { buildProgram, humanEvalPrompt, type HumanEvalProblem } from './completion.js';
import { DEFAULT_LIMITS, runPythonSandboxed, type RunOutcome } from './sandbox.js';

const TASK_ID = 'humaneval';
/** The fetched dataset (`$A2RL_HOME/datasets/humaneval/`): OpenAI's HumanEval, 164 problems, as JSON Lines. */
export const HUMANEVAL_FILE = 'HumanEval.jsonl';
const BASE_MODEL = 'base-model';
const MAX_TOKENS = 768;
const CONCURRENCY = 16;
/** Sandboxed test runs in parallel (CPU-bound). */
const EXEC_CONCURRENCY = 2;
const FIELDS = ['task_id', 'prompt', 'canonical_solution', 'test', 'entry_point'] as const;

/** Problems in dataset order: the first half (82 of 164) is visible, the rest (82) is held out. */
export function splitProblems<T>(problems: readonly T[]): { visible: T[]; held: T[] } {
  const half = Math.floor(problems.length / 2);
  return { visible: problems.slice(0, half), held: problems.slice(half) };
}

const DESCRIPTION = `# humaneval — Python function synthesis (L1, unit tests, pass@1)

Improve the base model (\`models/${BASE_MODEL}/\`, a Hugging Face checkpoint) at writing Python functions.

## Data
\`data/humaneval.jsonl\`: the first 82 HumanEval problems, one
\`{"task_id", "prompt", "canonical_solution", "test", "entry_point"}\` per line. The last 82 are held out.

## Evaluation
Each held-out prompt is answered once by your checkpoint served with vLLM (chat completions, the model's
chat template, temperature 0, at most ${MAX_TOKENS} new tokens). The user message is

    Complete the following Python function. Reply with the complete function in a single \`\`\`python code block.

followed by the prompt in a \`\`\`python block. The code is the first markdown code block of the reply (else
the whole reply). If it defines the entry-point function at top level it replaces the prompt's stub
(the prompt's imports and helpers stay); otherwise it is appended to the prompt as the function body.
The problem's tests then run (\`check(<entry_point>)\`) with python3 in a sandbox without network, with
${DEFAULT_LIMITS.timeMs / 1000} s, ${DEFAULT_LIMITS.memoryBytes / 1024 ** 3} GiB of memory and ${DEFAULT_LIMITS.outputBytes / 1024 ** 2} MiB of output;
a failing, crashing, hanging or flooding program fails the problem. Score = pass@1 × 100.

## Submitting
Save a full model directory (\`save_pretrained\` weights, \`config.json\` and the tokenizer; merge LoRA adapters
first) under \`output/\` and submit its path.
`;

async function materialize(paths: TaskPaths): Promise<void> {
  const datasetDir = datasetDirOf(TASK_ID, paths);
  const problems = await readDatasetJsonl<HumanEvalProblem>(TASK_ID, datasetDir, HUMANEVAL_FILE);
  if (problems.length < 2) throw new DatasetMissingError(`${join(datasetDir, HUMANEVAL_FILE)} holds ${problems.length} problems: run \`a2rl data fetch ${TASK_ID}\``);
  for (const [i, p] of problems.entries()) {
    if (!FIELDS.every((f) => typeof p?.[f] === 'string')) {
      throw new DatasetMissingError(`${join(datasetDir, HUMANEVAL_FILE)} line ${i + 1} is not a HumanEval problem {${FIELDS.join(', ')}}`);
    }
  }
  const rows = problems.map((p) => Object.fromEntries(FIELDS.map((f) => [f, p[f]])));
  const { visible, held } = splitProblems(rows);
  await Promise.all([mkdir(paths.dataDir, { recursive: true }), mkdir(paths.privateDir, { recursive: true })]);
  await writeFile(join(paths.dataDir, 'humaneval.jsonl'), toJsonl(visible));
  await writeFile(join(paths.privateDir, 'humaneval.jsonl'), toJsonl(held));
  await copyBaseModel(TASK_ID, datasetDir, paths.modelDir);
}

const toJsonl = (rows: readonly object[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';

/** A sandbox that cannot run a trivial program would fail every sample: that is the harness's fault. */
async function assertSandboxWorks(signal?: AbortSignal): Promise<void> {
  const probe = await runPythonSandboxed('pass', DEFAULT_LIMITS, signal);
  if (probe.outcome !== 'passed') throw new EvaluatorError(`the humaneval sandbox (bwrap + python3) does not work here: ${probe.output.slice(0, 500)}`);
}

async function evaluate(checkpointDir: string, privateDir: string, signal?: AbortSignal, ctx?: EvaluationContext): Promise<EvaluationResult> {
  await assertServableCheckpoint(checkpointDir);
  const problems = await readDatasetJsonl<HumanEvalProblem>(TASK_ID, privateDir, 'humaneval.jsonl');
  await assertSandboxWorks(signal);
  const replies = await withServedModel(TASK_ID, ctx, checkpointDir, signal, (model) =>
    mapLimit(problems, CONCURRENCY, (p) => chatCompletion(model, humanEvalPrompt(p), { maxTokens: MAX_TOKENS, signal })),
  );
  const outcomes = await mapLimit(problems, EXEC_CONCURRENCY, async (p, i) => (await runPythonSandboxed(buildProgram(p, replies[i]!), DEFAULT_LIMITS, signal)).outcome);
  return { score: Math.round(passAt1(outcomes) * 10000) / 100, details: summarise(problems, outcomes) };
}

/** pass@1 with one greedy sample per problem: the fraction of problems whose program passed. */
export function passAt1(outcomes: readonly RunOutcome[]): number {
  return outcomes.length === 0 ? 0 : outcomes.filter((o) => o === 'passed').length / outcomes.length;
}

function summarise(problems: readonly HumanEvalProblem[], outcomes: readonly RunOutcome[]): Record<string, unknown> {
  const count = (o: RunOutcome) => outcomes.filter((x) => x === o).length;
  return {
    passAt1: passAt1(outcomes),
    passed: count('passed'),
    total: problems.length,
    failed: count('failed'),
    timedOut: count('timeout'),
    outputLimit: count('output_limit'),
    passedTasks: problems.filter((_, i) => outcomes[i] === 'passed').map((p) => p.task_id),
  };
}

export const humaneval: TaskPack = {
  id: TASK_ID,
  level: 1,
  title: 'HumanEval Python synthesis (sandboxed unit tests, pass@1, served with vLLM)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'humaneval-eval-1',
  description: DESCRIPTION,
  requirements: [
    ...SERVING_REQUIREMENTS,
    { kind: 'command', name: 'bwrap', hint: 'apt-get install bubblewrap (sandbox for executing completions)' },
    { kind: 'command', name: 'python3', hint: 'apt-get install python3 (runs the HumanEval tests)' },
    { kind: 'dataset' },
  ],
  materialize,
  evaluate,
};
