import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { RunSummary } from '../../modules/runs/run.service.js';
import { programKind, type ProcessFacts } from '../../projections/run-analysis/process-kind.js';
import { A2RL_BIN, agentStartedIn, runA2rl } from './a2rl-cli.js';
import { until } from '../testing/helpers.js';

// Benchmark runs end to end through the built `a2rl` binary on the embedded default (SQLite ledger,
// filesystem artifacts) with the bwrap sandbox that .ci/run installs.

const exec = promisify(execFile);

// Each test drives the CLI several times: seconds each when idle, many more when the cores are busy.
jest.setTimeout(180_000);

interface Ev {
  type: string;
  seq: number;
  data: Record<string, unknown>;
}

/** The CLI's `--json` summary line. */
type Summary = Pick<RunSummary, 'runId' | 'task' | 'agent' | 'driver' | 'baseline' | 'best' | 'improvement' | 'submissions' | 'state'>;

let home: string;

async function a2rl(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return runA2rl(args, { env: { ...process.env, A2RL_HOME: home, ...env } });
}

async function run(args: string[], env: Record<string, string> = {}): Promise<{ summary: Summary; events: Ev[]; stderr: string }> {
  const r = await a2rl(['run', '--json', ...args], env);
  if (r.code !== 0) throw new Error(`a2rl run failed (${r.code}): ${r.stderr}`);
  const summary = JSON.parse(r.stdout.trim().split('\n').pop()!) as Summary;
  return { summary, events: await events(summary.runId), stderr: r.stderr };
}

async function events(runId: string): Promise<Ev[]> {
  const r = await a2rl(['events', runId, '--json']);
  return r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
}

const ofType = (evs: Ev[], type: string) => evs.filter((e) => e.type === type);
const blob = (key: unknown) => readFileSync(path.join(home, 'artifacts', String(key)), 'utf8');
const output = (evs: Ev[]) => ofType(evs, 'AgentOutput').map((e) => blob((e.data.chunk as { key: string }).key)).join('');

beforeAll(() => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-runs-'));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('a2rl demo: the reference agent on every reference task', () => {
  let results: Summary[];
  beforeAll(async () => {
    const r = await a2rl(['demo', '--json']);
    expect(r.code).toBe(0);
    results = r.stdout.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Summary);
  }, 300_000);

  it('improves on the baseline on each task with several submissions', () => {
    expect(results.map((r) => r.task)).toEqual(['ref-arith', 'ref-judge', 'ref-household']);
    for (const r of results) {
      expect(r.state).toBe('completed');
      expect(r.improvement).toBeGreaterThan(0);
      expect(r.submissions).toBeGreaterThanOrEqual(2);
    }
  });

  it('records code revisions, training processes, gradings and (for the interactive task) rollouts', async () => {
    for (const r of results) {
      const evs = await events(r.runId);
      expect(evs.map((e) => e.seq)).toEqual(evs.map((_, i) => i));
      expect(evs[0].type).toBe('RunScheduled');
      expect(evs.at(-1)!.type).toBe('TreeHeadSigned'); // the final signed head covers the whole run
      expect(evs.filter((e) => e.type !== 'TreeHeadSigned').at(-1)!.type).toBe('RunCompleted');
      const codeChanges = ofType(evs, 'FileChanged').filter((e) => String(e.data.path).startsWith('code/'));
      expect(codeChanges.length).toBeGreaterThanOrEqual(2); // written, then revised between submissions
      expect(ofType(evs, 'ProcessStarted').some((e) => programKind(e.data as unknown as ProcessFacts) === 'training')).toBe(true);
      expect(ofType(evs, 'SubmissionGraded').length).toBe(r.submissions);
      expect(ofType(evs, 'WorkspacePrepared')[0].data.sandbox).toBe('bwrap');
      if (r.task === 'ref-household') expect(ofType(evs, 'RolloutBatchRecorded').length).toBeGreaterThan(0);
    }
  });

  it('keeps run_meta.json current, outside the workspace, linked from it as the sandbox shows it', () => {
    expect(readlinkSync(path.join(home, 'workspaces', results[0].runId, 'run_meta.json'))).toBe('/run/a2rl/run_meta.json');
    const meta = JSON.parse(readFileSync(path.join(home, 'runs', results[0].runId, 'run_meta.json'), 'utf8')) as Record<string, number | null>;
    expect(meta.timeout_s).toBe(90);
    for (const field of ['start_time', 'last_submit_time', 'end_time']) expect(typeof meta[field]).toBe('number');
  });
});

