import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EnvClient } from '../../modules/serving/env-client.js';
import { processesWith, rejection } from '../../test/servers/processes.js';
import { flat, STUBS, stubBackendHarness } from '../../test/servers/stub-backend-harness.js';
import { EvaluatorError } from '../task-pack.js';

// The real backend (tasks/alfworld/env_backend.py) behind the bundled server, started the way the
// harness starts it, with stub TextWorld/ALFWorld packages (test/servers/stubs) in place of the real ones.
const MARKER = `alfworld-env-backend-spec-${process.pid}`;
const { startError, withServer } = stubBackendHarness('alfworld', MARKER, ['ALFWORLD_DATA']);

/** A stub game (test/servers/stubs/textworld/envs/pddl.py): entities by ALFRED-like id until demangled. */
interface Scene {
  receptacles: string[];
  openable?: string[];
  contents: Record<string, string[]>;
  task: string;
  goal: { object: string; receptacle: string };
}
const MUG: Scene = {
  receptacles: ['Cabinet|1', 'CoffeeMachine|1', 'CounterTop|1'],
  openable: ['Cabinet|1'],
  contents: { 'CounterTop|1': ['Mug|1'], 'Cabinet|1': ['Plate|1'] },
  task: 'put some mug on coffeemachine.',
  goal: { object: 'Mug', receptacle: 'CoffeeMachine' },
};
const APPLE: Scene = {
  receptacles: ['Cabinet|1', 'CounterTop|1', 'Fridge|1'],
  openable: ['Cabinet|1', 'Fridge|1'],
  contents: { 'Cabinet|1': ['Apple|1'] },
  task: 'put some apple on countertop.',
  goal: { object: 'Apple', receptacle: 'CounterTop' },
};
const solvable = (scene: Scene, yes = true) => ({ pddl_domain: '', grammar: '', pddl_problem: '', solvable: yes, a2rl_stub_scene: scene });

/** Trial directories: [path, game.tw-pddl content (null: no game file), whether traj_data.json exists]. */
type Trial = [string, object | null, boolean?];
const TRAIN_TRIALS: Trial[] = [
  ['pick_and_place_simple-Mug-None-CoffeeMachine-5/trial_T20190907_000002', solvable(MUG)],
  ['look_at_obj_in_light-CD-None-DeskLamp-308/trial_T20190908_222917', solvable(APPLE)],
  ['pick_and_place_simple-Mug-None-CoffeeMachine-5/trial_T20190907_000001', solvable(MUG)],
  // Never served: a movable receptacle, a sliced object, unsolvable, no "solvable" key, a file missing.
  ['pick_and_place_with_movable_recep-Apple-Bowl-Fridge-1/trial_T20190906_000001', solvable(APPLE)],
  ['pick_heat_then_place_in_recep-AppleSliced-None-DiningTable-27/trial_T20190906_000002', solvable(APPLE)],
  ['pick_clean_then_place_in_recep-Cloth-None-Toilet-4/trial_T20190906_000003', solvable(MUG, false)],
  ['pick_cool_then_place_in_recep-Egg-None-Microwave-9/trial_T20190906_000004', { a2rl_stub_scene: MUG }],
  ['pick_two_obj_and_place-Pen-None-Desk-2/trial_T20190906_000005', null],
  ['pick_two_obj_and_place-Pen-None-Desk-2/trial_T20190906_000006', solvable(MUG), false],
];
const EVAL_TRIALS: Trial[] = [
  ['pick_cool_then_place_in_recep-Apple-None-CounterTop-7/trial_T20190909_000001', solvable(APPLE)],
  ['pick_heat_then_place_in_recep-PotatoSliced-None-Fridge-3/trial_T20190909_000004', solvable(MUG)],
  ['pick_and_place_simple-Apple-None-CounterTop-2/trial_T20190909_000002', solvable(APPLE)],
  ['pick_and_place_simple-Pen-None-Shelf-8/trial_T20190909_000005', solvable(MUG, false)],
  ['look_at_obj_in_light-Mug-None-DeskLamp-1/trial_T20190909_000003', solvable(MUG)],
];
/** What each split must serve, in order: the selected games' paths relative to the split, sorted. */
const TRAIN_GAMES = [
  'look_at_obj_in_light-CD-None-DeskLamp-308/trial_T20190908_222917/game.tw-pddl',
  'pick_and_place_simple-Mug-None-CoffeeMachine-5/trial_T20190907_000001/game.tw-pddl',
  'pick_and_place_simple-Mug-None-CoffeeMachine-5/trial_T20190907_000002/game.tw-pddl',
];
const EVAL_GAMES = [
  'look_at_obj_in_light-Mug-None-DeskLamp-1/trial_T20190909_000003/game.tw-pddl',
  'pick_and_place_simple-Apple-None-CounterTop-2/trial_T20190909_000002/game.tw-pddl',
  'pick_cool_then_place_in_recep-Apple-None-CounterTop-7/trial_T20190909_000001/game.tw-pddl',
];

