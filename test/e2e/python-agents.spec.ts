import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { installedPythonAgentSystem, listPythonAgentSystems } from '../../modules/agents/python-agent-systems.js';
import { startFakeOpenAI } from '../servers/fake-llm/fake-openai.js';
import { agentCalls } from '../servers/fake-llm/serve.js';
import type { FakeLlmOptions, FakeLlmServer } from '../servers/fake-llm/types.js';
import { sandboxedAsRoot } from './a2rl-cli.js';
import { a2rlAt, type Ev, filesContaining, ofType, runEvents } from './testing/agent-runs.js';

// The Python agent systems (OpenHands' CLI, R&D-Agent's RL loop), installed pinned by `npm test`'s
// pretest (infra/python-agents), each run unmodified by `a2rl run` in the sandbox as its own uid, its
// model calls going through the run's LLM gateway to a scripted OpenAI upstream. The harness is root.

const CANARY_UPSTREAM = 'sk-canary-upstream-3e8a1f6c9b2d4e7a';
const CANARY_ENV = 'sk-canary-hostenv-9c2e5a7b1d3f6e8a';

/** OpenHands' session: each command through its terminal tool (the interactive bash it keeps in tmux). */
const SCRIPT = [
  "mkdir -p code output && cat > code/train.py <<'PY'\nimport glob, shutil\nbase = sorted(glob.glob('models/*'))[0]\nshutil.copytree(base, 'output/ckpt', dirs_exist_ok=True)\nprint('training done')\nPY",
  'python3 code/train.py',
  'curl -s -X POST "$GRADING_SERVER_URL/submit" -H "content-type: application/json" -d \'{"model_path": "output/ckpt"}\'',
];

/** The main.py R&D-Agent's coder is answered with: a new checkpoint directory per loop (submitted ones are read-only). */
const MAIN_PY = [
  'import glob, os, shutil',
  "base = sorted(glob.glob(os.path.join(os.environ['WORKSPACE'], 'models', '*')))[0]",
  "out = os.path.join(os.environ['OUTPUT_DIR'], 'v%d' % (len(os.listdir(os.environ['OUTPUT_DIR'])) + 1))",
  'shutil.copytree(base, out)',
  "print('trained', out)",
  '',
].join('\n');

/**
 * R&D-Agent asks without tools, so the fake answers by the request's system prompt (its prompts are
 * Chinese, rdagent/scenarios/rl/*\/prompts.yaml): the coder gets a python block, the judge of a result
 * a decision, anything else (the hypothesis) a hypothesis.
 */
function rdagentText(request: unknown): string {
  const prompt = JSON.stringify((request as { messages?: unknown }).messages ?? '');
  if (prompt.includes('负责生成训练代码')) return `\`\`\`python\n${MAIN_PY}\`\`\``;
  if (prompt.includes('分析失败的实验')) return JSON.stringify({ error_type: 'RuntimeError', root_cause: 'scripted', fix_suggestion: 'none' });
  if (prompt.includes('分析实验结果')) return JSON.stringify({ decision: true, reason: 'The checkpoint was graded.', suggestions: 'Fine-tune next.' });
  return JSON.stringify({ hypothesis: 'Copy the base model to establish the pipeline', reason: 'No history yet', algorithm: 'SFT', is_formal_training: false });
}

const systemInstalled = (id: string) => {
  const system = listPythonAgentSystems().find((s) => s.id === id);
  return !!system && installedPythonAgentSystem(system) !== null;
};

let home: string;
const a2rl = a2rlAt(() => home);

async function runAgent(agent: string, fake: FakeLlmServer, args: string[]): Promise<{ runId: string; submissions: number; events: Ev[] }> {
  const env = { A2RL_LLM_OPENAI_URL: `${fake.url}/v1`, A2RL_LLM_OPENAI_KEY: CANARY_UPSTREAM, OPENAI_API_KEY: CANARY_ENV, LLM_API_KEY: CANARY_ENV };
  const r = await a2rl(['run', '--task', 'ref-arith', '--agent', agent, '--json', ...args], env);
  if (r.code !== 0) throw new Error(`a2rl run failed (${r.code}): ${r.stderr.slice(-2000)}`);
  const summary = JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string; submissions: number };
  return { ...summary, events: await runEvents(a2rl, summary.runId) };
}

