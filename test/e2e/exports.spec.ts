import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync } from 'node:fs';
import { runA2rl, sandboxedAsRoot, type CliResult } from './a2rl-cli.js';
import { installedAnalysisPython, installedHarborPython } from '../../modules/analytics/analysis-python.js';
import { projectCliBin } from '../../modules/agents/agent-registry.js';
import { startFakeAnthropic } from '../servers/fake-llm/fake-anthropic.js';

// `a2rl export --format inspect|atif` through the CLI on real runs (test agents, a 2-task campaign):
// read back by inspect_ai's log reader and Harbor's validator where their pinned venvs are
// installed, and recorded in the access stream as bundles are.

const T = 180_000;
let home: string;
const a2rl = (args: string[]): Promise<CliResult> => runA2rl(args, { env: { ...process.env, A2RL_HOME: home } });
async function ok(args: string[]): Promise<string> {
  const r = await a2rl(args);
  if (r.code !== 0) throw new Error(`a2rl ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}
let campaign: { campaignId: string; runs: { runId: string; task: string }[] };

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-exports-e2e-'));
  const out = await ok(['campaign', 'run', '--tasks', 'ref-arith,ref-judge', '--agents', 'faulty-copy-base', '--seeds', '2', '--budget', '20s', '--json']);
  campaign = JSON.parse(out.trim().split('\n').pop()!);
}, T);
afterAll(() => {
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('a2rl export --format inspect|atif', () => {
  it('writes a run as an Inspect log and an ATIF trajectory that their own tools accept, and a campaign as one log per task × agent × driver', async () => {
    const runId = campaign.runs[0].runId;
    const inspectFile = path.join(home, 'run.inspect.json');
    const atifFile = path.join(home, 'run.atif.json');
    const dir = path.join(home, 'inspect');
    await ok(['export', runId, '--format', 'inspect', '-o', inspectFile]);
    await ok(['export', runId, '--format', 'atif', '-o', atifFile]);
    const written = JSON.parse(await ok(['export', '--campaign', campaign.campaignId, '--format', 'inspect', '-o', dir, '--json'])) as { files: { file: string; runs: string[] }[] };
    expect(readdirSync(dir).sort()).toEqual(['ref-arith_faulty-copy-base_none.json', 'ref-judge_faulty-copy-base_none.json']);
    expect(written.files.map((f) => f.runs.length)).toEqual([2, 2]);

    const atif = JSON.parse(readFileSync(atifFile, 'utf8')) as { schema_version: string; session_id: string; extra: { a2rl: { submissions: { event: string }[]; ledger: { events: number } } } };
    expect(atif).toMatchObject({ schema_version: 'ATIF-v1.7', session_id: runId });
    expect(atif.extra.a2rl.submissions.map((s) => s.event)).toEqual(['received', 'graded']);

    // Each export is in the access stream, as bundles are.
    const access = (await ok(['access', '--json'])).trim().split('\n').map((l) => (JSON.parse(l) as { data: { action: string; outcome: string; target: Record<string, string> | null; detail?: string } }).data);
    const exports = access.filter((r) => r.action === 'export');
    expect(exports.map((r) => [r.target, r.outcome, r.detail?.split(':')[0]])).toEqual([
      [{ runId }, 'ok', 'Inspect log of 1 run'],
      [{ runId }, 'ok', 'ATIF trajectory of 1 run'],
      [{ campaignId: campaign.campaignId }, 'ok', 'Inspect logs (2) of 4 runs'],
    ]);
    const refused = await a2rl(['export', '--campaign', campaign.campaignId, '--format', 'atif', '-o', path.join(home, 'x')]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/--campaign exports --format inspect only/);

    const inspectPython = installedAnalysisPython();
    if (!inspectPython) console.warn('skipped the Inspect read-back: inspect-ai (infra/analysis-python) is not installed; npm test installs it');
    else {
      const read = (file: string) => JSON.parse(execFileSync(inspectPython, ['-c', 'import sys, json\nfrom inspect_ai.log import read_eval_log\nl = read_eval_log(sys.argv[1])\nprint(json.dumps({"status": l.status, "samples": [s.id for s in l.samples], "scores": [s.scores["improvement"].value for s in l.samples]}))', file], { encoding: 'utf8' })) as unknown;
      expect(read(inspectFile)).toEqual({ status: 'success', samples: [runId], scores: [0] });
      for (const f of written.files) expect(read(f.file)).toEqual({ status: 'success', samples: [...f.runs].sort(), scores: [0, 0] });
    }
    const harbor = installedHarborPython();
    if (!harbor) console.warn('skipped the ATIF validation: Harbor (infra/harbor-python) is not installed; npm test installs it');
    else {
      const out = execFileSync(harbor, ['-c', 'import sys, json\nfrom harbor.utils.trajectory_validator import TrajectoryValidator\nv = TrajectoryValidator()\nprint(json.dumps({"ok": v.validate(sys.argv[1]), "errors": v.errors}))', atifFile], { encoding: 'utf8' });
      expect(JSON.parse(out)).toEqual({ ok: true, errors: [] });
    }
  }, T);
});

/** The session the scripted fake Anthropic upstream drives Claude Code through (as agent-clis.spec.ts). */
const SCRIPT = [
  "mkdir -p code output && cat > code/train.py <<'PY'\nimport glob, shutil\nbase = sorted(glob.glob('models/*'))[0]\nshutil.copytree(base, 'output/ckpt', dirs_exist_ok=True)\nprint('training done')\nPY",
  'python3 code/train.py',
  'curl -s -X POST "${GRADING_SERVER_URL:-http://127.0.0.1:5000}/submit" -H "content-type: application/json" -d \'{"model_path": "output/ckpt"}\'',
];

const claudeReady = sandboxedAsRoot && existsSync(path.join(projectCliBin(), 'claude'));
(claudeReady ? describe : describe.skip)('exports of a scripted Claude Code run (the real CLI, a fake Anthropic upstream)', () => {
  it('ATIF: one agent step per recorded call, each shell command a tool call whose output is the paired observation; Harbor accepts it; Inspect reads the log', async () => {
    const fake = await startFakeAnthropic({ script: SCRIPT, finalText: 'Submitted output/ckpt.', expectKey: 'sk-fake-upstream' });
    let runId: string;
    try {
      const out = await runA2rl(['run', '--task', 'ref-arith', '--agent', 'claude-code', '--budget', '180s', '--json'], { env: { ...process.env, A2RL_HOME: home, A2RL_LLM_ANTHROPIC_URL: fake.url, A2RL_LLM_ANTHROPIC_KEY: 'sk-fake-upstream' } });
      if (out.code !== 0) throw new Error(`a2rl run failed (${out.code}): ${out.stderr.slice(-2000)}`);
      runId = (JSON.parse(out.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
    } finally {
      await fake.close();
    }
    const atifFile = path.join(home, 'claude.atif.json');
    const inspectFile = path.join(home, 'claude.inspect.json');
    await ok(['export', runId, '--format', 'atif', '-o', atifFile]);
    await ok(['export', runId, '--format', 'inspect', '-o', inspectFile]);
    const calls = (await ok(['events', runId, '--json', '--type', 'LlmCallRecorded'])).trim().split('\n').map((l) => JSON.parse(l) as { seq: number });
    const atif = JSON.parse(readFileSync(atifFile, 'utf8')) as { steps: { source: string; tool_calls?: { tool_call_id: string; arguments: { command?: string } }[]; observation?: { results: { source_call_id: string; content: string }[] }; extra: { a2rl: { seq: number } } }[] };
    const agent = atif.steps.filter((s) => s.source === 'agent');
    expect(agent.map((s) => s.extra.a2rl.seq)).toEqual(calls.map((c) => c.seq));
    const commands = agent.flatMap((s) => (s.tool_calls ?? []).map((c) => c.arguments.command));
    expect(SCRIPT.every((cmd) => commands.includes(cmd))).toBe(true);
    // The training script's output came back to the model: it is the observation of the call that ran it.
    const train = agent.find((s) => (s.tool_calls ?? []).some((c) => c.arguments.command === 'python3 code/train.py'))!;
    expect(train.observation?.results.map((r) => r.content).join('\n')).toContain('training done');

    const harbor = installedHarborPython();
    if (!harbor) console.warn('skipped the ATIF validation: Harbor (infra/harbor-python) is not installed; npm test installs it');
    else expect(JSON.parse(execFileSync(harbor, ['-c', 'import sys, json\nfrom harbor.utils.trajectory_validator import TrajectoryValidator\nv = TrajectoryValidator()\nprint(json.dumps({"ok": v.validate(sys.argv[1]), "errors": v.errors}))', atifFile], { encoding: 'utf8' }))).toEqual({ ok: true, errors: [] });
    const inspectPython = installedAnalysisPython();
    if (!inspectPython) console.warn('skipped the Inspect read-back: inspect-ai (infra/analysis-python) is not installed; npm test installs it');
    else {
      const read = JSON.parse(execFileSync(inspectPython, ['-c', 'import sys, json\nfrom inspect_ai.log import read_eval_log\nl = read_eval_log(sys.argv[1])\ns = l.samples[0]\nprint(json.dumps({"models": [e.event for e in s.events].count("model"), "tools": sum(1 for m in s.messages if m.role == "assistant" for _ in (m.tool_calls or []))}))', inspectFile], { encoding: 'utf8' })) as { models: number; tools: number };
      expect(read.models).toBe(calls.length);
      expect(read.tools).toBeGreaterThanOrEqual(SCRIPT.length);
    }
  }, 300_000);
});