let root: string;
let data: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-alfworld-backend-'));
  data = path.join(root, 'data');
  for (const [split, trials] of [['train', TRAIN_TRIALS], ['valid_unseen', EVAL_TRIALS]] as const) {
    for (const [dir, game, traj = true] of trials) {
      const trial = path.join(data, 'json_2.1.1', split, dir);
      await mkdir(trial, { recursive: true });
      if (traj) await writeFile(path.join(trial, 'traj_data.json'), JSON.stringify({ task_type: dir.split('-')[0] }));
      if (game) await writeFile(path.join(trial, 'game.tw-pddl'), JSON.stringify(game));
    }
  }
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe('the ALFWorld backend (on stub TextWorld/ALFWorld packages)', () => {
  it('serves the solvable trials, neither movable nor Sliced: train from json_2.1.1/train, eval from valid_unseen, each in path order', async () => {
    await withServer(`--option data=${data}`, async (client) => {
      expect(await client.health()).toEqual({ protocol: 1, env: 'alfworld', splits: { train: 3, eval: 3 } });
      for (const [split, games] of [['eval', EVAL_GAMES], ['train', TRAIN_GAMES]] as const) {
        const served: unknown[] = [];
        for (let i = 0; i < games.length; i++) {
          const first = await client.reset(split, i);
          served.push(first.info);
          await client.close(first.sessionId);
        }
        expect(served).toEqual(games.map((game) => ({ game, task_type: game.split('/')[0] })));
      }
      expect((await rejection(client.reset('eval', 3))).message).toMatch(/HTTP 400\): index must be an integer in \[0, 3\) for split eval/);
    });
  });

  it('plays a game: the first observation as the paper harness shows it (banner paragraph dropped, paragraphs joined by one newline), demangled commands, reward 1 and won once the task is done, and closes its environments', async () => {
    const log = path.join(root, 'textworld-play.log');
    await withServer(
      `--option data=${data}`,
      async (client) => {
        const first = await client.reset('train', 1);
        expect(first).toEqual({
          sessionId: expect.any(String),
          observation:
            'You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a coffeemachine 1, and a countertop 1.\n' +
            'Your task is to: put some mug on coffeemachine.',
          admissibleActions: ['go to cabinet 1', 'go to coffeemachine 1', 'go to countertop 1', 'help', 'inventory', 'look'],
          info: { game: TRAIN_GAMES[1], task_type: 'pick_and_place_simple-Mug-None-CoffeeMachine-5' },
        });
        const id = first.sessionId;
        expect(await client.step(id, 'take mug 1 from countertop 1')).toEqual({
          observation: 'Nothing happens.', reward: 0, done: false, admissibleActions: first.admissibleActions, info: { won: false },
        });
        const there = await client.step(id, 'go to countertop 1');
        expect(there).toMatchObject({ observation: 'You arrive at countertop 1. On the countertop 1, you see a mug 1.', reward: 0, done: false });
        expect(there.admissibleActions).toEqual(expect.arrayContaining(['take mug 1 from countertop 1', 'examine countertop 1', 'go to coffeemachine 1']));
        expect(await client.step(id, 'take mug 1 from countertop 1')).toMatchObject({ observation: 'You pick up the mug 1 from the countertop 1.', done: false });
        const machine = await client.step(id, 'go to coffeemachine 1');
        expect(machine.admissibleActions).toContain('move mug 1 to coffeemachine 1');
        expect(await client.step(id, 'move mug 1 to coffeemachine 1')).toEqual({
          observation: 'You move the mug 1 to the coffeemachine 1.', reward: 1, done: true, admissibleActions: [], info: { won: true },
        });
        expect((await rejection(client.step(id, 'look'))).message).toMatch(/HTTP 409\): session \S+ has finished its episode/);

        // Another game of another split, left by the client before it ends.
        const other = await client.reset('eval', 2);
        expect(other.observation).toBe(
          'You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, and a fridge 1.\nYour task is to: put some apple on countertop.',
        );
        expect(await client.step(other.sessionId, 'go to cabinet 1')).toMatchObject({ observation: 'You arrive at cabinet 1. The cabinet 1 is closed.' });
        expect(await client.step(other.sessionId, 'open cabinet 1')).toMatchObject({ observation: 'You open the cabinet 1. The cabinet 1 is open. In it, you see a apple 1.' });
        await client.close(other.sessionId);
      },
      { A2RL_STUB_TEXTWORLD_LOG: log },
    );
    // One TextWorld environment per episode, each closed when its episode ended or was closed.
    const events = (await readFile(log, 'utf8')).split('\n').filter(Boolean).map((line) => JSON.parse(line) as { event: string; env_id: string; gamefiles?: string[] });
    const made = events.filter((e) => e.event === 'make');
    expect(made.map((e) => e.gamefiles)).toEqual([[path.join(data, 'json_2.1.1', 'train', TRAIN_GAMES[1]!)], [path.join(data, 'json_2.1.1', 'valid_unseen', EVAL_GAMES[2]!)]]);
    expect(events.filter((e) => e.event === 'close').map((e) => e.env_id).sort()).toEqual(made.map((e) => e.env_id).sort());
  });

  it('ends an episode after max_steps steps when it is not won', async () => {
    await withServer(`--option data=${data} --option max_steps=2`, async (client) => {
      const { sessionId } = await client.reset('eval', 0);
      expect(await client.step(sessionId, 'look')).toMatchObject({ reward: 0, done: false, info: { won: false } });
      expect(await client.step(sessionId, 'inventory')).toEqual({
        observation: 'You are not carrying anything.', reward: 0, done: true, admissibleActions: [], info: { won: false },
      });
      expect((await rejection(client.step(sessionId, 'look'))).message).toMatch(/HTTP 409\)/);
    });
  });

  it('takes the games from ALFWORLD_DATA when no data option is given', async () => {
    await withServer('', async (client) => expect((await client.health()).splits).toEqual({ train: 3, eval: 3 }), { ALFWORLD_DATA: data });
  });

  it('fails at start-up, with the reason in the error, without games or with a broken ALFWorld install', async () => {
    const missing = await startError('');
    expect(missing).toBeInstanceOf(EvaluatorError);
    expect(missing.message).toMatch(/^the alfworld environment server exited before becoming ready \(exit code 1\): env /);
    expect(flat(missing)).toMatch(/last output of the alfworld environment server:ALFWORLD_DATA is not set: run alfworld-download and export ALFWORLD_DATA$/);

    // A data directory that is not what alfworld-download filled: said at start-up, not served as empty splits.
    const wrong = await startError(`--option data=${root}`);
    expect(flat(wrong)).toMatch(/json_2\.1\.1\/train is missing \(train split\): is ALFWORLD_DATA=.* the directory alfworld-download filled\?$/);

    // An alfworld package without its TextWorld environment (ahead of the stubs): caught before serving, not at the first episode.
    const broken = path.join(root, 'broken');
    await mkdir(path.join(broken, 'alfworld'), { recursive: true });
    await writeFile(path.join(broken, 'alfworld', '__init__.py'), '"""A broken ALFWorld install for a2rl\'s tests: the top-level package only."""\n');
    const partial = await startError(`--option data=${data}`, { PYTHONPATH: `${broken}${path.delimiter}${STUBS}` });
    expect(flat(partial)).toMatch(/exited before becoming ready \(exit code 1\).*ModuleNotFoundError: No module named 'alfworld\.agents'$/);

    // No ALFWorld at all (-S: not even an installed one).
    const absent = await startError(`--option data=${data}`, { PYTHONPATH: broken.replace(/broken$/, 'nothing') }, 'python3 -S');
    expect(flat(absent)).toMatch(/exited before becoming ready \(exit code 1\).*ModuleNotFoundError: No module named 'alfworld'$/);
    expect(processesWith(MARKER)).toEqual([]);
  });
});