/**
 * One LlmCallRecorded per upstream call, with the fake's token counts where its answer reported them;
 * a chat stream that reported none (LiteLLM asks for none) is billed at its reservation, marked estimated.
 */
function expectEveryCallRecorded(evs: Ev[], fake: FakeLlmServer): void {
  const calls = agentCalls(fake);
  const recorded = ofType(evs, 'LlmCallRecorded').map((e) => e.data as { usage: { inputTokens: number | null; outputTokens: number | null }; usageSource?: string });
  expect(recorded.length).toBe(calls.length);
  const upstream = calls.filter((c) => c.usage).map((c) => `${c.usage!.input}/${c.usage!.output}`).sort();
  const byProvider = recorded.filter((r) => r.usageSource !== 'estimated').map((r) => `${r.usage.inputTokens}/${r.usage.outputTokens}`).sort();
  expect(byProvider).toEqual(upstream);
  expect(recorded.filter((r) => r.usageSource === 'estimated').length).toBe(calls.filter((c) => c.status === 200 && !c.usage).length);
  expect(calls.every((c) => c.authOk)).toBe(true);
}

/** No credential in the ledger, the artifact store or an exported bundle. */
async function expectNoCanary(runId: string, name: string): Promise<void> {
  const bundle = path.join(home, `bundle-${name}.tar.gz`);
  expect((await a2rl(['export', runId, '-o', bundle])).code).toBe(0);
  execFileSync('tar', ['-xzf', bundle, '-C', mkdtempSync(path.join(home, 'unpacked-'))]);
  expect(filesContaining(home, CANARY_UPSTREAM)).toEqual([]);
  expect(filesContaining(home, CANARY_ENV)).toEqual([]);
}

interface Report {
  run: { driver: string | null };
  metrics: { training_launches: number };
  failure: { class: string; rule: string } | null;
}
const reportOf = async (runId: string) => JSON.parse((await a2rl(['report', runId, '--format', 'json'])).stdout) as Report;

const describeRun = sandboxedAsRoot ? describe : describe.skip;

