import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createEvaluationContext } from '../../modules/serving/model-server.js';
import { loadServingConfig } from '../../modules/serving/serving.config.js';
import { fakeAlfworldGame, fakeAlfworldSolver } from '../../test/servers/fake-env-solvers.js';
import { processesWith } from '../../test/servers/processes.js';
import type { ScriptedAnswers } from '../../test/servers/openai-test-server.js';
import { DatasetMissingError } from '../paper-common/dataset.js';
import { EvaluatorError, InvalidCheckpointError, type TaskPaths } from '../task-pack.js';
import { alfworld, MICRO_SETTINGS_FILE, TRAIN_GAMES_LIST } from './index.js';
import { MAX_STEPS, MICRO_MAX_STEPS, processObservation, PROMPT_KEYS, PROMPTS_FILE, reactPolicy, taskTypeKey } from './prompt.js';

const FAKE_VLLM = path.resolve('test/servers/fake-vllm.mjs');
const ENV_SERVER = path.resolve('tasks/paper-common/env_server.py');
const FAKE_BACKEND = path.resolve('test/servers/fake_env_backend.py');

const EVAL = 6;
const SOLVER = fakeAlfworldSolver(EVAL);

/** Invented few-shot examples in the prompts file's format (never the real ones). */
const PROMPTS = Object.fromEntries(PROMPT_KEYS.map((k) => [k, `You are in a test room.\nYour task is to: ${k}.\n> think: ${k}\nOK.\n`]));

let root: string;
let n = 0;
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-alfworld-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

async function checkpoint(answers: ScriptedAnswers | null, config = true): Promise<string> {
  const dir = path.join(root, `ckpt-${n++}`);
  await mkdir(dir);
  if (config) await writeFile(path.join(dir, 'config.json'), '{}');
  if (answers) await writeFile(path.join(dir, 'answers.json'), JSON.stringify(answers));
  return dir;
}

/** Marks this file's environment servers, so checks for leftovers ignore other suites running at the same time. */
const MARKER = `alfworld-spec-${process.pid}`;

function context(backendOptions = `--option kind=alfworld --option eval=${EVAL}`, env: NodeJS.ProcessEnv = {}) {
  const config = loadServingConfig({
    A2RL_SERVE_COMMAND: `${process.execPath} ${FAKE_VLLM} {model_path} --port {port} --served-model-name {name}`,
    A2RL_SERVE_READY_TIMEOUT: '20s',
    A2RL_ENV_ALFWORLD_COMMAND: `python3 ${ENV_SERVER} --backend ${FAKE_BACKEND} --port {port} ${backendOptions} --option marker=${MARKER}`,
    A2RL_ENV_READY_TIMEOUT: '20s',
    ...env,
  });
  return createEvaluationContext(config, 'cpu', { stopGraceMs: 1_000, pollMs: 50 });
}

/** Live environment servers of this file (they must never outlive an evaluation). */
const envServers = () => processesWith(MARKER);

async function privateDirWithPrompts(): Promise<string> {
  const dir = path.join(root, `private-${n++}`);
  await mkdir(dir);
  await writeFile(path.join(dir, PROMPTS_FILE), JSON.stringify(PROMPTS));
  return dir;
}

