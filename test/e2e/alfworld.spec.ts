import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { PROMPT_KEYS } from '../../tasks/alfworld/prompt.js';
import { fakeAlfworldGame, fakeAlfworldSolver } from '../servers/fake-env-solvers.js';
import { processesWith } from '../servers/processes.js';
import { runA2rl } from './a2rl-cli.js';

// A full `a2rl run --task alfworld` through the built CLI: the scripted environment backend stands in
// for ALFWorld (started by the harness from A2RL_ENV_ALFWORLD_COMMAND, for the run's training episodes
// and again for each grading) and fake-vllm for vLLM. The agent plays one training game through
// /env/*, then submits a checkpoint that solves all four eval games.

const fakeVllm = path.resolve('test/servers/fake-vllm.mjs');
const envServer = path.resolve('tasks/paper-common/env_server.py');
const fakeBackend = path.resolve('test/servers/fake_env_backend.py');
const MARKER = `alfworld-e2e-${process.pid}`;
const EVAL = 4;

interface Ev {
  type: string;
  data: Record<string, unknown>;
}

let home: string;
let alfworldData: string;

beforeAll(() => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-alfworld-e2e-'));
  const dataset = path.join(home, 'datasets', 'alfworld');
  mkdirSync(path.join(dataset, 'base-model'), { recursive: true });
  writeFileSync(path.join(dataset, 'alfworld_3prompts.json'), JSON.stringify(Object.fromEntries(PROMPT_KEYS.map((k) => [k, `Your task is to: ${k}.\n> look\nNothing happens.\n`]))));
  writeFileSync(path.join(dataset, 'base-model', 'config.json'), '{}');
  writeFileSync(path.join(dataset, 'base-model', 'answers.json'), JSON.stringify({ rules: [], default: 'look' }));
  // One official-layout training game, so the pack has something to copy into data/train/.
  alfworldData = path.join(home, 'alfworld-data');
  const trial = path.join(alfworldData, 'json_2.1.1', 'train', 'pick_and_place_simple-Apple-None-Fridge-1', 'trial_T1');
  mkdirSync(trial, { recursive: true });
  writeFileSync(path.join(trial, 'traj_data.json'), '{}');
  writeFileSync(path.join(trial, 'game.tw-pddl'), JSON.stringify({ solvable: true }));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

function a2rl(args: string[]) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    A2RL_HOME: home,
    ALFWORLD_DATA: alfworldData,
    A2RL_SERVE_COMMAND: `${process.execPath} ${fakeVllm} {model_path} --port {port} --served-model-name {name}`,
    A2RL_SERVE_READY_TIMEOUT: '30s',
    A2RL_ENV_ALFWORLD_COMMAND: `python3 ${envServer} --backend ${fakeBackend} --port {port} --option kind=alfworld --option eval=${EVAL} --option marker=${MARKER}`,
    A2RL_ENV_READY_TIMEOUT: '30s',
  };
  delete env.A2RL_INFERENCE_URL;
  delete env.A2RL_ENV_ALFWORLD_URL;
  return runA2rl(args, { env });
}

describe('a2rl run --task alfworld with scripted stand-ins for ALFWorld and vLLM', () => {
  it('records the training rollouts played through /env, grades baseline and submission on the eval games, and stops every server', async () => {
    const solver = Buffer.from(JSON.stringify(fakeAlfworldSolver(EVAL))).toString('base64');
    const { solution } = fakeAlfworldGame('train', 1);
    const agent = `
      const url = process.env.GRADING_SERVER_URL;
      const post = async (route, body) => (await fetch(url + route, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
      const first = await post('/env/reset', { seed: 1 });
      console.log('RESET', first.observation.split('\\n').pop());
      let last;
      for (const action of ${JSON.stringify(solution)}) last = await post('/env/step', { session_id: first.session_id, action });
      console.log('EPISODE', JSON.stringify(last));
      console.log('SUBMIT', JSON.stringify(await post('/submit', { model_path: 'output/solver' })));
    `;
    const script = [
      'cp -r models/base-model output/solver',
      'chmod -R u+w output/solver',
      `echo ${solver} | base64 -d > output/solver/answers.json`,
      `echo ${Buffer.from(agent).toString('base64')} | base64 -d > code/agent.mjs`,
      'node code/agent.mjs',
    ].join(' && ');

    const r = await a2rl(['run', '--json', '--task', 'alfworld', '--agent-command', script, '--budget', '90s']);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.not.stringMatching(/Error/) });
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string; baseline: number; best: number; submissions: number; state: string };
    expect(summary).toMatchObject({ baseline: 0, best: 100, submissions: 1, state: 'completed' });

    const events = (await a2rl(['events', summary.runId, '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
    const rollouts = events.filter((e) => e.type === 'RolloutBatchRecorded');
    expect(rollouts.map((e) => e.data)).toEqual([expect.objectContaining({ env: 'alfworld/v1', episodes: 1, steps: 4, successRate: 1, meanReturn: 1 })]);
    const graded = events.filter((e) => e.type === 'SubmissionGraded');
    expect(graded.map((e) => e.data.score)).toEqual([100]);
    expect(graded[0]!.data.details).toMatchObject({ games: EVAL, successes: EVAL, fullEvalSet: false });

    expect(processesWith(MARKER)).toEqual([]);

    // The archived checkpoint grades the same again (a fresh environment server, the same eval games).
    const verify = await a2rl(['verify', summary.runId, '--rebuild', '--regrade']);
    expect({ code: verify.code, stdout: verify.stdout }).toEqual({ code: 0, stdout: expect.stringMatching(/1 submissions re-graded; chain, artifacts, projections and reports verified/) });
    expect(processesWith(MARKER)).toEqual([]);
  }, 240_000);
});