describe('faulty agents each run to a recorded end', () => {
  it('faulty-crash: the training script raises, the agent exits non-zero, nothing is submitted', async () => {
    const { summary, events: evs } = await run(['--task', 'ref-arith', '--agent', 'faulty-crash', '--budget', '30s']);
    expect(summary.submissions).toBe(0);
    expect(ofType(evs, 'AgentExited')[0].data).toMatchObject({ reason: 'crashed', exitCode: 1 });
    expect(ofType(evs, 'ProcessStarted').some((e) => (e.data.argv as string[]).some((a) => a.endsWith('code/train_sft.mjs')))).toBe(true);
    expect(output(evs)).toContain('TypeError');
  });

  it('faulty-copy-base: the unchanged base model scores exactly the baseline', async () => {
    const { summary } = await run(['--task', 'ref-judge', '--agent', 'faulty-copy-base', '--budget', '30s']);
    expect(summary).toMatchObject({ submissions: 1, improvement: 0 });
  });

  it('faulty-idle: never submits and is stopped at the budget', async () => {
    const { summary, events: evs } = await run(['--task', 'ref-arith', '--agent', 'faulty-idle', '--budget', '3s', '--grace', '1s']);
    expect(summary).toMatchObject({ submissions: 0, best: null, state: 'completed' });
    expect(ofType(evs, 'AgentExited')[0].data.reason).toBe('timeout');
  });

  it('faulty-garbage: the unloadable checkpoint is rejected as invalid_checkpoint', async () => {
    const { summary, events: evs } = await run(['--task', 'ref-household', '--agent', 'faulty-garbage', '--budget', '30s']);
    expect(summary.best).toBeNull();
    expect(ofType(evs, 'SubmissionRejected')[0].data.reasonClass).toBe('invalid_checkpoint');
    expect(output(evs)).toContain('"error"');
  });

  it('faulty-diverge: training makes the model worse than the baseline', async () => {
    const { summary } = await run(['--task', 'ref-arith', '--agent', 'faulty-diverge', '--budget', '30s']);
    expect(summary.submissions).toBe(1);
    expect(summary.improvement!).toBeLessThan(0);
  });
});

describe('the sandbox and the grading API refuse what the agent may not do', () => {
  it('held-out data, data/ and models/ are out of reach, bad submission paths are refused, and all of it is recorded', async () => {
    const privateFile = path.join(home, 'tasks', 'ref-arith', 'private', 'test.jsonl');
    const submit = (p: string) =>
      `node -e 'fetch(process.env.GRADING_SERVER_URL + "/submit", {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify({model_path: ${JSON.stringify(p)}})}).then(async r => console.log("SUBMIT", r.status, await r.text()))'`;
    const script = [
      `cat ${privateFile} || echo "REFUSED read private"`,
      `ls ${path.join(home, 'tasks')} || echo "REFUSED list task cache"`,
      `echo x >> data/train.jsonl || echo "REFUSED write data"`,
      `touch models/arith-cue-base/weights.json || echo "REFUSED write models"`,
      submit('/etc'),
      submit('../../'),
      submit('models/arith-cue-base'),
      `ln -s ${path.dirname(privateFile)} output/link && ${submit('output/link')}`,
    ].join('; ');
    const dataBefore = createHash('sha256').update(readFileSync(path.join(home, 'tasks', 'ref-arith', 'data', 'train.jsonl'))).digest('hex');
    const { summary, events: evs } = await run(['--task', 'ref-arith', '--agent-command', script, '--budget', '30s']);
    const out = output(evs);
    for (const refusal of ['REFUSED read private', 'REFUSED list task cache', 'REFUSED write data', 'REFUSED write models']) expect(out).toContain(refusal);
    expect(out).toMatch(/Read-only file system|Permission denied/); // the agent is not root: file modes refuse first
    expect(out.match(/SUBMIT 4\d\d/g)?.length).toBe(4);
    const rejected = ofType(evs, 'SubmissionRejected');
    expect(rejected.map((e) => e.data.reasonClass)).toEqual(['invalid_path', 'invalid_path', 'invalid_path', 'invalid_path']);
    expect(summary.best).toBeNull();
    const ws = path.join(home, 'workspaces', summary.runId);
    expect(createHash('sha256').update(readFileSync(path.join(ws, 'data', 'train.jsonl'))).digest('hex')).toBe(dataBefore);
    expect(ofType(evs, 'FileChanged').some((e) => String(e.data.path).startsWith('data/'))).toBe(false);
  });
});