describe('the alfworld ReAct prompt (the paper harness\'s text completion)', () => {
  const reset = { observation: 'You are here.\nYour task is to: cool an egg.', admissibleActions: [], info: { task_type: 'pick_cool_then_place_in_recep-Egg-None-Microwave-5' } };

  it('maps game directories to their task type and puts that type\'s two examples (1 then 0) before the task', () => {
    expect(taskTypeKey('pick_two_obj_and_place-Pen-None-Drawer-3')).toBe('puttwo');
    expect(taskTypeKey('look_at_obj_in_light-Book-None-DeskLamp-1')).toBe('examine');
    expect(taskTypeKey('pick_heat_then_place_in_recep-Egg-None-Fridge-1')).toBe('heat');
    expect(taskTypeKey('slice_and_place')).toBeNull();
    const transcript = reactPolicy(PROMPTS).start(reset);
    expect(transcript.input()).toEqual({ prompt: `Interact with a household to solve a task. Here are two examples.\n${PROMPTS.react_cool_1}${PROMPTS.react_cool_0}\nHere is the task.\nYou are here.\nYour task is to: cool an egg.\n>` });
    expect(() => reactPolicy(PROMPTS).start({ observation: '', admissibleActions: [], info: { task_type: 'unknown' } })).toThrow(/unknown ALFWorld task type/);
  });

  it('takes the stripped reply as the action, answers think: with OK., and grows the prompt by " <action>\\n<observation>\\n>"', () => {
    const policy = reactPolicy(PROMPTS);
    expect(policy.request).toEqual({ api: 'completion', maxTokens: 100, stop: ['\n'], temperature: 0 });
    const transcript = policy.start(reset);
    const init = (transcript.input() as { prompt: string }).prompt;
    expect(transcript.parseReply('  go to fridge 1 ')).toEqual({ action: 'go to fridge 1' });
    expect(transcript.parseReply('> go to fridge 1')).toEqual({ action: '> go to fridge 1' });
    expect(transcript.parseReply('think: the egg is in the fridge')).toEqual({ think: true });
    transcript.record(' think: the egg is in the fridge', null, null);
    transcript.record('go to fridge 1', 'go to fridge 1', { observation: 'You arrive at loc 7. The fridge 1 is closed.', reward: 0, done: false, admissibleActions: [], info: {} });
    expect((transcript.input() as { prompt: string }).prompt).toBe(`${init} think: the egg is in the fridge\nOK.\n> go to fridge 1\nThe fridge 1 is closed.\n>`);
    expect(processObservation('You arrive at countertop 1. On it, a mug.')).toBe('You arrive at countertop 1. On it, a mug.');
  });

  it('sends exactly this first prompt for a fixed game (snapshot)', () => {
    expect(reactPolicy(PROMPTS).start(reset).input()).toMatchSnapshot();
  });
});

describe('alfworld materialize', () => {
  const trial = async (base: string, task: string, solvable: boolean) => {
    const dir = path.join(base, task, 'trial_T1');
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'traj_data.json'), JSON.stringify({ task_type: task.split('-')[0] }));
    await writeFile(path.join(dir, 'game.tw-pddl'), JSON.stringify({ solvable, pddl: '(define)' }));
  };

  async function fixture(prompts: unknown = PROMPTS): Promise<{ paths: TaskPaths; data: string }> {
    const base = path.join(root, `mat-${n++}`);
    const data = path.join(base, 'alfworld-data');
    const train = path.join(data, 'json_2.1.1', 'train');
    await trial(train, 'pick_heat_then_place_in_recep-Egg-None-Fridge-1', true);
    await trial(train, 'look_at_obj_in_light-Book-None-DeskLamp-2', true);
    await trial(train, 'pick_and_place_simple-Mug-None-Cabinet-3', false); // unsolvable: not served
    await trial(train, 'pick_and_place_with_movable_recep-Pen-Bowl-Shelf-4', true); // movable: not served
    await trial(train, 'pick_clean_then_place_in_recep-Apple-Sliced-None-Sink-5', true); // Sliced: not served
    const datasetDir = path.join(base, 'dataset');
    await mkdir(path.join(datasetDir, 'base-model'), { recursive: true });
    await writeFile(path.join(datasetDir, 'base-model', 'config.json'), '{}');
    await writeFile(path.join(datasetDir, PROMPTS_FILE), JSON.stringify(prompts));
    const paths = { datasetDir, dataDir: path.join(base, 'data'), modelDir: path.join(base, 'model'), privateDir: path.join(base, 'private') };
    return { paths, data };
  }

  async function withAlfworldData<T>(value: string | undefined, work: () => Promise<T>): Promise<T> {
    const saved = process.env.ALFWORLD_DATA;
    if (value === undefined) delete process.env.ALFWORLD_DATA;
    else process.env.ALFWORLD_DATA = value;
    try {
      return await work();
    } finally {
      if (saved === undefined) delete process.env.ALFWORLD_DATA;
      else process.env.ALFWORLD_DATA = saved;
    }
  }

  it('copies the served training games (solvable, no movable/Sliced) in server order, the prompts and the base model', async () => {
    const { paths, data } = await fixture();
    await withAlfworldData(data, () => alfworld.materialize(paths));
    expect(await readFile(path.join(paths.dataDir, TRAIN_GAMES_LIST), 'utf8')).toBe(
      'look_at_obj_in_light-Book-None-DeskLamp-2/trial_T1/game.tw-pddl\npick_heat_then_place_in_recep-Egg-None-Fridge-1/trial_T1/game.tw-pddl\n',
    );
    expect((await readdir(path.join(paths.dataDir, 'train'))).sort()).toEqual(['look_at_obj_in_light-Book-None-DeskLamp-2', 'pick_heat_then_place_in_recep-Egg-None-Fridge-1']);
    expect(await readdir(path.join(paths.dataDir, 'train', 'look_at_obj_in_light-Book-None-DeskLamp-2', 'trial_T1'))).toEqual(['game.tw-pddl', 'traj_data.json']);
    expect(JSON.parse(await readFile(path.join(paths.privateDir, PROMPTS_FILE), 'utf8'))).toEqual(PROMPTS);
    expect(JSON.parse(await readFile(path.join(paths.dataDir, PROMPTS_FILE), 'utf8'))).toEqual(PROMPTS);
    expect(await readdir(paths.modelDir)).toEqual(['config.json']);
    // Fetched (or hand-made) data: no micro step limit anywhere.
    expect(await readdir(paths.privateDir)).not.toContain(MICRO_SETTINGS_FILE);
    expect(await readdir(paths.dataDir)).not.toContain(MICRO_SETTINGS_FILE);
  });

  it('with micro assets (the manifest says micro: true), tells grader and agent the micro step limit of the protocol file', async () => {
    const { paths, data } = await fixture();
    await writeFile(path.join(paths.datasetDir!, 'manifest.json'), JSON.stringify({ task: 'alfworld', complete: true, micro: true, seed: 1, generator: 'g', files: [] }));
    await withAlfworldData(data, () => alfworld.materialize(paths));
    expect(MICRO_MAX_STEPS).toBeLessThan(MAX_STEPS);
    for (const dir of [paths.privateDir, paths.dataDir]) {
      expect(JSON.parse(await readFile(path.join(dir, MICRO_SETTINGS_FILE), 'utf8'))).toEqual({ maxSteps: MICRO_MAX_STEPS, deviation: 'alfworld-micro-max-steps' });
    }
  });

  it('says how to get what is missing: ALFWORLD_DATA, the games, or a complete prompts file', async () => {
    const { paths, data } = await fixture();
    await expect(withAlfworldData(undefined, () => alfworld.materialize(paths))).rejects.toThrow(/ALFWORLD_DATA is not set: install ALFWorld/);
    await expect(withAlfworldData(path.join(root, 'nowhere'), () => alfworld.materialize(paths))).rejects.toThrow(/json_2.1.1\/train is missing/);
    const bad = await fixture({ ...PROMPTS, react_heat_0: '' });
    const err = await withAlfworldData(data, () => alfworld.materialize(bad.paths)).catch((e: Error) => e);
    expect(err).toBeInstanceOf(DatasetMissingError);
    expect((err as Error).message).toMatch(/react_heat_0 is missing or empty: run `a2rl data fetch alfworld`/);
  });
});

