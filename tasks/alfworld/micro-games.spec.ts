import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { stubBackendHarness } from '../../test/servers/stub-backend-harness.js';
import { promptsProblems } from './prompt.js';

// The micro games of `a2rl data micro alfworld` (modules/datasets/micro, data files only: no torch),
// played by the pack's own backend (tasks/alfworld/env_backend.py) behind the bundled server: with
// a2rl_micro.json in the data directory it plays them with its micro engine and imports neither ALFWorld nor TextWorld.
const MARKER = `alfworld-micro-games-spec-${process.pid}`;
const { withServer } = stubBackendHarness('alfworld', MARKER, ['ALFWORLD_DATA']);
const exec = promisify(execFile);

let data: string;
beforeAll(async () => {
  data = await mkdtemp(path.join(os.tmpdir(), 'a2rl-alfworld-micro-'));
  await chmod(data, 0o755); // the confined server runs under a uid of its own
  await exec('python3', ['modules/datasets/micro/generate.py', 'alfworld', '--seed', '3', '--out', data, '--protocol', 'tasks/alfworld/protocol.json', '--no-model']);
});
afterAll(() => rm(data, { recursive: true, force: true }));

const walkthrough = async (split: string, game: string) =>
  (JSON.parse(await readFile(path.join(data, 'json_2.1.1', split, game), 'utf8')) as { walkthrough: string[] }).walkthrough;

describe('ALFWorld micro games through the pack\'s backend', () => {
  it('writes a usable few-shot file: two examples of every task type', async () => {
    expect(promptsProblems(JSON.parse(await readFile(path.join(data, 'alfworld_3prompts.json'), 'utf8')))).toEqual([]);
  });

  it('serves 60 train and 18 eval games; every eval game is won by its walkthrough and by no wrong move', async () => {
    await withServer(`--option data=${data}`, async (client) => {
      expect(await client.health()).toEqual({ protocol: 1, env: 'alfworld', splits: { train: 60, eval: 18 } });
      for (let i = 0; i < 18; i++) {
        const first = await client.reset('eval', i);
        expect(first.observation).toMatch(/^You are in the middle of a room\. Looking quickly around you, you see .+\.\nYour task is to: .+\.$/);
        const game = String(first.info.game);
        expect(first.info.task_type).toBe(game.split('/')[0]);
        expect(await client.step(first.sessionId, 'fly away')).toMatchObject({ observation: 'Nothing happens.', reward: 0, done: false, info: { won: false } });
        const moves = await walkthrough('valid_unseen', game);
        let last;
        for (const [n, move] of moves.entries()) {
          last = await client.step(first.sessionId, move);
          if (n < moves.length - 1) expect(last).toMatchObject({ done: false, reward: 0 });
        }
        expect(last).toEqual({ observation: expect.any(String), reward: 1, done: true, admissibleActions: [], info: { won: true } });
      }
    });
  }, 120_000);

  it('answers as ALFWorld does: arrival, opening, taking, ALFWorld 0.3\'s "move X to Y"', async () => {
    await withServer(`--option data=${data}`, async (client) => {
      let first = await client.reset('train', 0);
      for (let i = 1; !String(first.info.game).startsWith('pick_and_place_simple'); i++) first = await client.reset('train', i);
      const moves = await walkthrough('train', String(first.info.game));
      const go = await client.step(first.sessionId, moves[0]!);
      expect(go.observation).toMatch(/^You arrive at loc \d+\. (On the .+, you see .+\.|The .+ is closed\.)$/);
      expect(go.admissibleActions).toEqual(expect.arrayContaining(['inventory', 'look']));
      const put = moves.findIndex((m) => m.startsWith('put '));
      for (const move of moves.slice(1, put)) await client.step(first.sessionId, move);
      const [, object, receptacle] = /^put (.+) in\/on (.+)$/.exec(moves[put]!)!;
      expect(await client.step(first.sessionId, `move ${object} to ${receptacle}`)).toMatchObject({ observation: `You put the ${object} in/on the ${receptacle}.` });
    });
  }, 60_000);
});
