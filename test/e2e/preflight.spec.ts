import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { runA2rl } from './a2rl-cli.js';

// `a2rl run` with an LLM agent whose model upstream does not answer: refused before it starts, in
// one line, exit 2, and nothing recorded (no run in `a2rl runs`). The agent (opencode) is a stand-in
// on PATH: the refusal comes before any agent is launched.

jest.setTimeout(120_000);

let home: string;
let bin: string;
let deadUrl: string;

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-preflight-'));
  bin = path.join(home, 'bin');
  mkdirSync(bin);
  writeFileSync(path.join(bin, 'opencode'), '#!/bin/sh\nexit 0\n');
  chmodSync(path.join(bin, 'opencode'), 0o755);
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  deadUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  await new Promise((r) => server.close(r));
});

afterAll(() => {
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('a2rl run checks the model upstream first', () => {
  it('refuses an LLM agent whose upstream does not answer: one line, exit 2, no run recorded', async () => {
    const env = { ...process.env, A2RL_HOME: path.join(home, 'home'), PATH: `${bin}:${process.env.PATH}`, A2RL_LLM_OPENAI_KEY: 'sk-test-not-shown', A2RL_LLM_OPENAI_URL: deadUrl };
    const r = await runA2rl(['run', '--task', 'ref-arith', '--agent', 'opencode', '--budget', '30s', '--json'], { env });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^a2rl: configuration error: A2RL_LLM_OPENAI_URL: the openai upstream at .* did not answer GET .*\/v1\/models \(ECONNREFUSED\); the run was not started$/)]);
    expect(r.stdout).toBe('');
    expect(r.stderr).not.toContain('sk-test-not-shown');
    const runs = await runA2rl(['runs', '--json'], { env });
    expect(runs.code).toBe(0);
    expect(runs.stdout).not.toContain('ref-arith');
  });
});
