/**
 * ref-household (L3): an ALFWorld-like text household. Agents train a small action-scoring policy
 * from expert demonstrations and online rollouts (served through the grading API), and are scored
 * by its greedy success rate on held-out layouts they can never roll out.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  EvaluatorError,
  type EvaluationResult,
  type InteractiveEnvironment,
  type TaskPack,
  type TaskPaths,
} from '../task-pack.js';
import { evaluateOffLoop } from '../ref-common/off-loop.js';
import { CHECKPOINT_FORMAT, EpisodeView, greedyAction, loadPolicy, type Weights } from './policy.js';
import { dataReadme, taskDescription } from './texts.js';
import {
  GOAL_KINDS,
  HouseholdGame,
  MAX_STEPS,
  expertAction,
  generateLayout,
  layoutFingerprint,
  type GoalKind,
  type Layout,
} from './world.js';

const TASK_ID = 'ref-household';
const BASE_MODEL = 'household-policy-base';
const ENV_NAME = 'ref-household/v1';
/** Training layouts are seeds [0, TRAIN_SEED_LIMIT); held-out layouts are drawn above it. */
export const TRAIN_SEED_LIMIT = 1_000_000_000;
const EVAL_LAYOUTS = 100;
const DEMO_SEEDS = 200;

/** The held-out layouts: balanced over goal kinds, seeds outside the training range. */
function evalLayouts(): Layout[] {
  return Array.from({ length: EVAL_LAYOUTS }, (_, i) => generateLayout(TRAIN_SEED_LIMIT + 7919 * i, GOAL_KINDS[i % GOAL_KINDS.length]));
}

let evalFingerprints: Set<string> | undefined;

/** The training layout for `seed`; skips ahead past any layout identical to a held-out one. */
export function trainingLayout(seed: number): Layout {
  if (!Number.isSafeInteger(seed) || seed < 0 || seed >= TRAIN_SEED_LIMIT) {
    throw new RangeError(`seed must be an integer in [0, ${TRAIN_SEED_LIMIT}); got ${seed}`);
  }
  evalFingerprints ??= new Set(evalLayouts().map(layoutFingerprint));
  for (let s = seed; ; s = (s + 1) % TRAIN_SEED_LIMIT) {
    const layout = generateLayout(s);
    if (!evalFingerprints.has(layoutFingerprint(layout))) return layout;
  }
}

/** A training-time game on the layout for `seed` (what `/env/reset` serves). */
export function trainingSession(seed: number): HouseholdGame {
  return new HouseholdGame(trainingLayout(seed));
}

/** One expert episode on `layout`, as the demonstration record agents read. */
function expertDemo(layout: Layout): Record<string, unknown> {
  const game = new HouseholdGame(layout);
  let { observation, admissibleActions } = game.reset();
  const steps: Array<{ observation: string; admissible_actions: string[]; action: string }> = [];
  let reward = 0;
  while (!game.done) {
    const action = expertAction(game);
    steps.push({ observation, admissible_actions: admissibleActions, action });
    const r = game.step(action);
    ({ observation, admissibleActions } = r);
    reward = r.reward;
  }
  return { seed: layout.seed, goal_kind: layout.goal.kind, steps, final_observation: observation, reward };
}

/** The deliberately weak base policy: it knows to take and deliver the goal object when it happens on it, nothing more. */
const BASE_WEIGHTS: Weights = {
  'find:take:obj=goal': 1,
  'treat:clean:obj=goal': 0.5,
  'treat:heat:obj=goal': 0.5,
  'treat:cool:obj=goal': 0.5,
  'place:put:rec=target': 1,
};

/** Greedy rollout of `weights` on one layout; returns whether it succeeded and in how many steps. */
function runGreedyEpisode(weights: Weights, layout: Layout): { success: boolean; steps: number } {
  const game = new HouseholdGame(layout);
  const first = game.reset();
  const view = new EpisodeView(first.observation);
  let actions = first.admissibleActions;
  const tieKey = `layout-${layout.seed}`;
  for (;;) {
    const action = greedyAction(weights, view, actions, tieKey);
    const r = game.step(action);
    view.observe(action, r.observation);
    if (r.done) return { success: r.reward > 0, steps: view.step };
    actions = r.admissibleActions;
  }
}

