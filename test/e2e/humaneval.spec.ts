import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { HumanEvalProblem } from '../../tasks/humaneval/completion.js';
import { HOSTILE } from '../../tasks/humaneval/fixtures/hostile-completions.js';
import { runA2rl } from './a2rl-cli.js';

// A full `a2rl run --task humaneval` through the built CLI, as root with the sandbox, the scripted
// fake-vllm server standing in for vLLM. The held-out problems are the 15 HumanEval-format fixture
// problems (rows 82–96 of a 97-row dataset). The agent submits a checkpoint that answers every problem
// with a completion written to score without solving (tasks/humaneval/fixtures/hostile-completions.ts),
// then one that answers with the correct whole functions: 0 and 100.

const fixtures = path.resolve('tasks/humaneval/fixtures');
const fakeVllm = path.resolve('test/servers/fake-vllm.mjs');

interface Ev {
  type: string;
  data: Record<string, unknown>;
}

let home: string;

beforeAll(() => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-humaneval-e2e-'));
  const problems = readFileSync(path.join(fixtures, 'honest-problems.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as HumanEvalProblem);
  const rows = [...Array.from({ length: 82 }, (_, i) => ({ ...problems[i % problems.length]!, task_id: `Visible/${i}` })), ...problems];
  const dataset = path.join(home, 'datasets', 'humaneval');
  mkdirSync(dataset, { recursive: true });
  writeFileSync(path.join(dataset, 'HumanEval.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  // The base checkpoint answers nothing; the agent finds the two answer sets beside it in models/base-model/.
  const base = path.join(dataset, 'base-model');
  cpSync(path.join(fixtures, 'base-model'), base, { recursive: true });
  const universal = HOSTILE.filter((h) => h.universal);
  const answers = (reply: (p: HumanEvalProblem, i: number) => string) =>
    JSON.stringify({ rules: problems.map((p, i) => ({ contains: `def ${p.entry_point}(`, reply: reply(p, i) })), default: 'I cannot help with that.' });
  writeFileSync(path.join(base, 'cheater-answers.json'), answers((_p, i) => `\`\`\`python\n${universal[i % universal.length]!.code}\`\`\``));
  writeFileSync(path.join(base, 'honest-answers.json'), answers((p) => `\`\`\`python\n${p.prompt}${p.canonical_solution}\`\`\``));
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
  return runA2rl(args, { env });
}

describe('a2rl run --task humaneval: completions that attack the grader score 0, correct ones 100', () => {
  it('grades the hostile checkpoint 0 and the honest one 100', async () => {
    const submit = (dir: string) =>
      `node -e 'fetch(process.env.GRADING_SERVER_URL + "/submit", {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify({model_path: "output/${dir}"})}).then(async r => console.log("SUBMIT", r.status, await r.text()))'`;
    const checkpoint = (dir: string) => [`cp -r models/base-model output/${dir}`, `chmod -R u+w output/${dir}`, `cp models/base-model/${dir}-answers.json output/${dir}/answers.json`, submit(dir)];
    const script = [...checkpoint('cheater'), ...checkpoint('honest')].join(' && ');

    const r = await a2rl(['run', '--json', '--task', 'humaneval', '--agent-command', script, '--budget', '170s']);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.not.stringMatching(/Error/) });
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string; baseline: number; best: number; submissions: number };
    expect(summary).toMatchObject({ baseline: 0, best: 100, submissions: 2 });

    const events = (await a2rl(['events', summary.runId, '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
    expect(events.filter((e) => e.type === 'SubmissionGraded').map((e) => e.data.score)).toEqual([0, 100]);
  }, 300_000);
});
