import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { freePort } from '../../modules/serving/free-port.js';
import { runA2rl } from './a2rl-cli.js';

// `a2rl run --serve` not on a terminal (a script, CI): the dashboard it served goes with the run, and
// it says so instead of dying silently. (On a terminal it keeps serving until Ctrl-C: afterRun in
// src/commands/dashboard-link.ts.)

jest.setTimeout(180_000);

let home: string;
beforeAll(() => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-run-serve-'));
});
afterAll(() => {
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('a2rl run --serve', () => {
  it('says that the dashboard stopped when the run ends without a terminal, and is gone', async () => {
    const port = await freePort();
    const env = { ...process.env, A2RL_HOME: home, A2RL_HTTP_HOST: '127.0.0.1', A2RL_HTTP_PORT: String(port) };
    const r = await runA2rl(['run', '--task', 'ref-arith', '--agent-command', 'true', '--budget', '20s', '--grace', '1s', '--serve', '--json'], { env });
    expect(r.code).toBe(0);
    const runId = (JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
    expect(r.stderr).toContain(`dashboard: http://127.0.0.1:${port}/#/runs/${runId}`);
    expect(r.stderr).toContain(`dashboard at http://127.0.0.1:${port}/#/runs/${runId} stopped: the run has ended (--serve keeps serving after the run only on a terminal`);
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
  });
});
