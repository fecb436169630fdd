import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { projectCliBin } from '../../modules/agents/agent-registry.js';
import { conversationOf, lastUserText } from '../servers/fake-llm/conversation.js';
import { startFakeAnthropic } from '../servers/fake-llm/fake-anthropic.js';
import { A2RL_BIN, runA2rl, sandboxedAsRoot } from './a2rl-cli.js';
import { until } from '../testing/helpers.js';

// `a2rl run --resume`: the harness is SIGKILLed after two graded submissions, and the run continues in
// the same stream (docs/resume.md): dense seqs, verify and the offline bundle pass, every submission on
// the record, the budget left is what the first segment did not use. Then the same across machines: a
// fresh A2RL_HOME sharing only the PostgreSQL ledger and the artifact store rebuilds the workspace.

const PG = process.env.A2RL_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Submits twice; the first launch then waits to be killed, the resumed one leaves the note it was given and exits. */
const AGENT = [
  'mkdir -p code output',
  'if [ "${A2RL_RESUMED:-0}" = 1 ]; then printf %s "$A2RL_RESUME_NOTE" > code/resume-note.txt; else echo first > code/first.txt; cp -r models/* output/ckpt; fi',
  'for i in 1 2; do curl -s -X POST "$GRADING_SERVER_URL/submit" -H "content-type: application/json" -d "{\\"model_path\\":\\"output/ckpt\\"}" > /dev/null; done',
  '[ "${A2RL_RESUMED:-0}" = 1 ] && exit 0',
  'touch code/submitted-twice; sleep 600',
].join('; ');

interface Ev {
  seq: number;
  type: string;
  occurredAt: string;
  data: Record<string, any>;
}

const dirs: string[] = [];
const tempDir = (name: string) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), `a2rl-resume-${name}-`));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function events(env: NodeJS.ProcessEnv, runId: string): Promise<Ev[]> {
  const r = await runA2rl(['events', runId, '--json'], { env });
  if (r.code !== 0) return [];
  return r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Ev);
}

