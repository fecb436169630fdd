import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { A2RL_BIN, runA2rl, type CliResult } from './a2rl-cli.js';

// Honest outcomes through the built CLI: a run whose set-up failed and one the operator cancelled
// are their own states, left off the scoreboard unless asked; a run whose harness was killed shows
// `interrupted (harness gone)` at once, before any later `a2rl run` records it.

interface RunRow {
  runId: string;
  state: string;
  harnessGone?: boolean;
}
interface Ev {
  type: string;
  data: Record<string, unknown>;
}

const homes: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const home of homes) rmSync(home, { recursive: true, force: true });
});

function newHome(): string {
  const home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-outcomes-'));
  homes.push(home);
  return home;
}

const env = (home: string) => ({ ...process.env, A2RL_HOME: home });
const a2rl = (home: string, args: string[]): Promise<CliResult> => runA2rl(args, { env: env(home) });
const ndjson = <T>(text: string): T[] => text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as T);

async function ok(home: string, args: string[]): Promise<string> {
  const r = await a2rl(home, args);
  expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 0, stderr: expect.any(String) });
  return r.stdout;
}
const runs = async (home: string, ...args: string[]) => ndjson<RunRow>(await ok(home, ['runs', '--json', ...args]));
const events = async (home: string, runId: string) => ndjson<Ev>(await ok(home, ['events', runId, '--json']));
const scoreboardRuns = async (home: string, ...args: string[]) =>
  (JSON.parse(await ok(home, ['scoreboard', '--json', ...args])) as Array<{ runIds: string[] }>).flatMap((row) => row.runIds);

/** A harness running an agent that signals it started (code/started) and then waits to be stopped. */
function startLongRun(home: string): { child: ChildProcess; exited: Promise<number | null>; output: () => { stdout: string; stderr: string } } {
  const child = spawn(process.execPath, [A2RL_BIN, 'run', '--json', '--task', 'ref-arith', '--agent-command', 'touch code/started && sleep 300', '--budget', '10m', '--grace', '1s'], {
    env: env(home),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => ({ stdout, stderr }) };
}

/** Resolves once the run's agent has written code/started in its workspace (a generous deadline, so a broken run cannot hang the suite). */
async function agentStarted(home: string, exited: Promise<unknown>): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const workspaces = path.join(home, 'workspaces');
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline && !gone) {
    if (existsSync(workspaces) && readdirSync(workspaces).some((w) => existsSync(path.join(workspaces, w, 'code', 'started')))) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(gone ? 'the harness exited before its agent started' : 'the agent never started');
}

describe('outcomes', () => {
  it('a run whose set-up failed (gsm8k without its dataset) is setup_failed and off the scoreboard unless included', async () => {
    const home = newHome();
    const failed = await a2rl(home, ['run', '--task', 'gsm8k', '--agent-command', 'true', '--budget', '1m', '--json']);
    expect({ code: failed.code, stderr: failed.stderr }).toEqual({ code: 1, stderr: expect.stringContaining('gsm8k dataset is missing') });

    const [row] = await runs(home);
    expect(row.state).toBe('setup_failed');
    expect((await events(home, row.runId)).find((e) => e.type === 'RunInterrupted')?.data).toMatchObject({ cause: 'setup_failed' });
    expect((await runs(home, '--state', 'setup_failed')).map((r) => r.runId)).toEqual([row.runId]);
    expect(await runs(home, '--state', 'interrupted')).toEqual([]);

    expect(await scoreboardRuns(home)).toEqual([]);
    expect(await scoreboardRuns(home, '--include-unfinished')).toEqual([row.runId]);
    expect(await ok(home, ['scoreboard'])).toContain('1 run(s) whose set-up failed or that were cancelled are not counted (--include-unfinished counts them)');
  }, 180_000);

  it('Ctrl-C on a2rl run cancels the run: state cancelled, the operator recorded as the stopper, off the scoreboard', async () => {
    const home = newHome();
    const run = startLongRun(home);
    await agentStarted(home, run.exited);
    run.child.kill('SIGINT');
    expect(await run.exited).toBe(130);

    const [row] = await runs(home);
    expect(row.state).toBe('cancelled');
    const list = await events(home, row.runId);
    expect(list.find((e) => e.type === 'AgentExited')?.data).toMatchObject({ reason: 'killed', stoppedBy: 'operator' });
    expect(list.map((e) => e.type).slice(-2)).toEqual(['RunCompleted', 'TreeHeadSigned']);
    expect(await scoreboardRuns(home)).toEqual([]);
    expect(await scoreboardRuns(home, '--include-unfinished')).toEqual([row.runId]);
  }, 240_000);

  it('a harness killed mid-run shows its run interrupted (harness gone) without any further a2rl run, and records nothing', async () => {
    const home = newHome();
    const run = startLongRun(home);
    await agentStarted(home, run.exited);
    const [open] = await runs(home);
    expect(open).toEqual(expect.objectContaining({ state: 'running' }));
    expect(open).not.toHaveProperty('harnessGone');

    run.child.kill('SIGKILL');
    await run.exited;
    const before = await events(home, open.runId);
    const [shown] = await runs(home);
    expect(shown).toMatchObject({ runId: open.runId, state: 'interrupted', harnessGone: true });
    expect(await ok(home, ['runs'])).toContain('interrupted (harness gone)');
    expect(await runs(home, '--state', 'running')).toEqual([]);
    expect((await runs(home, '--state', 'interrupted')).map((r) => r.runId)).toEqual([open.runId]);
    // A read observes; it does not record.
    expect((await events(home, open.runId)).length).toBe(before.length);
    expect(before.some((e) => e.type === 'RunInterrupted')).toBe(false);

    // The next harness records the fact (and kills what survived of the agent).
    const next = await a2rl(home, ['run', '--task', 'ref-arith', '--agent-command', 'true', '--budget', '30s', '--json']);
    expect({ code: next.code, stderr: next.stderr }).toEqual({ code: 0, stderr: expect.stringContaining(`recorded RunInterrupted for ${open.runId}`) });
    expect((await events(home, open.runId)).find((e) => e.type === 'RunInterrupted')?.data).toMatchObject({ cause: 'harness_gone' });
    const recovered = (await runs(home)).find((r) => r.runId === open.runId);
    expect(recovered).toEqual(expect.objectContaining({ state: 'interrupted' }));
    expect(recovered).not.toHaveProperty('harnessGone');
  }, 300_000);
});
