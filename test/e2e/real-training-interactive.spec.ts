import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { installedAgentPython } from '../../modules/agents/agent-python-env.js';
import { runA2rl } from './a2rl-cli.js';
import { expectRegradesToRecorded, expectVerifiedAndBundled } from './testing/agent-runs.js';

// The interactive half of the real ML path at micro scale on CPU: `a2rl data micro alfworld` makes micro
// ALFWorld-style games and a tiny real Llama; `a2rl run --agent reference-trl` replays the training games'
// walkthroughs through the run's /env API (expert demonstrations), fine-tunes with TRL's SFTTrainer in the
// evaluation's ReAct prompt, then plays training games through /env/reset and /env/step with the model
// sampling and updates it with a group-relative policy gradient (rl_grpo.py). The CPU engine grades each
// checkpoint by playing the held-out games.

// Measured on two cores (seed 1, micro rooms, 20 replies per game): `a2rl data micro alfworld` 391 s busy
// when it generates (npm test's pretest leaves seed 1 in the machine cache, and this copies it from there);
// baseline 16.67 (3/18 games); each grading 13-17 s on the CPU engine; SFT in the evaluation's ReAct
// prompt 38.9 (TRL's default gradient checkpointing off: 363 steps in 100 s instead of 23 in 90 s).
const python = installedAgentPython(process.env);
const why = python ? null : 'the agents\' Python is not installed (npm test\'s pretest builds it: a2rl agents python install)';
const maybe = why ? describe.skip : describe;
if (why) console.warn(`skipping test/e2e/real-training-interactive.spec.ts: ${why}`);

let home: string;
let gamesDir: string;
const env = (): NodeJS.ProcessEnv => {
  const e: NodeJS.ProcessEnv = { ...process.env, A2RL_HOME: home };
  for (const name of ['A2RL_INFERENCE_URL', 'A2RL_SERVE_COMMAND', 'A2RL_SERVE_ENGINE', 'A2RL_AGENT_PYTHON', 'A2RL_AGENT_PYTHON_ALFWORLD', 'ALFWORLD_DATA']) delete e[name];
  // The games `a2rl data micro alfworld` installed, copied out of A2RL_HOME: the confined environment
  // server is never given a path inside A2RL_HOME (server-view.ts, bindable).
  e.ALFWORLD_DATA = gamesDir;
  return e;
};
const a2rl = (args: string[]) => runA2rl(args, { env: env() });

interface Summary {
  runId: string;
  baseline: number;
  best: number;
  submissions: number;
  state: string;
}

maybe('reference-trl post-trains a real model on alfworld (micro, CPU) through the recorded environment API', () => {
  let summary: Summary;

  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-real-training-alfworld-'));
    gamesDir = `${home}-games`;
    const micro = await a2rl(['data', 'micro', 'alfworld', '--seed', '1']);
    if (micro.code !== 0) throw new Error(`a2rl data micro alfworld failed (${micro.code}): ${micro.stderr}`);
    cpSync(path.join(home, 'datasets', 'alfworld'), gamesDir, { recursive: true });
    const run = await a2rl(['run', '--task', 'alfworld', '--agent', 'reference-trl', '--budget', '6m', '--json']);
    if (run.code !== 0) throw new Error(`a2rl run failed (${run.code}): ${run.stderr}\n${run.stdout}`);
    summary = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Summary;
  }, 25 * 60_000);
  afterAll(() => {
    rmSync(home, { recursive: true, force: true });
    rmSync(gamesDir, { recursive: true, force: true });
  });

  it('trains on expert demonstrations and on its own rollouts, submitting safetensors checkpoints', async () => {
    console.log(`real interactive training: baseline ${summary.baseline}, best ${summary.best}, ${summary.submissions} submissions`);
    expect(summary.state).toBe('completed');
    expect(summary.submissions).toBeGreaterThanOrEqual(1);
    expect(summary.best).toBeGreaterThan(summary.baseline);

    const events = await a2rl(['events', summary.runId, '--json']);
    const recorded = events.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> });
    for (const sub of recorded.filter((e) => e.type === 'SubmissionReceived')) {
      const files = (sub.data.files ?? sub.data.manifest) as { path: string }[];
      expect(files.map((f) => f.path)).toContain('model.safetensors');
      expect(files.some((f) => /\.(bin|pt|pth|pkl)$/.test(f.path))).toBe(false);
    }
    // Every episode the agent played went through the harness and was recorded.
    expect(recorded.some((e) => e.type === 'RolloutBatchRecorded')).toBe(true);
    const launched = recorded.filter((e) => e.type === 'ProcessStarted').map((e) => (e.data.argv as string[]).join(' '));
    expect(launched.some((a) => /code\/collect\.py/.test(a))).toBe(true);
    expect(launched.some((a) => /code\/sft\.py/.test(a))).toBe(true);
  });

  it('verifies, exports and verifies the bundle offline', async () => {
    await expectVerifiedAndBundled(a2rl, summary.runId, home);
  });

  it('regrades the archived checkpoints to the recorded scores', async () => {
    await expectRegradesToRecorded(a2rl, summary.runId);
  }, 20 * 60_000);

  it('leaves the workspace checkpoints as safetensors directories', () => {
    const output = path.join(home, 'workspaces', summary.runId, 'output');
    const steps = readdirSync(output).filter((d) => !d.endsWith('.work') && d !== 'expert');
    expect(steps.length).toBeGreaterThanOrEqual(1);
    for (const step of steps) expect(readdirSync(path.join(output, step))).toContain('model.safetensors');
  });
});
