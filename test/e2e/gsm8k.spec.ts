import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { runA2rl } from './a2rl-cli.js';

// A full `a2rl run --task gsm8k` through the built CLI on the fixture-sized dataset, with the scripted
// fake-vllm server standing in for vLLM: the baseline is the fixture base checkpoint (2/8 correct as
// OpenCompass's gsm8k post-processing reads it), the agent submits a copy whose answers.json makes it right on 6/8.

const fixtures = path.resolve('tasks/gsm8k/fixtures');
const fakeVllm = path.resolve('test/servers/fake-vllm.mjs');

interface Ev {
  type: string;
  data: Record<string, unknown>;
}

let home: string;

beforeAll(() => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-gsm8k-e2e-'));
  cpSync(fixtures, path.join(home, 'datasets', 'gsm8k'), { recursive: true });
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

async function a2rl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    A2RL_HOME: home,
    A2RL_SERVE_COMMAND: `${process.execPath} ${fakeVllm} {model_path} --port {port} --served-model-name {name}`,
    A2RL_SERVE_READY_TIMEOUT: '30s',
  };
  delete env.A2RL_INFERENCE_URL;
  return runA2rl(args, { env: env });
}

describe('a2rl run --task gsm8k with the scripted server standing in for vLLM', () => {
  it('grades the base checkpoint as the baseline and the submitted better checkpoint at their exact accuracies', async () => {
    const better = Buffer.from(readFileSync(path.join(fixtures, 'good-model', 'answers.json'))).toString('base64');
    const submit = `node -e 'fetch(process.env.GRADING_SERVER_URL + "/submit", {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify({model_path: "output/better"})}).then(async r => console.log("SUBMIT", r.status, await r.text()))'`;
    const script = [
      'cp -r models/base-model output/better',
      'chmod -R u+w output/better',
      `echo ${better} | base64 -d > output/better/answers.json`,
      submit,
    ].join(' && ');

    const r = await a2rl(['run', '--json', '--task', 'gsm8k', '--agent-command', script, '--budget', '60s']);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.not.stringMatching(/Error/) });
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string; baseline: number; best: number; submissions: number; state: string };
    expect(summary).toMatchObject({ baseline: 25, best: 75, submissions: 1, state: 'completed' });

    const events = (await a2rl(['events', summary.runId, '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
    const graded = events.filter((e) => e.type === 'SubmissionGraded');
    expect(graded.map((e) => e.data.score)).toEqual([75]);
    // The model server ran confined on the staged checkpoint (docs/security.md, "What each server can reach").
    expect((graded[0]!.data.details as { serverIsolation: unknown[] }).serverIsolation).toEqual([expect.objectContaining({ sandbox: 'bwrap', network: 'namespace', uid: expect.any(Number) })]);
  }, 180_000);
});
