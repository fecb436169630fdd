import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { A2RL_BIN, runA2rl, type CliResult } from './a2rl-cli.js';
import { until } from '../testing/helpers.js';

// The CLI's machine-readable side through the built `a2rl` binary: --version, --json on the
// commands that print data, the GET /runs filters on `runs`, and `events --type/--after-seq/--limit/--follow`.

interface Ev {
  type: string;
  seq: number;
  runId: string;
}

interface RunRow {
  runId: string;
  task: string;
  agent: string;
  state: string;
  eventCount: number;
  lastSeq: number;
}

let home: string;
const children: ChildProcess[] = [];

const env = () => ({ ...process.env, A2RL_HOME: home });
const a2rl = (args: string[]): Promise<CliResult> => runA2rl(args, { env: env() });
const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');
const ndjson = <T>(text: string): T[] => lines(text).map((l) => JSON.parse(l) as T);

/** The `--json` value of a command that must succeed. */
async function json<T>(args: string[]): Promise<T> {
  const r = await a2rl(args);
  expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 0, stderr: expect.any(String) });
  return JSON.parse(r.stdout) as T;
}

async function runIds(args: string[]): Promise<string[]> {
  const r = await a2rl(['runs', '--json', ...args]);
  expect({ args, code: r.code }).toEqual({ args, code: 0 });
  return ndjson<RunRow>(r.stdout).map((row) => row.runId);
}

async function shortRun(args: string[]): Promise<string> {
  const r = await a2rl(['run', '--task', 'ref-arith', '--json', ...args]);
  if (r.code !== 0) throw new Error(`a2rl run failed (${r.code}): ${r.stderr}`);
  return (JSON.parse(lines(r.stdout).pop()!) as { runId: string }).runId;
}

/** Polls until `check` gives a value (a generous deadline, only so a broken run cannot hang the suite). */
function start(args: string[]): { child: ChildProcess; stdout: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [A2RL_BIN, ...args], { env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.resume();
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stdout: () => out, exited };
}

let crashed: string; // faulty-crash: its training script raises (failure class code_error_runtime)
let adHoc: string; // --agent-command true

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-cli-json-'));
  crashed = await shortRun(['--agent', 'faulty-crash', '--budget', '30s']);
  adHoc = await shortRun(['--agent-command', 'true', '--budget', '30s']);
}, 300_000);

afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(home, { recursive: true, force: true });
});

describe('a2rl --version and --json', () => {
  it('prints the package version', async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const r = await a2rl([flag]);
      expect({ code: r.code, stdout: r.stdout.trim() }).toEqual({ code: 0, stdout: version });
    }
  });

  it('tasks --json lists every pack with its level', async () => {
    const tasks = await json<Array<{ id: string; level: number; reference: boolean; interactive: boolean; baseModel: string }>>(['tasks', '--json']);
    expect(tasks).toEqual(expect.arrayContaining([
      expect.objectContaining({ id: 'ref-arith', level: 1, reference: true, interactive: false }),
      expect.objectContaining({ id: 'ref-household', level: 3, reference: true, interactive: true }),
      expect.objectContaining({ id: 'gsm8k', level: 1, reference: false }),
    ]));
  });

  it('agents --json lists every agent with what it is missing', async () => {
    const agents = await json<Array<{ id: string; kind: string; ready: boolean; missing: string[]; requires: { commands: string[] } }>>(['agents', '--json']);
    expect(agents).toEqual(expect.arrayContaining([
      expect.objectContaining({ id: 'reference', kind: 'reference' }),
      expect.objectContaining({ id: 'faulty-crash', kind: 'test', requires: expect.objectContaining({ commands: ['node'] }) }),
    ]));
    for (const a of agents) expect(a.ready).toBe(a.missing.length === 0);
  });

  it('doctor --json: the sandbox and each task, with the same exit status', async () => {
    const report = await json<{ version: string; sandbox: { mode: string; checks: unknown[] }; tasks: Array<{ task: string; ready: boolean }>; ready: boolean }>(['doctor', '--task', 'ref-arith', '--json']);
    expect(report).toEqual(expect.objectContaining({ sandbox: expect.objectContaining({ mode: expect.any(String), checks: expect.any(Array) }), ready: true }));
    expect(report.tasks).toEqual([expect.objectContaining({ task: 'ref-arith', ready: true })]);

    const sandbox = await a2rl(['doctor', '--sandbox', '--json']);
    const only = JSON.parse(sandbox.stdout) as { sandbox: { mode: string }; ready: boolean; tasks?: unknown };
    expect(only.tasks).toBeUndefined();
    expect(sandbox.code).toBe(only.ready ? 0 : 1);
    expect(only.ready).toBe(only.sandbox.mode !== 'none');
  });

  it('export --json: the bundle file, its size and sha256, and what it holds', async () => {
    const bundle = path.join(home, 'bundle.tar.gz');
    const events = ndjson<Ev>((await a2rl(['events', crashed, '--json'])).stdout);
    const result = await json<Record<string, unknown>>(['export', crashed, '-o', bundle, '--json']);
    expect(result).toEqual(expect.objectContaining({
      runId: crashed, bundle, bytes: statSync(bundle).size, sha256: createHash('sha256').update(readFileSync(bundle)).digest('hex'),
      events: events.length, heads: events.filter((e) => e.type === 'TreeHeadSigned').length, withCheckpoints: false, keyId: expect.any(String),
    }));
  });

  it('projections rebuild --json', async () => {
    const result = await json<{ projections: Array<{ name: string; processed: number }> }>(['projections', 'rebuild', '--json']);
    expect(result.projections).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'run-list', processed: expect.any(Number) })]));
  });
});