describe('budget, driver attribution and interrupted runs', () => {
  it('kills a process tree that ignores SIGTERM when the budget expires', async () => {
    const marker = `a2rl-budget-${process.pid}-${Date.now()}`;
    const script = `trap "" TERM; (trap "" TERM; exec -a ${marker} sleep 1000) & setsid bash -c 'exec -a ${marker} sleep 1000' & wait`;
    const { events: evs } = await run(['--task', 'ref-arith', '--agent-command', script, '--budget', '2s', '--grace', '1s']);
    expect(ofType(evs, 'AgentExited')[0].data.reason).toBe('timeout');
    const ps = await exec('ps', ['-eo', 'args']);
    expect(ps.stdout).not.toContain(marker);
  });

  it('records the driver from --driver, else from LLM_MODEL / CHAT_MODEL / OPENAI_MODEL', async () => {
    const flagged = await run(['--task', 'ref-arith', '--agent-command', 'true', '--budget', '5s', '--driver', 'gpt-test']);
    expect(ofType(flagged.events, 'RunScheduled')[0].data.driver).toBe('gpt-test');
    const detected = await run(['--task', 'ref-arith', '--agent-command', 'true', '--budget', '5s'], { CHAT_MODEL: 'chat-from-env' });
    expect(detected.summary.driver).toBe('chat-from-env');
  });

  it('refuses unknown tasks and agents and bad budgets before recording anything', async () => {
    for (const [args, message] of [
      [['--task', 'nope', '--agent', 'reference'], 'unknown task "nope"'],
      [['--task', 'ref-arith', '--agent', 'nope'], 'unknown agent "nope"'],
      [['--task', 'ref-arith', '--agent', 'reference', '--budget', 'soon'], 'invalid duration "soon"'],
      // Refused whether or not a claude CLI is installed (pinned, global or on PATH): the gateway's upstream key is unset.
      [['--task', 'ref-arith', '--agent', 'claude-code'], 'agent "claude-code" cannot run on this machine; missing:'],
    ] as const) {
      const r = await a2rl(['run', ...args], { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, A2RL_LLM_ANTHROPIC_KEY: '', ANTHROPIC_API_KEY: '', CLAUDE_CODE_OAUTH_TOKEN: '' });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(message);
    }
  });

  it('records RunInterrupted for a run whose harness was SIGKILLed, and its agent does not survive', async () => {
    const marker = `a2rl-orphan-${process.pid}-${Date.now()}`;
    const child = spawn(process.execPath, [A2RL_BIN, 'run', '--task', 'ref-arith', '--agent-command', `exec -a ${marker} sleep 1000`, '--budget', '10m'], {
      env: { ...process.env, A2RL_HOME: home },
      stdio: 'ignore',
    });
    const locks = path.join(home, 'runs');
    const runId = await until('the run\'s agent to run', async () => {
      const ps = await exec('ps', ['-eo', 'args']);
      if (!ps.stdout.includes(marker) || !existsSync(locks)) return undefined;
      return (await exec('ls', [locks])).stdout.split('\n').find((n) => n.endsWith('.json'))?.replace(/\.json$/, '');
    }, 120_000);
    // Kill the harness once the agent's start is durable in the ledger (read-only peek at the file).
    await agentStartedIn(home, runId, Date.now() + 120_000);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    // bwrap --die-with-parent: gone as soon as the kernel has torn it down, however busy the machine.
    await until('the agent to be gone', async () => !(await exec('ps', ['-eo', 'args'])).stdout.includes(marker));
    const next = await a2rl(['run', '--task', 'ref-arith', '--agent-command', 'true', '--budget', '5s']);
    expect(next.stderr).toContain(`recorded RunInterrupted for ${runId}`);
    const evs = await events(runId);
    expect(evs.filter((e) => e.type !== 'TreeHeadSigned').at(-1)!.type).toBe('RunInterrupted');
    expect(ofType(evs, 'AgentStarted').length).toBe(1);
  });
});
