import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { projectCliBin } from '../../modules/agents/agent-registry.js';
import { startFakeAnthropic } from '../servers/fake-llm/fake-anthropic.js';
import { startFakeGemini } from '../servers/fake-llm/fake-gemini.js';
import { startFakeOpenAI } from '../servers/fake-llm/fake-openai.js';
import { agentCalls } from '../servers/fake-llm/serve.js';
import type { FakeLlmOptions, FakeLlmServer } from '../servers/fake-llm/types.js';
import { sandboxedAsRoot } from './a2rl-cli.js';
import { a2rlAt, filesContaining, ofType, runEvents } from './testing/agent-runs.js';

// The real agent CLIs (installed at pinned versions in infra/agent-clis by `npm test`'s pretest), each
// run unmodified by `a2rl run` in the sandbox as its own uid, its model calls going through the run's
// LLM gateway to a scripted fake of its provider. The fake drives the session: write a training
// script, run it, submit, end. The harness is root here, as in CI.

/** The agent's session, the same for every CLI: each command runs through the CLI's own shell tool. */
const SCRIPT = [
  "mkdir -p code output && cat > code/train.py <<'PY'\nimport glob, shutil\nbase = sorted(glob.glob('models/*'))[0]\nshutil.copytree(base, 'output/ckpt', dirs_exist_ok=True)\nprint('training done')\nPY",
  'python3 code/train.py',
  'curl -s -X POST "${GRADING_SERVER_URL:-http://127.0.0.1:5000}/submit" -H "content-type: application/json" -d \'{"model_path": "output/ckpt"}\'',
];

const CANARY_UPSTREAM = 'sk-canary-upstream-7d1f4e9a2b6c8d3e';
const CANARY_ENV = 'sk-canary-hostenv-5a8b2c7d9e1f3a4b';

interface Cli {
  agent: string;
  binary: string;
  provider: 'ANTHROPIC' | 'OPENAI' | 'GEMINI';
  start: (o: FakeLlmOptions) => Promise<FakeLlmServer>;
  /** The upstream base URL the harness is given for this fake. */
  upstream: (fake: FakeLlmServer) => string;
}

const CLIS: Cli[] = [
  { agent: 'claude-code', binary: 'claude', provider: 'ANTHROPIC', start: startFakeAnthropic, upstream: (f) => f.url },
  { agent: 'codex-cli', binary: 'codex', provider: 'OPENAI', start: startFakeOpenAI, upstream: (f) => `${f.url}/v1` },
  { agent: 'gemini-cli', binary: 'gemini', provider: 'GEMINI', start: startFakeGemini, upstream: (f) => f.url },
  { agent: 'opencode', binary: 'opencode', provider: 'OPENAI', start: startFakeOpenAI, upstream: (f) => `${f.url}/v1` },
];

const installed = (cli: Cli) => existsSync(path.join(projectCliBin(), cli.binary));

let home: string;
const a2rl = a2rlAt(() => home);
const events = (runId: string) => runEvents(a2rl, runId);

/** One run of `cli` against `fake`; the harness's environment also holds a canary credential. */
async function runAgent(cli: Cli, fake: FakeLlmServer, args: string[] = []) {
  const env = {
    [`A2RL_LLM_${cli.provider}_URL`]: cli.upstream(fake),
    [`A2RL_LLM_${cli.provider}_KEY`]: CANARY_UPSTREAM,
    ANTHROPIC_API_KEY: CANARY_ENV,
    OPENAI_API_KEY: CANARY_ENV,
    GEMINI_API_KEY: CANARY_ENV,
  };
  const r = await a2rl(['run', '--task', 'ref-arith', '--agent', cli.agent, '--budget', '180s', '--json', ...args], env);
  if (r.code !== 0) throw new Error(`a2rl run failed (${r.code}): ${r.stderr.slice(-2000)}`);
  const summary = JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string; submissions: number };
  return { summary, events: await events(summary.runId) };
}


const describeRun = sandboxedAsRoot ? describe : describe.skip;