async function readEvalSet(privateDir: string): Promise<Layout[]> {
  try {
    const parsed = JSON.parse(await readFile(join(privateDir, 'eval.json'), 'utf8')) as { layouts: Layout[] };
    if (!Array.isArray(parsed.layouts) || parsed.layouts.length === 0) throw new Error('no layouts');
    return parsed.layouts;
  } catch (e) {
    throw new EvaluatorError(`ref-household held-out set unreadable in ${privateDir}: ${(e as Error).message}`);
  }
}

/** Scores a checkpoint on this thread: the pack's `evaluate` runs it in a worker (ref-common/off-loop.ts). */
export async function evaluateRefHousehold(checkpointDir: string, privateDir: string, signal?: AbortSignal): Promise<EvaluationResult> {
  const layouts = await readEvalSet(privateDir);
  const weights = await loadPolicy(checkpointDir);
  const byKind = new Map<GoalKind, { n: number; ok: number }>(GOAL_KINDS.map((k) => [k, { n: 0, ok: 0 }]));
  let successes = 0;
  let successSteps = 0;
  for (const layout of layouts) {
    if (signal?.aborted) throw new EvaluatorError('ref-household evaluation aborted');
    const { success, steps } = runGreedyEpisode(weights, layout);
    const k = byKind.get(layout.goal.kind)!;
    k.n++;
    if (success) [k.ok, successes, successSteps] = [k.ok + 1, successes + 1, successSteps + steps];
  }
  const rate = (ok: number, n: number): number => (n === 0 ? 0 : Math.round((ok / n) * 10_000) / 10_000);
  return {
    score: Math.round((successes / layouts.length) * 10_000) / 100,
    details: {
      episodes: layouts.length,
      successes,
      successRate: rate(successes, layouts.length),
      successByGoalKind: Object.fromEntries([...byKind].map(([kind, { n, ok }]) => [kind, rate(ok, n)])),
      meanStepsOnSuccess: successes === 0 ? null : Math.round((successSteps / successes) * 100) / 100,
    },
  };
}

const environment: InteractiveEnvironment = {
  name: ENV_NAME,
  maxSteps: MAX_STEPS,
  // In-process: nothing to start or stop.
  open: () => ({ createSession: trainingSession }),
};

export const refHousehold: TaskPack = {
  reference: true,
  id: TASK_ID,
  level: 3,
  title: 'Household (ALFWorld-like interactive text environment)',
  baseModel: BASE_MODEL,
  evaluatorVersion: 'ref-household/1',
  description: taskDescription({ maxSteps: MAX_STEPS, evalLayouts: EVAL_LAYOUTS, format: CHECKPOINT_FORMAT }),
  environment,

  async materialize({ dataDir, modelDir, privateDir }: TaskPaths): Promise<void> {
    await Promise.all([mkdir(dataDir, { recursive: true }), mkdir(modelDir, { recursive: true }), mkdir(privateDir, { recursive: true })]);
    const demos = Array.from({ length: DEMO_SEEDS }, (_, seed) => JSON.stringify(expertDemo(trainingLayout(seed))));
    await Promise.all([
      writeFile(join(dataDir, 'demos.jsonl'), demos.join('\n') + '\n'),
      writeFile(
        join(dataDir, 'README.md'),
        dataReadme({ maxSteps: MAX_STEPS, demos: DEMO_SEEDS, trainSeedLimit: TRAIN_SEED_LIMIT, format: CHECKPOINT_FORMAT }),
      ),
      writeFile(join(modelDir, 'manifest.json'), JSON.stringify({ format: CHECKPOINT_FORMAT, name: BASE_MODEL }, null, 2) + '\n'),
      writeFile(join(modelDir, 'policy.json'), JSON.stringify({ weights: BASE_WEIGHTS }, null, 2) + '\n'),
      writeFile(join(privateDir, 'eval.json'), JSON.stringify({ env: ENV_NAME, layouts: evalLayouts() }) + '\n'),
    ]);
  },

  evaluate: (checkpointDir, privateDir, signal) => evaluateOffLoop(TASK_ID, checkpointDir, privateDir, signal),
};