/** `a2rl run` of AGENT under `env`, SIGKILLed once its two submissions are graded and its marker file recorded. */
async function runUntilKilled(env: NodeJS.ProcessEnv): Promise<{ runId: string; killedAt: number }> {
  const child: ChildProcess = spawn(process.execPath, [A2RL_BIN, 'run', '--task', 'ref-arith', '--agent-command', AGENT, '--budget', '10m'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const runId = await until(() => `the run to be scheduled (${stderr})`, () => /run (\S+) scheduled/.exec(stderr)?.[1], 120_000);
    await until(
      'two graded submissions and the marker file recorded',
      async () => {
        const evs = await events(env, runId);
        return evs.filter((e) => e.type === 'SubmissionGraded').length >= 2 && evs.some((e) => e.type === 'FileChanged' && e.data.path === 'code/submitted-twice');
      },
      120_000,
    );
    child.kill('SIGKILL');
    await exited;
    return { runId, killedAt: Date.now() };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

/** The files under `dir` (relative paths), for comparing two workspaces. */
function filesUnder(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const name of readdirSync(path.join(dir, rel)).sort()) {
    const p = rel ? `${rel}/${name}` : name;
    if (statSync(path.join(dir, p)).isDirectory()) out.push(...filesUnder(dir, p));
    else out.push(p);
  }
  return out;
}

function expectOneRun(evs: Ev[]): void {
  expect(evs.map((e) => e.seq)).toEqual(evs.map((_, i) => i)); // dense: one stream, both segments
  expect(evs.filter((e) => e.type === 'AgentStarted')).toHaveLength(2);
  expect(evs.filter((e) => e.type === 'SubmissionGraded').map((e) => e.data.submissionId)).toEqual(['sub-1', 'sub-2', 'sub-3', 'sub-4']);
  expect(evs.map((e) => e.type).slice(-2)).toEqual(['RunCompleted', 'TreeHeadSigned']);
  const interrupted = evs.find((e) => e.type === 'RunInterrupted')!;
  expect(interrupted.data.cause).toBe('harness_gone');
  const resumed = evs.find((e) => e.type === 'RunResumed')!;
  expect(resumed.seq).toBeGreaterThan(interrupted.seq);
  expect(resumed.data.interruptedSeq).toBe(interrupted.seq);
  // The budget left is the budget less the agent time of the first segment (from its start to its last fact or heartbeat).
  const used = resumed.data.agentSecondsUsed as number;
  expect(used).toBeGreaterThan(0);
  expect(used).toBeLessThan(600);
  expect(resumed.data.budgetSecondsLeft).toBeCloseTo(600 - used, 2);
}

describe('a2rl run --resume', () => {
  let home: string;
  const env = () => ({ ...process.env, A2RL_HOME: home, A2RL_LEDGER_URL: '', A2RL_ARTIFACTS_URL: '' });
  beforeAll(() => {
    home = tempDir('sqlite');
  });

  it('continues a run whose harness was SIGKILLed after two graded submissions: one run, verified, bundle verified offline, the budget kept', async () => {
    const { runId, killedAt } = await runUntilKilled(env());
    const resumeStarted = Date.now();
    const resumed = await runA2rl(['run', '--resume', runId, '--json'], { env: env() });
    expect({ code: resumed.code, stderr: resumed.stderr }).toEqual({ code: 0, stderr: expect.stringContaining(`recorded RunInterrupted for ${runId}`) });
    expect(JSON.parse(resumed.stdout.trim().split('\n').pop()!)).toMatchObject({ runId, submissions: 4, state: 'completed', baseline: expect.any(Number) });

    const evs = await events(env(), runId);
    expectOneRun(evs);
    const facts = evs.find((e) => e.type === 'RunResumed')!.data;
    expect(facts.workspace).toMatchObject({ source: 'on-disk', differences: 0, unrestorable: 0 });
    expect(facts.session).toBe('restarted'); // an ad-hoc command has no session of its own
    // The restarted agent was told what happened (A2RL_RESUME_NOTE), and it is on the record.
    const note = readFileSync(path.join(home, 'workspaces', runId, 'code', 'resume-note.txt'), 'utf8');
    expect(note).toMatch(/this run has been resumed.*2 submission\(s\) were made/);
    expect(evs.some((e) => e.type === 'FileChanged' && e.data.path === 'code/resume-note.txt')).toBe(true);

    expect((await runA2rl(['verify', runId], { env: env() })).code).toBe(0);
    const bundle = path.join(home, 'bundle.tar.gz');
    expect((await runA2rl(['export', runId, '-o', bundle], { env: env() })).code).toBe(0);
    const scratch = tempDir('reviewer');
    const offline = await runA2rl(['verify-bundle', bundle, '--pubkey', path.join(home, 'keys', 'ledger-ed25519.pub.pem')], { env: { PATH: process.env.PATH, HOME: scratch }, cwd: scratch });
    expect({ code: offline.code, stderr: offline.stderr }).toEqual({ code: 0, stderr: expect.any(String) });

    const model = JSON.parse((await runA2rl(['report', runId, '--format', 'json'], { env: env() })).stdout) as { submissions: unknown[]; run: { interruptions: { count: number; resumed: number; downtimeS: number; unrecordedS: number } } };
    expect(model.submissions).toHaveLength(4);
    expect(model.run.interruptions).toMatchObject({ count: 1, resumed: 1 });
    expect(model.run.interruptions.downtimeS).toBeGreaterThan(0);
    const report = await runA2rl(['report', runId], { env: env() });
    expect(report.stdout).toMatch(/\| Interruptions \| \*\*harness lost 1×, resumed 1×\*\*/);
    const resumedAt = Date.parse(evs.find((e) => e.type === 'RunResumed')!.occurredAt);
    process.stderr.write(
      `resume figures: kill → resume command ${((resumeStarted - killedAt) / 1000).toFixed(1)} s; resume command → RunResumed ${((resumedAt - resumeStarted) / 1000).toFixed(1)} s; ` +
        `agent time used before the loss ${facts.agentSecondsUsed} s; agent time after the last recorded fact (lost) ${model.run.interruptions.unrecordedS} s; downtime ${model.run.interruptions.downtimeS} s\n`,
    );
  }, 300_000);

  it('refuses, in one line and recording nothing, a completed run, an unknown one and options that would change the run', async () => {
    const runs = (await runA2rl(['runs', '--json'], { env: env() })).stdout;
    const runId = (JSON.parse(runs.trim().split('\n')[0]) as { runId: string }).runId;
    const before = (await events(env(), runId)).length;
    const completed = await runA2rl(['run', '--resume', runId], { env: env() });
    expect(completed.code).not.toBe(0);
    expect(completed.stderr.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`run ${runId} cannot be resumed: a completed run cannot be resumed`))]);
    const unknown = await runA2rl(['run', '--resume', 'ref-arith-20260101000000-000000'], { env: env() });
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr.trim()).toBe('a2rl: run ref-arith-20260101000000-000000 is not in this ledger');
    const changed = await runA2rl(['run', '--resume', runId, '--task', 'ref-judge'], { env: env() });
    expect(changed.stderr).toMatch(/--resume continues the run as it was recorded: --task cannot be given with it/);
    expect((await events(env(), runId)).length).toBe(before);
  }, 120_000);
});

