import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { dropInPackagesDir } from '../../modules/sandbox/agent-python.js';
import { FakeTask, startGradingServer, type TestRun, type TestServer } from '../../modules/grading/testing/grading-fixtures.js';
import { createEvaluationContext } from '../../modules/serving/model-server.js';
import { loadServingConfig } from '../../modules/serving/serving.config.js';
import { processesWith } from '../../test/servers/processes.js';
import { alfworld } from '../alfworld/index.js';
import type { InteractiveEnvironment, TaskPack } from '../task-pack.js';
import { webshop } from '../webshop/index.js';

// Unmodified training code written for the real ALFWorld and WebShop packages, run with a2rl's
// drop-in clients on PYTHONPATH against the run's /env API (the scripted stand-in backend behind
// the bundled environment server): every episode it plays is recorded as RolloutBatchRecorded.

const ENV_SERVER = path.resolve('tasks/paper-common/env_server.py');
const FAKE_BACKEND = path.resolve('test/servers/fake_env_backend.py');
const MARKER = `drop-in-spec-${process.pid}`;

const ALFWORLD_TRAINING = `
import alfworld.agents.environment as environment
import alfworld.agents.modules.generic as generic
from alfworld.agents.environment import get_environment

config = generic.load_config()
env_type = config["env"]["type"]
env = get_environment(env_type)(config, train_eval="train")
env = env.init_env(batch_size=2)

won, played = 0, 0
for episode in range(6):
    obs, infos = env.reset()
    assert obs[0].startswith("-= Welcome to TextWorld, ALFRED! =-"), obs[0]
    dones = [False] * len(obs)
    while not all(dones):
        actions = []
        for i in range(len(obs)):
            admissible = infos["admissible_commands"][i]
            plan = infos.get("extra.expert_plan", [[]] * len(obs))[i]
            actions.append(plan[0] if plan and plan[0] in admissible else (admissible[0] if admissible else "look"))
        obs, scores, dones, infos = env.step(actions)
    won += sum(1 for w in infos["won"] if w)
    played += len(obs)
print(f"played={played} won={won} gamefile={infos['extra.gamefile'][0]}")
`;

const WEBSHOP_TRAINING = `
import re
from web_agent_site.envs import WebAgentTextEnv

env = WebAgentTextEnv(observation_mode="text", num_products=1000)
rewards = []
for session in range(3):
    obs, _ = env.reset(session=session)
    target = re.search(r"product (FAKE\\d+)", env.instruction_text).group(1).lower()
    assert env.get_available_actions()["has_search_bar"]
    obs, reward, done, info = env.step(f"search[{target}]")
    assert target in env.get_available_actions()["clickables"], env.get_available_actions()
    env.step(f"click[{target}]")
    obs, reward, done, info = env.step("click[buy now]")
    assert done and info is None
    rewards.append(reward)
print("rewards=" + ",".join(str(r) for r in rewards))
`;

let server: TestServer;
let dir: string;
beforeAll(async () => {
  server = await startGradingServer();
  dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-drop-in-'));
});
afterAll(async () => {
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The pack's training environment, its server started from the bundled env_server.py with the scripted backend. */
function servedBy(pack: TaskPack, kind: string): InteractiveEnvironment {
  const name = kind.toUpperCase();
  const ctx = createEvaluationContext(
    loadServingConfig({
      [`A2RL_ENV_${name}_COMMAND`]: `python3 ${ENV_SERVER} --backend ${FAKE_BACKEND} --port {port} --option kind=${kind} --option marker=${MARKER}`,
      A2RL_ENV_READY_TIMEOUT: '20s',
    }),
    'cpu',
    { stopGraceMs: 1_000, pollMs: 50 },
  );
  return { ...pack.environment!, open: (_ctx, signal) => pack.environment!.open(ctx, signal) };
}

/** Runs a training script with the drop-ins on PYTHONPATH and the run's URL, as the sandbox sets them. */
function train(script: string, r: TestRun): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const file = path.join(dir, `train-${r.ctx.runId}.py`);
    void writeFile(file, script).then(() => {
      const child = spawn('python3', [file], {
        cwd: dir,
        env: { PATH: process.env.PATH, PYTHONPATH: `${dropInPackagesDir()}:${dir}`, GRADING_SERVER_URL: r.url, DATA_PATH: r.ws.dataDir },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c));
      child.stderr.on('data', (c: Buffer) => (stderr += c));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  });
}

describe('drop-in environment clients', () => {
  it('records every episode of an unmodified ALFWorld training script (batched, expert plans, admissible actions)', async () => {
    const r = await server.newRun({ task: new FakeTask(servedBy(alfworld, 'alfworld')) });
    const out = await train(ALFWORLD_TRAINING, r).finally(() => server.registry.unregister(r.ctx.runId)); // flushes the last, partial batch
    expect({ code: out.code, stderr: out.stderr }).toEqual({ code: 0, stderr: '' });
    expect(out.stdout).toContain(`played=12 won=12 gamefile=${r.ws.dataDir}/train/train/`);
    const batches = r.events.filter((e) => e.type === 'RolloutBatchRecorded').map((e) => e.data as { env: string; episodes: number; steps: number; successRate: number });
    expect(batches.map((b) => b.env)).toEqual(['alfworld/v1', 'alfworld/v1']);
    expect(batches.reduce((n, b) => n + b.episodes, 0)).toBe(12);
    expect(batches.reduce((n, b) => n + b.steps, 0)).toBe(12 * 4);
    expect(batches.every((b) => b.successRate === 1)).toBe(true);
    expect(processesWith(MARKER)).toEqual([]);
  }, 60_000);

  it('records the episodes of an unmodified WebShop script (reset(session=…), get_available_actions, step)', async () => {
    const r = await server.newRun({ task: new FakeTask(servedBy(webshop, 'webshop')) });
    const out = await train(WEBSHOP_TRAINING, r).finally(() => server.registry.unregister(r.ctx.runId));
    expect({ code: out.code, stderr: out.stderr, stdout: out.stdout.trim() }).toEqual({ code: 0, stderr: '', stdout: 'rewards=1.0,1.0,1.0' });
    const batches = r.events.filter((e) => e.type === 'RolloutBatchRecorded').map((e) => e.data);
    expect(batches).toEqual([expect.objectContaining({ env: 'webshop/v1', episodes: 3, steps: 9, successRate: 1 })]);
  }, 60_000);

  it('refuses the held-out splits and unserved simulators, and passes the API’s refusals on, in one line', async () => {
    const r = await server.newRun();
    const script = `
from a2rl_env_client import EnvApiError
from alfworld.agents.environment import AlfredTWEnv, get_environment
for attempt in (lambda: AlfredTWEnv({}, train_eval="eval_out_of_distribution"), lambda: get_environment("AlfredThorEnv")({})):
    try:
        attempt()
    except EnvApiError as err:
        print(err)
try:
    AlfredTWEnv({}).init_env(1).reset()
except EnvApiError as err:
    print(err)
`;
    const out = await train(script, r);
    const lines = out.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^train_eval='eval_out_of_distribution': the evaluation games are held out by the a2rl harness/);
    expect(lines[1]).toMatch(/AlfredThorEnv \(the THOR simulator\) is not served/);
    expect(lines[2]).toBe('POST /env/reset answered 404: task fake-task is not interactive: it has no /env endpoints');
  }, 30_000);
});
