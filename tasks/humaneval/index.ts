import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { assertServableCheckpoint, copyBaseModel, DatasetMissingError, datasetDirOf, readDatasetJsonl } from '../paper-common/dataset.js';
import { fillTemplate, loadProtocol, protocolString, type EvalProtocol, type RowRange } from '../paper-common/protocol.js';
import { generate, mapLimit, SERVING_REQUIREMENTS, withServedModel, type ChatMessage } from '../paper-common/served-chat.js';
import { EvaluatorError, type EvaluationContext, type EvaluationResult, type TaskPack, type TaskPaths } from '../task-pack.js';
import { extractCompletion, type HumanEvalProblem } from './completion.js';
import { runSample, type RunOutcome } from './sample-run.js';
import { DEFAULT_LIMITS } from './sandbox.js';

const TASK_ID = 'humaneval';
/** The fetched dataset (`$A2RL_HOME/datasets/humaneval/`): OpenAI's HumanEval, 164 problems, as JSON Lines. */
export const HUMANEVAL_FILE = 'HumanEval.jsonl';
const BASE_MODEL = 'base-model';
/** tasks/humaneval/protocol.json: OpenCompass humaneval_gen on the last 82 problems, as the paper's harness runs it. */
export const PROTOCOL: EvalProtocol = loadProtocol(TASK_ID);
const USER_TEMPLATE = protocolString(PROTOCOL, 'prompt', 'userTemplate');
const CONCURRENCY = 16;
/** Problems graded in parallel (CPU-bound; each is two sandboxed processes). */
const EXEC_CONCURRENCY = 2;
const FIELDS = ['task_id', 'prompt', 'canonical_solution', 'test', 'entry_point'] as const;

/** The protocol's split of the problems, in dataset order: rows [0, 82) visible, [82, end) held out. */
export function splitProblems<T>(problems: readonly T[]): { visible: T[]; held: T[] } {
  if (PROTOCOL.split.kind !== 'rows') throw new EvaluatorError('tasks/humaneval/protocol.json: split.kind must be "rows"');
  const rows = (r: RowRange) => problems.slice(r.start, r.end ?? problems.length);
  return { visible: rows(PROTOCOL.split.visible), held: rows(PROTOCOL.split.private) };
}

/** The evaluation prompt: one user turn, OpenCompass's instruction followed by the problem's prompt. */
export function humanEvalPrompt(problem: Pick<HumanEvalProblem, 'prompt'>): ChatMessage[] {
  return [{ role: 'user', content: fillTemplate(USER_TEMPLATE, { prompt: problem.prompt }) }];
}

const indent = (text: string) => text.split('\n').map((line) => (line ? `    ${line}` : '')).join('\n');

const DESCRIPTION = `# humaneval — Python function synthesis (L1, unit tests, pass@1)

Improve the base model (\`models/${BASE_MODEL}/\`, a Hugging Face checkpoint) at writing Python functions.

## Data
\`data/humaneval.jsonl\`: the first 82 HumanEval problems, one
\`{"task_id", "prompt", "canonical_solution", "test", "entry_point"}\` per line. The last 82 are held out.

## Evaluation
As the paper's harness does (OpenCompass \`humaneval_gen\` on the problems \`[82:]\`): each held-out problem is
answered once by your checkpoint served with vLLM (chat completions, the model's chat template, temperature
${PROTOCOL.request.temperature}, at most ${PROTOCOL.request.maxTokens} new tokens). The single user message is

${indent(USER_TEMPLATE.replace('{prompt}', '<the problem\'s prompt: signature and docstring>'))}

The completion is the content of the first closed markdown code block of the reply (else the whole reply),
after any \`<think>…</think>\` reasoning is dropped, with leading whitespace removed. \`<prompt> + <completion>\`
runs with python3 as a program of its own (so reply with the whole function: a bare body loses its
indentation). The problem's hidden \`check(candidate)\` runs in a separate process and calls your function
through a pipe: arguments and return values cross as plain Python data (None, bool, int, float, str, bytes,
list, tuple, set, frozenset, dict; a Counter, defaultdict or namedtuple arrives as its base type; any other
return value fails the call). Both run in sandboxes without network, with ${DEFAULT_LIMITS.timeMs / 1000} s of wall clock for the
whole problem, ${DEFAULT_LIMITS.memoryBytes / 1024 ** 3} GiB of memory per process and ${DEFAULT_LIMITS.outputBytes / 1024 ** 2} MiB of output; a failing, crashing, hanging or
flooding program fails the problem. Score = pass@1 × 100.

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

/** The sandbox's self-test: a correct answer passes, a wrong one fails (graded the way every problem is). */
const PROBE: HumanEvalProblem = {
  task_id: 'a2rl/probe',
  prompt: 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n',
  canonical_solution: '    return a + b\n',
  test: 'def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n',
  entry_point: 'add',
};

/** A grader that fails every sample, or passes a wrong one, is the harness's fault: refuse to grade. */
async function assertSandboxWorks(signal?: AbortSignal): Promise<void> {
  const right = await runSample(PROBE, PROBE.canonical_solution, DEFAULT_LIMITS, signal);
  if (right.outcome !== 'passed') throw new EvaluatorError(`the humaneval sandbox (bwrap + python3) does not work here: ${right.reason.slice(0, 300)} ${right.output.slice(0, 300)}`);
  const wrong = await runSample(PROBE, '    return a - b\n', DEFAULT_LIMITS, signal);
  if (wrong.outcome !== 'failed') throw new EvaluatorError(`the humaneval judge did not fail a wrong answer (${wrong.outcome}): refusing to grade`);
}

async function evaluate(checkpointDir: string, privateDir: string, signal?: AbortSignal, ctx?: EvaluationContext): Promise<EvaluationResult> {
  await assertServableCheckpoint(checkpointDir);
  const problems = await readDatasetJsonl<HumanEvalProblem>(TASK_ID, privateDir, 'humaneval.jsonl');
  await assertSandboxWorks(signal);
  const replies = await withServedModel(TASK_ID, ctx, checkpointDir, signal, (model) =>
    mapLimit(problems, CONCURRENCY, (p) => generate(model, PROTOCOL.request, { messages: humanEvalPrompt(p) }, { signal })),
  );
  const items = await mapLimit(problems, EXEC_CONCURRENCY, (p, i) => gradeReply(p, i, replies[i]!, signal));
  const outcomes = items.map((item) => item.outcome);
  return { score: Math.round(passAt1(outcomes) * 10000) / 100, details: summarise(problems, outcomes), items };
}

/** What is kept of the judge's reason and the program's output per item (the items blob, not the event). */
const ITEM_TEXT_CHARS = 1000;

/** One held-out problem as graded: the raw reply, the completion taken from it, the outcome and why it did not pass. */
async function gradeReply(problem: HumanEvalProblem, index: number, reply: string, signal?: AbortSignal) {
  const completion = extractCompletion(reply);
  const run = await runSample(problem, completion, DEFAULT_LIMITS, signal);
  return {
    index,
    task_id: problem.task_id,
    reply,
    completion,
    outcome: run.outcome,
    passed: run.outcome === 'passed',
    reason: run.reason.slice(0, ITEM_TEXT_CHARS),
    output: run.output.slice(0, ITEM_TEXT_CHARS),
  };
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
  evaluatorVersion: 'humaneval-eval-3',
  protocol: PROTOCOL,
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