describe('a2rl runs: the filters of GET /runs', () => {
  it('lists every run without a filter, newest first (--sort id: by run id)', async () => {
    expect(await runIds([])).toEqual([adHoc, crashed]);
    expect(await runIds(['--sort', 'id'])).toEqual([crashed, adHoc].sort());
  });

  it('filters by task, agent, driver, state and failure class', async () => {
    expect(await runIds(['--agent', 'faulty-crash'])).toEqual([crashed]);
    expect(await runIds(['--agent', 'ad-hoc'])).toEqual([adHoc]);
    expect(await runIds(['--task', 'ref-arith', '--agent', 'faulty-crash', '--state', 'completed'])).toEqual([crashed]);
    expect(await runIds(['--task', 'ref-judge'])).toEqual([]);
    expect(await runIds(['--state', 'running'])).toEqual([]);
    expect(await runIds(['--driver', 'none'])).toEqual([crashed]); // faulty-crash declares driver "none"; the ad-hoc run has none
    expect(await runIds(['--failure-class', 'code_error_runtime'])).toEqual([crashed]);
  });

  it('pages with --limit and --offset', async () => {
    const all = await runIds([]);
    expect(await runIds(['--limit', '1'])).toEqual(all.slice(0, 1));
    expect(await runIds(['--limit', '1', '--offset', '1'])).toEqual(all.slice(1, 2));
    expect(await runIds(['--offset', '2'])).toEqual([]);
  });

  it('names a bad filter value in one line', async () => {
    for (const [args, message] of [
      [['--state', 'done'], '--state must be one of'],
      [['--failure-class', 'oops'], '--failure-class must be one of'],
      [['--limit', '0'], '--limit must be an integer of at least 1'],
    ] as const) {
      const r = await a2rl(['runs', ...args]);
      expect({ code: r.code, stderr: r.stderr.trim() }).toEqual({ code: 1, stderr: expect.stringMatching(new RegExp(`^a2rl: ${message}`)) });
      expect(lines(r.stderr)).toHaveLength(1);
    }
  });
});

describe('a2rl events: --type, --after-seq, --limit', () => {
  let all: Ev[];
  beforeAll(async () => {
    all = ndjson<Ev>((await a2rl(['events', crashed, '--json'])).stdout);
  });

  it('keeps only the given types (repeatable, comma-separated)', async () => {
    const r = await a2rl(['events', crashed, '--json', '--type', 'RunCompleted,TreeHeadSigned', '--type', 'AgentExited']);
    const wanted = new Set(['RunCompleted', 'TreeHeadSigned', 'AgentExited']);
    expect(ndjson<Ev>(r.stdout)).toEqual(all.filter((e) => wanted.has(e.type)));
  });

  it('pages by seq', async () => {
    const r = await a2rl(['events', crashed, '--json', '--after-seq', '5', '--limit', '3']);
    expect(ndjson<Ev>(r.stdout).map((e) => e.seq)).toEqual([6, 7, 8]);
  });

  it('refuses an unknown event type in one line', async () => {
    const r = await a2rl(['events', crashed, '--type', 'RunCompleted,NoSuchEvent']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^a2rl: --type: unknown event type "NoSuchEvent" \(known: RunScheduled, /);
  });
});

describe('a2rl events --follow', () => {
  it('on a finished run prints every event and exits', async () => {
    const full = await a2rl(['events', adHoc, '--json']);
    const followed = await a2rl(['events', adHoc, '--json', '--follow']);
    expect(followed.code).toBe(0);
    expect(followed.stdout).toBe(full.stdout);
    const filtered = await a2rl(['events', adHoc, '--json', '--follow', '--type', 'RunCompleted']);
    expect(ndjson<Ev>(filtered.stdout).map((e) => e.type)).toEqual(['RunCompleted']);
  }, 60_000);

  it('refuses an unknown run', async () => {
    const r = await a2rl(['events', 'no-such-run', '--follow']);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('a2rl: no run "no-such-run" in the ledger');
  });

  it('on a running run prints events as they are recorded and exits when the run completes', async () => {
    // The agent waits for a file the test writes into its workspace, so the run is still going
    // while the follower is checked, however slow the machine is.
    const run = start(['run', '--json', '--task', 'ref-arith', '--budget', '10m', '--grace', '1s', '--agent-command', 'until [ -e code/go ]; do sleep 0.2; done']);
    const runId = await until('the run to be running', async () => (await runIds(['--state', 'running']))[0], 120_000);
    const follower = start(['events', runId, '--follow', '--json']);
    await until('the follower to print AgentStarted', () => (ndjson<Ev>(follower.stdout()).some((e) => e.type === 'AgentStarted') ? true : undefined), 120_000);
    expect(follower.child.exitCode).toBeNull();
    expect(ndjson<Ev>(follower.stdout()).map((e) => e.type)).not.toContain('RunCompleted');

    writeFileSync(path.join(home, 'workspaces', runId, 'code', 'go'), '');
    expect(await follower.exited).toBe(0);
    expect(await run.exited).toBe(0);
    const followed = ndjson<Ev>(follower.stdout());
    expect(followed.map((e) => e.type).slice(-2)).toEqual(['RunCompleted', 'TreeHeadSigned']); // through the final signed head
    expect(follower.stdout()).toBe((await a2rl(['events', runId, '--json'])).stdout);
  }, 300_000);
});
