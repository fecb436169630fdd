import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { LedgerService } from '../../modules/ledger/ledger.service.js';

// End-to-end through the built `a2rl` binary (src/bin/a2rl.js → dist/, built by `npm test`'s pretest)
// on the embedded default: SQLite ledger and read models, filesystem artifacts, under a temp A2RL_HOME.

const run = promisify(execFile);
const bin = path.resolve('src/bin/a2rl.js');

describe('a2rl CLI on the embedded default', () => {
  let home: string;
  const a2rl = (args: string[], env: Record<string, string> = {}) =>
    run(process.execPath, [bin, ...args], { env: { ...process.env, A2RL_HOME: home, ...env } }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );

  beforeAll(async () => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-cli-'));
    const store = await SqliteEventStore.open(path.join(home, 'ledger.db'));
    let t = Date.parse('2026-02-01T10:00:00.000Z');
    const ledger = new LedgerService(store, () => new Date((t += 500)));
    for (const runId of ['run-b', 'run-a']) {
      await ledger.record(runId, 'RunScheduled', { task: 'ref-arith', agent: 'reference', baseModel: 'tiny', budgetSeconds: 90, seed: 7, mode: 'free' });
      await ledger.record(runId, 'AgentStarted', { command: 'node agent.mjs' });
      await ledger.record(runId, 'FileChanged', { path: 'code/train.mjs', op: 'create', sha256: 'a'.repeat(64), size: 10, observedAt: new Date(t).toISOString() });
    }
    await ledger.record('run-a', 'RunCompleted', { submissions: 0 });
    await store.close();
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('lists events and projections in --help', async () => {
    const { code, stdout } = await a2rl(['--help']);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^\s+events \[options\] <runId>/m);
    expect(stdout).toMatch(/^\s+projections/m);
  });

  it('says how agents are sandboxed here (doctor --sandbox), as root with bubblewrap', async () => {
    const { code, stdout } = await a2rl(['doctor', '--sandbox']);
    const root = process.getuid?.() === 0;
    expect(code).toBe(0); // CI installs bubblewrap; a machine without it exits 1 with "UNSANDBOXED"
    expect(stdout).toMatch(new RegExp(`^sandbox: ${root ? 'setuid' : 'userns'}$`, 'm'));
    for (const check of ['bubblewrap', 'privilege', 'nested user namespaces', 'network', 'kernel limits', 'memory limit', 'GPUs', 'process tracer']) expect(stdout).toMatch(new RegExp(`^  \\S+\\s+${check}: `, 'm'));
    expect(stdout).toMatch(/^  ok\s+privilege: the agent runs as .*no capabilities, no_new_privs/m);
  });

  it('prints a run as NDJSON in seq order, one canonical event per line', async () => {
    const { code, stdout } = await a2rl(['events', 'run-a', '--json']);
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    const events = lines.map((l) => JSON.parse(l) as { type: string; seq: number; runId: string });
    expect(events.map((e) => [e.seq, e.type])).toEqual([[0, 'RunScheduled'], [1, 'AgentStarted'], [2, 'FileChanged'], [3, 'RunCompleted']]);
    expect(lines[0].startsWith('{"data":')).toBe(true); // canonical: keys sorted
  });

  it('prints a readable table without --json and fails clearly for an unknown run', async () => {
    const table = await a2rl(['events', 'run-b']);
    expect(table.stdout.split('\n')[0]).toMatch(/^SEQ\s+OCCURRED AT\s+TYPE\s+DATA/);
    expect(table.stdout).toContain('FileChanged');
    const missing = await a2rl(['events', 'no-such-run']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('run "no-such-run" has no events');
  });

  it('projects the run list, reports status with zero lag, and rebuilds to identical rows', async () => {
    const runs = await a2rl(['runs', '--json']);
    expect(runs.code).toBe(0);
    const rows = runs.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows.map((r) => [r.runId, r.state, r.eventCount, r.lastSeq])).toEqual([
      ['run-a', 'completed', 4, 3],
      ['run-b', 'running', 3, 2],
    ]);
    const status = JSON.parse((await a2rl(['projections', 'status', '--json'])).stdout) as Array<Record<string, unknown>>;
    expect(status).toEqual([
      expect.objectContaining({ name: 'run-list', lag: 0, eventsProcessed: 7 }),
      expect.objectContaining({ name: 'run-analysis', lag: 0, eventsProcessed: 7 }),
      expect.objectContaining({ name: 'workspace-revisions', lag: 0, eventsProcessed: 7 }),
    ]);
    const rebuilt = await a2rl(['projections', 'rebuild', 'run-list']);
    expect(rebuilt.code).toBe(0);
    expect(rebuilt.stdout).toMatch(/rebuilt run-list: 7 events/);
    expect((await a2rl(['runs', '--json'])).stdout).toBe(runs.stdout);
    const unknown = await a2rl(['projections', 'rebuild', 'nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('unknown projection "nope"');
  });

  it('refuses invalid configuration at start, naming the variable', async () => {
    const runCount = async () => (await a2rl(['runs', '--json'])).stdout.split('\n').filter((l) => l.trim()).length; // NDJSON
    const runsBefore = await runCount();
    for (const [variable, value] of [['A2RL_LEDGER_URL', 'mysql://db'], ['A2RL_ARTIFACTS_URL', 'ftp://x'], ['A2RL_READMODEL_URL', 'esdb://x']]) {
      const r = await a2rl(['runs'], { [variable]: value });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`configuration error: ${variable}:`);
    }
    // Read at grading time, but checked before a run starts: nothing is recorded.
    for (const [variable, value] of [['A2RL_SERVE_COMMAND', 'vllm serve'], ['A2RL_ENV_WEBSHOP_COMMAND', 'python3 server.py'], ['A2RL_ENV_READY_TIMEOUT', 'soon']]) {
      const r = await a2rl(['run', '--task', 'ref-arith', '--agent', 'reference', '--budget', '5s'], { [variable]: value });
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 2, stderr: expect.stringContaining(`configuration error: ${variable}:`) });
    }
    expect(await runCount()).toBe(runsBefore);
  }, 180_000); // eight CLI starts in a row: a deadline for a busy machine, not a speed goal
});