describe('a2rl run --resume on another machine (PostgreSQL ledger, shared artifact store)', () => {
  const schema = `a2rl_resume_${process.pid}_${Date.now()}`;
  let artifacts: string;
  const machine = (home: string) => ({ ...process.env, A2RL_HOME: home, A2RL_LEDGER_URL: `${PG}?schema=${schema}`, A2RL_ARTIFACTS_URL: `file://${artifacts}` });
  beforeAll(() => {
    artifacts = tempDir('artifacts');
  });
  afterAll(async () => {
    const client = new pg.Client({ connectionString: PG });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => client.end());
  });

  it('rebuilds the workspace byte for byte from the ledger and the artifact store, and the run completes as one run', async () => {
    const homeA = tempDir('machine-a');
    const { runId } = await runUntilKilled(machine(homeA));
    // Machine B shares only the ledger and the artifact store; the signing key is copied (docs/operations.md).
    const homeB = tempDir('machine-b');
    mkdirSync(homeB, { recursive: true });
    cpSync(path.join(homeA, 'keys'), path.join(homeB, 'keys'), { recursive: true });

    const refused = await runA2rl(['run', '--resume', runId], { env: machine(homeB) });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/it is open and its harness is not on this machine; if that harness is gone for good \(its machine died\), add --harness-gone/);

    const resumeStarted = Date.now();
    const resumed = await runA2rl(['run', '--resume', runId, '--harness-gone', '--json'], { env: machine(homeB) });
    expect({ code: resumed.code, stderr: resumed.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    const evs = await events(machine(homeB), runId);
    expectOneRun(evs);
    const facts = evs.find((e) => e.type === 'RunResumed')!.data;
    expect(facts.workspace).toMatchObject({ source: 'rebuilt', unrestorable: 0, restored: 4 });
    const resumedAt = Date.parse(evs.find((e) => e.type === 'RunResumed')!.occurredAt);
    process.stderr.write(`resume figures (another machine, workspace rebuilt): resume command → RunResumed ${((resumedAt - resumeStarted) / 1000).toFixed(1)} s; agent time used before the loss ${facts.agentSecondsUsed} s (no heartbeat there: counted to the last fact ${facts.lastFactAt})\n`);

    // Every file the first machine's agent wrote (code/, and the submitted checkpoint) is on B as it was on A.
    const wsA = path.join(homeA, 'workspaces', runId);
    const wsB = path.join(homeB, 'workspaces', runId);
    const written = [...filesUnder(wsA, 'code'), ...filesUnder(wsA, 'output')];
    expect(written).toEqual(expect.arrayContaining(['code/first.txt', 'code/submitted-twice']));
    for (const file of written) expect({ file, bytes: readFileSync(path.join(wsB, file)) }).toEqual({ file, bytes: readFileSync(path.join(wsA, file)) });
    expect(existsSync(path.join(wsB, 'code', 'resume-note.txt'))).toBe(true);
    expect((await runA2rl(['verify', runId], { env: machine(homeB) })).code).toBe(0);

    // Machine A comes back: its stale lock is dropped, and nothing is recorded into the run B took over.
    const recovery = await runA2rl(['run', '--task', 'ref-arith', '--agent-command', 'true', '--budget', '5s'], { env: machine(homeA) });
    expect(recovery.stderr).not.toContain(`recorded RunInterrupted for ${runId}`);
    expect(existsSync(path.join(homeA, 'runs', `${runId}.json`))).toBe(false);
    expect((await events(machine(homeB), runId)).length).toBe(evs.length);
  }, 400_000);
});

// The same through a real agent CLI (Claude Code, pinned in infra/agent-clis) against a scripted
// Anthropic fake: the harness is SIGKILLed while the CLI's model request after its second graded
// submission is pending; the resumed run launches `claude --resume <session>`, whose first request
// carries the earlier conversation with the harness's note as the newest user message.