describeRun('real agent CLIs through the LLM gateway (harness as root, sandboxed)', () => {
  beforeAll(() => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-clis-'));
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  for (const cli of CLIS) {
    const maybe = installed(cli) ? it : it.skip;
    maybe(`${cli.agent} writes code, trains, submits and ends; every model call is recorded`, async () => {
      const fake = await cli.start({ script: SCRIPT, finalText: 'Submitted output/ckpt.', expectKey: CANARY_UPSTREAM });
      try {
        const { summary, events: evs } = await runAgent(cli, fake);
        const graded = ofType(evs, 'SubmissionGraded');
        const calls = ofType(evs, 'LlmCallRecorded');
        const shellCalls = agentCalls(fake).filter((c) => c.toolCall);
        expect({
          submissions: summary.submissions,
          graded: graded.length,
          everyCallHadTheHarnessKey: agentCalls(fake).every((c) => c.authOk),
          scriptRun: shellCalls.map((c) => c.toolCall!.command),
        }).toEqual({ submissions: 1, graded: 1, everyCallHadTheHarnessKey: true, scriptRun: SCRIPT });

        // One LlmCallRecorded per upstream call, with the fake's token counts.
        const upstreamUsage = agentCalls(fake).filter((c) => c.usage).map((c) => `${c.usage!.input}/${c.usage!.output}`).sort();
        const recordedUsage = calls
          .map((e) => e.data.usage as { inputTokens: number | null; outputTokens: number | null })
          .filter((u) => u.inputTokens !== null && u.outputTokens !== null)
          .map((u) => `${u.inputTokens}/${u.outputTokens}`)
          .sort();
        expect(recordedUsage).toEqual(upstreamUsage);
        expect(calls.length).toBe(agentCalls(fake).length);

        // The transcript shows each tool call; the driver is the model the fake saw.
        const transcript = JSON.parse((await a2rl(['transcript', summary.runId, '--json'])).stdout) as { entries: Array<{ answer: { toolCalls: Array<{ name: string; input: string }> } | null }> };
        const inputs = transcript.entries.flatMap((e) => e.answer?.toolCalls ?? []).map((t) => t.input);
        expect(SCRIPT.map((command) => inputs.some((input) => input.includes(JSON.stringify(command).slice(1, -1))))).toEqual(SCRIPT.map(() => true));
        const report = JSON.parse((await a2rl(['report', summary.runId, '--format', 'json'])).stdout) as { run: { driver: string | null }; metrics: { training_launches: number } };
        const seen = new Map<string, number>();
        for (const c of agentCalls(fake).filter((x) => x.usage && x.model)) seen.set(c.model!, (seen.get(c.model!) ?? 0) + 1);
        const mostUsed = [...seen.entries()].sort((a, b) => b[1] - a[1])[0][0];
        expect({ driver: report.run.driver, trainingLaunches: report.metrics.training_launches }).toEqual({ driver: mostUsed, trainingLaunches: 1 });

        // No credential in the ledger, the artifact store or an exported bundle.
        const bundle = path.join(home, `bundle-${cli.agent}.tar.gz`);
        const exported = await a2rl(['export', summary.runId, '-o', bundle]);
        expect(exported.code).toBe(0);
        const unpacked = mkdtempSync(path.join(home, 'unpacked-'));
        execFileSync('tar', ['-xzf', bundle, '-C', unpacked]);
        expect(filesContaining(home, CANARY_UPSTREAM)).toEqual([]);
        expect(filesContaining(home, CANARY_ENV)).toEqual([]);
        // The CLI's own state (its home, with the gateway token in its config) was archived, redacted.
        const archived = ofType(evs, 'AgentHomeArchived')[0]?.data as { files: unknown[] } | undefined;
        expect((archived?.files.length ?? 0) > 0).toBe(true);
        expect(ofType(evs, 'FileChanged').every((e) => String(e.data.path).startsWith('code/') || String(e.data.path).startsWith('output/'))).toBe(true);
      } finally {
        await fake.close();
      }
    }, 300_000);
  }

  // Failures of the model's side are the infrastructure's, not the agent's (Codex: it gives up fastest).
  const codex = CLIS.find((c) => c.agent === 'codex-cli')!;
  const itCodex = installed(codex) ? it : it.skip;
  const failureOf = async (runId: string) =>
    (JSON.parse((await a2rl(['report', runId, '--format', 'json'])).stdout) as { failure: { class: string; rule: string } }).failure;

  itCodex('an upstream that errors: the agent never reached its model (infra_model_unreachable)', async () => {
    const fake = await codex.start({ script: SCRIPT, mode: 'error' });
    try {
      const { summary, events: evs } = await runAgent(codex, fake, ['--budget', '90s']);
      const calls = ofType(evs, 'LlmCallRecorded').map((e) => e.data);
      expect({ calls: calls.length > 0, allUpstreamErrors: calls.every((c) => c.outcome === 'upstream_error' && c.status === 500) }).toEqual({ calls: true, allUpstreamErrors: true });
      expect((await failureOf(summary.runId)).class).toBe('infra_model_unreachable');
    } finally {
      await fake.close();
    }
  }, 300_000);

  itCodex('an upstream that hangs: the calls end with the run, recorded, and the run is not blamed on the agent', async () => {
    const fake = await codex.start({ script: SCRIPT, mode: 'hang' });
    try {
      const { summary, events: evs } = await runAgent(codex, fake, ['--budget', '20s']);
      const outcomes = ofType(evs, 'LlmCallRecorded').map((e) => e.data.outcome);
      expect(outcomes.length > 0 && outcomes.every((o) => o === 'gateway_closed' || o === 'client_aborted')).toBe(true);
      expect(await failureOf(summary.runId)).toEqual({ class: 'infra_model_unreachable', rule: expect.any(String), evidence: expect.any(Array) });
    } finally {
      await fake.close();
    }
  }, 300_000);

  itCodex('past --max-llm-tokens the gateway answers with the provider\'s quota error, records it, and the run is classed infra_llm_limit', async () => {
    const fake = await codex.start({ script: SCRIPT });
    try {
      const { summary, events: evs } = await runAgent(codex, fake, ['--max-llm-tokens', '500']);
      const calls = ofType(evs, 'LlmCallRecorded').map((e) => e.data);
      const limits = ofType(evs, 'LimitReached').map((e) => e.data);
      expect({
        firstServed: calls[0]?.outcome,
        refused: calls.slice(1).every((c) => c.outcome === 'limit_exceeded' && c.status === 429),
        upstreamCalls: agentCalls(fake).length,
        limit: limits.map((l) => [l.limit, l.max]),
      }).toEqual({ firstServed: 'ok', refused: true, upstreamCalls: 1, limit: [['llmTokens', 500]] });
      expect((await failureOf(summary.runId)).class).toBe('infra_llm_limit');
    } finally {
      await fake.close();
    }
  }, 300_000);
});