describe('alfworld evaluation on an environment server', () => {
  it('scores a checkpoint that solves every game 100, per task type, and stops every server', async () => {
    const result = await alfworld.evaluate(await checkpoint(SOLVER), await privateDirWithPrompts(), undefined, context());
    expect(result.score).toBe(100);
    expect(result.details).toMatchObject({ games: EVAL, successes: EVAL, successRate: 1, meanReplies: 4, outOfSteps: 0, env: 'fake-alfworld', fullEvalSet: false });
    expect(result.details.byTaskType).toEqual({
      put: { games: 1, successes: 1, successRate: 1 }, clean: { games: 1, successes: 1, successRate: 1 }, heat: { games: 1, successes: 1, successRate: 1 },
      cool: { games: 1, successes: 1, successRate: 1 }, examine: { games: 1, successes: 1, successRate: 1 }, puttwo: { games: 1, successes: 1, successRate: 1 },
    });
    expect(envServers()).toEqual([]);
  });

  it('counts thinking against the step limit: a model that only thinks fails every game after MAX_STEPS replies', async () => {
    const result = await alfworld.evaluate(await checkpoint({ rules: [], default: 'think: where could it be?' }), await privateDirWithPrompts(), undefined, context());
    expect(result.score).toBe(0);
    expect(result.details).toMatchObject({ successes: 0, maxSteps: MAX_STEPS, meanReplies: MAX_STEPS, thinkReplies: EVAL * MAX_STEPS, outOfSteps: EVAL });
  });

  it('grades micro assets with the micro step limit (deviation alfworld-micro-max-steps) when materialize recorded it', async () => {
    const dir = await privateDirWithPrompts();
    await writeFile(path.join(dir, MICRO_SETTINGS_FILE), JSON.stringify({ maxSteps: MICRO_MAX_STEPS, deviation: 'alfworld-micro-max-steps' }));
    const result = await alfworld.evaluate(await checkpoint({ rules: [], default: 'think: where could it be?' }), dir, undefined, context());
    expect(result.details).toMatchObject({ successes: 0, maxSteps: MICRO_MAX_STEPS, meanReplies: MICRO_MAX_STEPS, thinkReplies: EVAL * MICRO_MAX_STEPS, outOfSteps: EVAL });
  });

  it('scores partial success by the games won', async () => {
    // Only the game whose object is the mug (eval game 1, fridge) is solved.
    const mugOnly: ScriptedAnswers = { rules: SOLVER.rules.filter((r) => !/you see a|You pick up|you carry/.test(r.contains) || r.contains.includes('mug')), default: 'look' };
    const result = await alfworld.evaluate(await checkpoint(mugOnly), await privateDirWithPrompts(), undefined, context());
    expect(result.score).toBe(16.67);
    expect(result.details).toMatchObject({ successes: 1, successRate: 0.1667 });
    expect((result.details.byTaskType as Record<string, { successes: number }>).examine.successes).toBe(1); // eval game 1 is look_at_obj
  });

  it('turns an environment server failing mid-evaluation into an EvaluatorError and leaves no server running', async () => {
    const err = await alfworld.evaluate(await checkpoint(SOLVER), await privateDirWithPrompts(), undefined, context(`--option kind=alfworld --option eval=${EVAL} --option crash_after=3`)).catch((e: Error) => e);
    expect(err).toBeInstanceOf(EvaluatorError);
    expect((err as Error).message).toMatch(/HTTP 500.*fake backend crashed/);
    expect(envServers()).toEqual([]);
  });

  it('reports an environment server that never becomes ready, and one that ignores SIGTERM is still stopped', async () => {
    const slow = await alfworld.evaluate(await checkpoint(SOLVER), await privateDirWithPrompts(), undefined,
      context('--option startup_delay=30', { A2RL_ENV_READY_TIMEOUT: '1s' })).catch((e: Error) => e);
    expect(slow).toBeInstanceOf(EvaluatorError);
    expect((slow as Error).message).toMatch(/the alfworld environment server did not become ready within 1 s \(A2RL_ENV_READY_TIMEOUT\)/);
    const stubborn = await alfworld.evaluate(await checkpoint(SOLVER), await privateDirWithPrompts(), undefined, context(`--option kind=alfworld --option eval=2 --option ignore_sigterm=1`));
    expect(stubborn.score).toBe(100);
    expect(envServers()).toEqual([]);
  });

  it('refuses a checkpoint without config.json before starting anything', async () => {
    await expect(alfworld.evaluate(await checkpoint(SOLVER, false), await privateDirWithPrompts(), undefined, context())).rejects.toThrow(InvalidCheckpointError);
  });

  it('fails clearly when the bundled ALFWorld backend cannot start on this machine', async () => {
    const config = loadServingConfig({ A2RL_ENV_READY_TIMEOUT: '30s', ALFWORLD_DATA: '' });
    const ctx = createEvaluationContext(config, 'cpu', { stopGraceMs: 1_000, pollMs: 50 });
    const saved = process.env.ALFWORLD_DATA;
    delete process.env.ALFWORLD_DATA;
    try {
      const err = await ctx.envServer('alfworld').catch((e: Error) => e);
      expect(err).toBeInstanceOf(EvaluatorError);
      expect((err as Error).message).toMatch(/the alfworld environment server exited before becoming ready \(exit code 1\)[\s\S]*ALFWORLD_DATA is not set/);
    } finally {
      if (saved !== undefined) process.env.ALFWORLD_DATA = saved;
    }
  });
});

describe('the alfworld training environment', () => {
  it('serves training games by seed (modulo the split), never eval ones, and ends an episode at MAX_STEPS', async () => {
    const training = await alfworld.environment!.open(context('--option kind=alfworld --option train=12'));
    try {
      const session = await training.createSession(13); // game 1 of 12
      const first = await session.reset();
      expect(first.info).toMatchObject({ game: 'train/look_at_obj_in_light-1/trial_0/game.tw-pddl', task_type: 'look_at_obj_in_light' });
      expect(first.observation).toContain('Your task is to: put some apple in fridge.');
      let last = await session.step('look');
      for (let i = 2; i <= MAX_STEPS && !last.done; i++) last = await session.step('look');
      expect(last).toMatchObject({ done: true, reward: 0 });
      const winner = await training.createSession(1);
      await winner.reset();
      const { solution } = fakeAlfworldGame('train', 1);
      for (const action of solution.slice(0, -1)) expect((await winner.step(action)).done).toBe(false);
      expect(await winner.step(solution.at(-1)!)).toMatchObject({ done: true, reward: 1, info: { won: true } });
      expect(() => training.createSession(-1)).toThrow(RangeError);
    } finally {
      await training.close?.();
    }
    expect(envServers()).toEqual([]);
  });
});