describeRun('Python agent systems through the LLM gateway (harness as root, sandboxed)', () => {
  beforeAll(() => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-pyagents-'));
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  const openhands = systemInstalled('openhands');
  const itOpenHands = openhands ? it : it.skip;
  const absent = (id: string) => `(skipped: ${id} is not installed; npm test's pretest or \`a2rl agents install\` installs it)`;

  itOpenHands(`OpenHands writes code/train.py, runs it and submits once; every model call is recorded ${openhands ? '' : absent('openhands')}`, async () => {
    const fake = await startFakeOpenAI({ script: SCRIPT, finalText: 'Submitted output/ckpt.', expectKey: CANARY_UPSTREAM });
    try {
      const run = await runAgent('openhands', fake, ['--budget', '240s']);
      const terminal = agentCalls(fake).filter((c) => c.toolCall);
      expect({
        submissions: run.submissions,
        graded: ofType(run.events, 'SubmissionGraded').length,
        tools: [...new Set(terminal.map((c) => c.toolCall!.name))],
        scriptRun: terminal.map((c) => c.toolCall!.command),
      }).toEqual({ submissions: 1, graded: 1, tools: ['terminal'], scriptRun: SCRIPT });
      expectEveryCallRecorded(run.events, fake);
      // Its terminal is an interactive bash: held at each exec (execHoldMs), never stopped, so each
      // command ran to its end in the foreground (the submission found the checkpoint) and what ran was
      // read (at-exec when within the hold; a busy machine may take longer, then after-start).
      const started = ofType(run.events, 'ProcessStarted').map((e) => e.data as { argv: string[]; capture?: string; script?: { path: string } });
      const train = started.find((p) => p.argv.join(' ') === 'python3 code/train.py');
      expect(train?.script?.path).toMatch(/\/code\/train\.py$/);
      expect(started.filter((p) => p.capture === 'at-exec').length).toBeGreaterThan(started.length / 2);
      const report = await reportOf(run.runId);
      // The scripted "training" copies the base model: the taxonomy says so.
      expect({ driver: report.run.driver, trainingLaunches: report.metrics.training_launches, failure: report.failure?.class }).toEqual({ driver: 'gpt-5.2', trainingLaunches: 1, failure: 'copy_model_fallback' });
      expect((ofType(run.events, 'AgentHomeArchived')[0]?.data.files as unknown[] | undefined)?.length ?? 0).toBeGreaterThan(0);
      await expectNoCanary(run.runId, 'openhands');
    } finally {
      await fake.close();
    }
  }, 420_000);

  const rdagent = systemInstalled('rdagent');
  const itRdAgent = rdagent ? it : it.skip;

  itRdAgent(`R&D-Agent's RL loop: hypothesis, main.py written under code/, run, submitted, judged ${rdagent ? '' : absent('rdagent')}`, async () => {
    const fake = await startFakeOpenAI({ script: [], text: rdagentText, expectKey: CANARY_UPSTREAM });
    try {
      const run = await runAgent('rdagent', fake, ['--budget', '150s']);
      const graded = ofType(run.events, 'SubmissionGraded');
      expect(graded.length).toBeGreaterThanOrEqual(1);
      expect(ofType(run.events, 'FileChanged').some((e) => e.data.path === 'code/main.py')).toBe(true);
      // Its runner launches the code with plain `python`: the agents' training environment, first on PATH.
      const started = ofType(run.events, 'ProcessStarted').map((e) => e.data as { argv: string[]; exe?: { path: string } });
      const main = started.find((p) => p.argv[0] === 'python' && p.argv[1]?.endsWith('/code/main.py'));
      expect(main?.exe?.path).toMatch(/\/python3(\.\d+)?$/);
      expectEveryCallRecorded(run.events, fake);
      // The loop's structure shows in the transcript: hypothesis, code and judgement each a model call.
      const transcript = JSON.parse((await a2rl(['transcript', run.runId, '--json'])).stdout) as { entries: Array<{ answer: { text?: string | null } | null }> };
      const answers = transcript.entries.map((e) => e.answer?.text ?? '');
      expect({
        hypothesis: answers.some((a) => a.includes('"hypothesis"')),
        code: answers.some((a) => a.includes('```python')),
        judgement: answers.some((a) => a.includes('"decision"')),
      }).toEqual({ hypothesis: true, code: true, judgement: true });
      const report = await reportOf(run.runId);
      expect(report.metrics.training_launches).toBeGreaterThanOrEqual(1);
      expect(report.failure?.class ?? 'none').not.toMatch(/^infra_/);
      await expectNoCanary(run.runId, 'rdagent');
    } finally {
      await fake.close();
    }
  }, 420_000);

  // The model's side failing is the infrastructure's fault, not the agent's (an upstream that lists its
  // models, so the pre-flight check passes, and fails every call).
  const failure = async (options: Omit<FakeLlmOptions, 'script'>, args: string[]) => {
    const fake = await startFakeOpenAI({ script: SCRIPT, ...options });
    try {
      const run = await runAgent('openhands', fake, args);
      return { run, calls: ofType(run.events, 'LlmCallRecorded').map((e) => e.data), failure: (await reportOf(run.runId)).failure, upstream: agentCalls(fake).length };
    } finally {
      await fake.close();
    }
  };

  itOpenHands(`OpenHands against an upstream that errors: infra_model_unreachable ${openhands ? '' : absent('openhands')}`, async () => {
    const { calls, failure: f } = await failure({ mode: 'error' }, ['--budget', '60s']);
    expect({ calls: calls.length > 0, allUpstreamErrors: calls.every((c) => c.outcome === 'upstream_error' && c.status === 500) }).toEqual({ calls: true, allUpstreamErrors: true });
    expect(f?.class).toBe('infra_model_unreachable');
  }, 300_000);

  itOpenHands(`OpenHands past --max-llm-tokens: refused in the provider's shape, recorded, infra_llm_limit ${openhands ? '' : absent('openhands')}`, async () => {
    const { run, calls, failure: f, upstream } = await failure({}, ['--budget', '60s', '--max-llm-tokens', '500']);
    expect({
      firstServed: calls[0]?.outcome,
      refused: calls.slice(1).every((c) => c.outcome === 'limit_exceeded' && c.status === 429),
      upstreamCalls: upstream,
      limit: ofType(run.events, 'LimitReached').map((e) => [e.data.limit, e.data.max]),
    }).toEqual({ firstServed: 'ok', refused: true, upstreamCalls: 1, limit: [['llmTokens', 500]] });
    expect(f?.class).toBe('infra_llm_limit');
  }, 300_000);
});
