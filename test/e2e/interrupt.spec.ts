import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { A2RL_BIN, runA2rl } from './a2rl-cli.js';

// Ctrl-C on `a2rl run`: the agent is stopped as at budget expiry and the run is closed, sealed and
// verifiable, not left open for the next start to recover.

let home: string;
beforeAll(() => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-interrupt-'));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

const env = () => ({ ...process.env, A2RL_HOME: home });

/** Resolves once some run's agent has written `code/started` in its workspace. */
async function agentStarted(timeoutMs: number): Promise<void> {
  const workspaces = path.join(home, 'workspaces');
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (existsSync(workspaces) && readdirSync(workspaces).some((w) => existsSync(path.join(workspaces, w, 'code', 'started')))) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the agent never started');
}

describe('interrupting a2rl run', () => {
  it('stops the agent on SIGINT, closes and seals the run, and exits 130', async () => {
    const child = spawn(process.execPath, [A2RL_BIN, 'run', '--json', '--task', 'ref-arith', '--agent-command', 'touch code/started && sleep 120', '--budget', '10m', '--grace', '1s'], {
      env: env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await agentStarted(60_000);
    child.kill('SIGINT');
    const code = await exited;
    expect({ code, stderr }).toEqual({ code: 130, stderr: expect.stringContaining('a2rl: SIGINT: stopping the agent; its run is closed and sealed as usual') });

    const summary = JSON.parse(stdout.trim().split('\n').pop()!) as { runId: string; state: string };
    expect(summary.state).toBe('cancelled'); // the operator stopped the agent: the run's real end state, not "completed"
    const events = (await runA2rl(['events', summary.runId, '--json'], { env: env() })).stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> });
    expect(events.find((e) => e.type === 'AgentExited')?.data.reason).toBe('killed');
    expect(events.map((e) => e.type).slice(-2)).toEqual(['RunCompleted', 'TreeHeadSigned']);
    const verify = await runA2rl(['verify', summary.runId], { env: env() });
    expect(verify.code).toBe(0);
  }, 120_000);
});
