/**
 * alfworld (L3): ALFWorld's text household games. The agent trains on the official training games
 * (copied read-only into `data/train/`, played through the run's `/env/*` endpoints so every rollout
 * is recorded); the checkpoint is scored by ReAct success rate on the 134 `valid_unseen` games.
 */
import { copyFile, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { assertServableCheckpoint, copyBaseModel, DatasetMissingError, datasetDirOf } from '../paper-common/dataset.js';
import { evaluateOnEnvServer, openServerTraining, round4 } from '../paper-common/env-episodes.js';
import { SERVING_REQUIREMENTS } from '../paper-common/served-chat.js';
import { EvaluatorError, type EvaluationContext, type EvaluationResult, type TaskPack, type TaskPaths } from '../task-pack.js';
import { protocolNumber } from '../paper-common/protocol.js';
import { readManifest } from '../../modules/datasets/fetch-dataset.js';
import { MAX_STEPS, MICRO_MAX_STEPS, PROMPTS_FILE, PROTOCOL, promptsProblems, reactPolicy, TASK_TYPES, taskTypeKey } from './prompt.js';

const TASK_ID = 'alfworld';
const BASE_MODEL = 'base-model';
const ENV_SERVER = 'alfworld';
/** The paper's private split: every valid_unseen game. */
export const EVAL_GAMES = protocolNumber(PROTOCOL, 'settings', 'evalGames');
const CONCURRENCY = 4;
export const TRAIN_GAMES_LIST = 'train_games.txt';
/**
 * Written by materialize when the installed dataset is micro (its manifest says `micro: true`): the
 * evaluation's replies per game (settings.micro.maxSteps, deviation alfworld-micro-max-steps), in
 * `private/` for the grader and in `data/` for the agent. Absent for real ALFWorld data (50 replies).
 */
export const MICRO_SETTINGS_FILE = 'micro_settings.json';
const DATA_HINT = 'install ALFWorld (`pip install alfworld && alfworld-download`) and export ALFWORLD_DATA';

const DESCRIPTION = `# alfworld — text household tasks (L3, interactive, ReAct)

Improve the base model (\`models/${BASE_MODEL}/\`, a Hugging Face checkpoint) as an ALFWorld agent.

## Data and environment
- \`data/train/\`: the official ALFWorld training games (\`traj_data.json\` with the expert plan and
  \`game.tw-pddl\` per trial); \`data/${TRAIN_GAMES_LIST}\` lists them in the order the environment indexes them.
- \`data/${MICRO_SETTINGS_FILE}\` (only with micro assets, \`a2rl data micro alfworld\`): \`maxSteps\`, the replies per
  game the evaluation allows on them instead of ${MAX_STEPS}.
- \`data/${PROMPTS_FILE}\`: the few-shot examples used by the evaluation prompt (two per task type).
- Play training games through the grading API (every step is recorded):
  \`POST $GRADING_SERVER_URL/env/reset {"seed": n}\` starts game \`n mod <number of training games>\` of
  \`data/${TRAIN_GAMES_LIST}\` and returns \`session_id\`, \`observation\`, \`admissible_actions\`;
  \`POST $GRADING_SERVER_URL/env/step {"session_id", "action"}\` returns \`observation\`, \`reward\`
  (1 when the task is done), \`done\`, \`admissible_actions\`, \`info.won\`. An episode ends after ${MAX_STEPS} steps.

## Evaluation
As the paper's harness does: your checkpoint is served with vLLM and prompted with raw text completions (no chat
template), temperature ${PROTOCOL.request.temperature}, at most ${PROTOCOL.request.maxTokens} new tokens, generation stopping at the first newline. It plays
each of the ${EVAL_GAMES} \`valid_unseen\` games (never reachable through \`/env\`) for at most ${MAX_STEPS} replies. The prompt is

    Interact with a household to solve a task. Here are two examples.
    <example 1 of the game's task type><example 0 of the game's task type>
    Here is the task.
    <first observation>
    >

and grows by \` <action>\\n<observation>\\n>\` after every reply. Each reply, stripped, is the action; a reply
starting \`think:\` is answered \`OK.\` without acting and still counts as a reply; \`You arrive at loc N. \` is cut
from observations. Score = success rate × 100 (a game is a success when the environment reports it won);
the report also gives the success rate per task type (put, clean, heat, cool, examine, puttwo).

## Submitting
Save a full model directory (\`save_pretrained\` weights, \`config.json\` and the tokenizer; merge LoRA
adapters first) under \`output/\` and submit its path.
`;

/** Trial directories the environment serves: traj_data.json + game.tw-pddl, not movable/Sliced, solvable (same rule as env_backend.py). */
async function collectGames(root: string): Promise<string[]> {
  const games: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    const names = new Set(entries.filter((e) => e.isFile()).map((e) => e.name));
    if (names.has('traj_data.json') && names.has('game.tw-pddl') && !/movable|Sliced/.test(dir)) {
      const game = JSON.parse(await readFile(join(dir, 'game.tw-pddl'), 'utf8')) as { solvable?: boolean };
      if (game.solvable) games.push(relative(root, join(dir, 'game.tw-pddl')));
    }
    for (const e of entries.filter((x) => x.isDirectory()).sort((a, b) => (a.name < b.name ? -1 : 1))) await walk(join(dir, e.name));
  };
  await walk(root);
  // Code-point order, as Python's sorted() on the server.
  return games.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

async function readPrompts(file: string): Promise<Record<string, string>> {
  let prompts: unknown;
  try {
    prompts = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new DatasetMissingError(`the ALFWorld few-shot prompts ${file} are unreadable (${(err as Error).message}): run \`a2rl data fetch ${TASK_ID}\``);
  }
  const problems = promptsProblems(prompts);
  if (problems.length) throw new DatasetMissingError(`${file}: ${problems.slice(0, 3).join('; ')}: run \`a2rl data fetch ${TASK_ID}\``);
  return prompts as Record<string, string>;
}

async function materialize(paths: TaskPaths): Promise<void> {
  const datasetDir = datasetDirOf(TASK_ID, paths);
  const prompts = await readPrompts(join(datasetDir, PROMPTS_FILE));
  const data = process.env.ALFWORLD_DATA?.trim();
  if (!data) throw new DatasetMissingError(`ALFWORLD_DATA is not set: ${DATA_HINT}`);
  const trainRoot = join(data, 'json_2.1.1', 'train');
  if (!(await stat(trainRoot).catch(() => null))?.isDirectory()) throw new DatasetMissingError(`${trainRoot} is missing: ${DATA_HINT}`);
  const games = await collectGames(trainRoot);
  if (!games.length) throw new DatasetMissingError(`no solvable training games under ${trainRoot}: ${DATA_HINT}`);

  await Promise.all([mkdir(paths.dataDir, { recursive: true }), mkdir(paths.privateDir, { recursive: true })]);
  for (const game of games) {
    const trial = join(game, '..');
    await mkdir(join(paths.dataDir, 'train', trial), { recursive: true });
    for (const name of ['traj_data.json', 'game.tw-pddl']) await copyFile(join(trainRoot, trial, name), join(paths.dataDir, 'train', trial, name));
  }
  const promptsJson = JSON.stringify(prompts, null, 1) + '\n';
  await writeFile(join(paths.dataDir, TRAIN_GAMES_LIST), games.map((g) => `${g}\n`).join(''));
  await writeFile(join(paths.dataDir, PROMPTS_FILE), promptsJson);
  // The evaluator reads its own copy: what the agent sees cannot change how it is graded.
  await writeFile(join(paths.privateDir, PROMPTS_FILE), promptsJson);
  if ((await readManifest(datasetDir))?.micro) {
    const settings = `${JSON.stringify({ maxSteps: MICRO_MAX_STEPS, deviation: 'alfworld-micro-max-steps' })}\n`;
    await writeFile(join(paths.privateDir, MICRO_SETTINGS_FILE), settings);
    await writeFile(join(paths.dataDir, MICRO_SETTINGS_FILE), settings);
  }
  await copyBaseModel(TASK_ID, datasetDir, paths.modelDir);
}

/** The evaluation's replies per game: settings.micro.maxSteps when materialize found micro assets, else settings.maxSteps. */
async function evalMaxSteps(privateDir: string): Promise<number> {
  const text = await readFile(join(privateDir, MICRO_SETTINGS_FILE), 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  return text === null ? MAX_STEPS : MICRO_MAX_STEPS;
}

async function evaluate(checkpointDir: string, privateDir: string, signal?: AbortSignal, ctx?: EvaluationContext): Promise<EvaluationResult> {
  await assertServableCheckpoint(checkpointDir);
  const prompts = await readPrompts(join(privateDir, PROMPTS_FILE)).catch((err: Error) => {
    throw new EvaluatorError(err.message);
  });
  const maxSteps = await evalMaxSteps(privateDir);
  const policy = reactPolicy(prompts, maxSteps);
  const { outcomes, health } = await evaluateOnEnvServer(TASK_ID, ENV_SERVER, ctx, checkpointDir, policy, { concurrency: CONCURRENCY, signal });
  const won = outcomes.map((o) => o.lastInfo.won === true);
  const byType = Object.fromEntries(TASK_TYPES.map(([, key]) => [key, { games: 0, successes: 0, successRate: 0 }]));
  outcomes.forEach((o, i) => {
    const key = taskTypeKey(String(o.info.task_type ?? ''));
    if (!key) return;
    byType[key]!.games++;
    if (won[i]) byType[key]!.successes++;
  });
  for (const t of Object.values(byType)) t.successRate = t.games ? round4(t.successes / t.games) : 0;
  const successes = won.filter(Boolean).length;
  const total = outcomes.length;
  return {
    score: Math.round((successes / total) * 10_000) / 100,
    details: {
      games: total,
      successes,
      successRate: round4(successes / total),
      byTaskType: byType,
      maxSteps,
      meanReplies: round4(outcomes.reduce((n, o) => n + o.steps, 0) / total),
      thinkReplies: outcomes.reduce((n, o) => n + o.thinks, 0),
      outOfSteps: outcomes.filter((o) => !o.done).length,
      env: health.env,
      // False when the server's eval split is not the paper's 134 valid_unseen games (fixtures, a different ALFWorld release).
      fullEvalSet: total === EVAL_GAMES,
    },
  };
}

export const alfworld: TaskPack = {
  id: TASK_ID,
  level: 3,
  title: 'ALFWorld text household tasks (interactive, ReAct, served with vLLM)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'alfworld-eval-2',
  protocol: PROTOCOL,
  description: DESCRIPTION,
  requirements: [
    ...SERVING_REQUIREMENTS,
    { kind: 'dataset' },
    { kind: 'env-var', name: 'ALFWORLD_DATA', hint: DATA_HINT },
    { kind: 'env-server', name: ENV_SERVER, pythonModule: 'alfworld', hint: 'pip install alfworld (in the python3 on PATH)' },
  ],
  environment: {
    name: 'alfworld/v1',
    maxSteps: MAX_STEPS,
    open: (ctx, signal) => openServerTraining(ENV_SERVER, MAX_STEPS, ctx, signal),
  },
  materialize,
  evaluate,
};