/** Two turns of the CLI's shell tool, each submitting; the second prints a marker its command does not contain. */
const CLI_SCRIPT = [
  'mkdir -p output && cp -r models/* output/ckpt && curl -s -X POST "${GRADING_SERVER_URL}/submit" -H "content-type: application/json" -d \'{"model_path": "output/ckpt"}\'',
  'curl -s -X POST "${GRADING_SERVER_URL}/submit" -H "content-type: application/json" -d \'{"model_path": "output/ckpt"}\' && printf \'second%s\\n\' -submitted-9d2e',
];
const SECOND_RESULT = 'second-submitted-9d2e';
const UPSTREAM_KEY = 'sk-resume-upstream-3f9a7c1e5b2d4a6f';
const claudeInstalled = existsSync(path.join(projectCliBin(), 'claude'));
const offersTools = (request: unknown) => ((request as { tools?: unknown[] } | undefined)?.tools?.length ?? 0) > 0;

(sandboxedAsRoot && claudeInstalled ? describe : describe.skip)('a2rl run --resume with a real agent CLI (Claude Code)', () => {
  it('continues the CLI\'s own session: the resumed request carries the earlier conversation and the note; both segments\' submissions on the record', async () => {
    const home = tempDir('claude');
    let holding = true;
    let pending = false;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const fake = await startFakeAnthropic({
      script: CLI_SCRIPT,
      finalText: 'Resumed, and done.',
      expectKey: UPSTREAM_KEY,
      before: (_path, request) => {
        if (!holding || !offersTools(request) || !conversationOf(request).some((t) => t.role === 'tool' && t.text.includes(SECOND_RESULT))) return undefined;
        pending = true;
        return gate;
      },
    });
    const env = { ...process.env, A2RL_HOME: home, A2RL_LEDGER_URL: '', A2RL_ARTIFACTS_URL: '', A2RL_LLM_ANTHROPIC_URL: fake.url, A2RL_LLM_ANTHROPIC_KEY: UPSTREAM_KEY };
    try {
      const child = spawn(process.execPath, [A2RL_BIN, 'run', '--task', 'ref-arith', '--agent', 'claude-code', '--budget', '300s'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      const runId = await until(() => `the run to be scheduled (${stderr})`, () => /run (\S+) scheduled/.exec(stderr)?.[1], 120_000);
      // Lost while the CLI waits for its model after the second submission, once both gradings are recorded.
      await until('the CLI\'s request after its second submission', async () => pending && (await events(env, runId)).filter((e) => e.type === 'SubmissionGraded').length === 2, 180_000);
      child.kill('SIGKILL');
      await exited;
      holding = false;
      const callsBefore = fake.calls.length;

      const resumed = await runA2rl(['run', '--resume', runId, '--json'], { env });
      expect({ code: resumed.code, stderr: resumed.code === 0 ? '' : resumed.stderr }).toEqual({ code: 0, stderr: '' });
      const evs = await events(env, runId);
      const facts = evs.find((e) => e.type === 'RunResumed')!.data;
      expect(facts).toMatchObject({ session: 'continued', agentHome: 'on-disk', workspace: { source: 'on-disk' } });
      expect(evs.map((e) => e.seq)).toEqual(evs.map((_, i) => i));
      expect(evs.filter((e) => e.type === 'SubmissionGraded').map((e) => e.data.submissionId)).toEqual(['sub-1', 'sub-2']);
      expect(evs.map((e) => e.type).slice(-2)).toEqual(['RunCompleted', 'TreeHeadSigned']);

      // What the scripted provider saw from the resumed CLI: the earlier conversation, then the note.
      const first = fake.calls.slice(callsBefore).find((c) => offersTools(c.body))!;
      const turns = conversationOf(first.body);
      expect(turns.filter((t) => t.role === 'tool').some((t) => t.text.includes(SECOND_RESULT))).toBe(true);
      expect(lastUserText(first.body)).toMatch(/this run has been resumed/);
      // The resumed CLI's calls went through the resumed run's gateway and are on the record after RunResumed.
      const resumedSeq = evs.find((e) => e.type === 'RunResumed')!.seq;
      const resumedCalls = evs.filter((e) => e.type === 'LlmCallRecorded' && e.seq > resumedSeq);
      expect(resumedCalls.length).toBeGreaterThan(0);
      expect(resumedCalls.every((e) => e.data.segment === 2)).toBe(true);
      expect(evs.filter((e) => e.type === 'LlmCallRecorded' && e.seq < resumedSeq).every((e) => e.data.segment === undefined)).toBe(true);
      const transcript = await runA2rl(['transcript', runId], { env });
      expect(transcript.stdout).toMatch(/\(resumed, segment 2\) · seq /);
      expect((await runA2rl(['verify', runId], { env })).code).toBe(0);
    } finally {
      release();
      await fake.close();
    }
  }, 420_000);
});
