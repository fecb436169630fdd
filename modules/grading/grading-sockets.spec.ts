import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { request } from 'node:http';
import { statSync } from 'node:fs';
import path from 'node:path';
import { startGradingServer, type TestRun, type TestServer } from './testing/grading-fixtures.js';
import type { GradingSocket } from './grading-sockets.js';

/** One HTTP request over a Unix socket (what the sandbox's bridge forwards). */
function viaSocket(socketPath: string, method: string, urlPath: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path: urlPath, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) as Record<string, unknown> }));
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

describe('GradingSockets: a run reached through its own socket, without a token', () => {
  let server: TestServer;
  let mine: TestRun;
  let other: TestRun;
  let socket: GradingSocket;

  beforeAll(async () => {
    server = await startGradingServer();
    mine = await server.newRun();
    other = await server.newRun();
    socket = await server.sockets.open(path.join(server.home, 'grading.sock'), mine.ctx.token);
  });
  afterAll(async () => {
    await socket.close();
    await server.close();
  });

  it('serves the run whose socket it is, on the paper paths, with nothing but the path', async () => {
    const health = await viaSocket(socket.path, 'GET', '/health');
    expect(health).toMatchObject({ status: 200, body: { run_id: mine.ctx.runId } });
    const time = await viaSocket(socket.path, 'GET', '/time');
    expect(time.status).toBe(200);
    expect(time.body.timeout_s).toBe(mine.ctx.budgetSeconds);
    const ck = await mine.checkpoint('ck', { score: 42 });
    const submitted = await viaSocket(socket.path, 'POST', '/submit', { model_path: ck });
    expect(submitted).toMatchObject({ status: 200, body: { score: 42 } });
    expect(mine.events.map((e) => e.type)).toContain('SubmissionGraded');
  });

  it('reaches no other run, whatever path the agent sends', async () => {
    const viaOtherPath = await viaSocket(socket.path, 'GET', `/g/${other.ctx.token}/time`);
    expect(viaOtherPath.status).toBeGreaterThanOrEqual(400);
    const ck = await mine.checkpoint('ck2', { score: 1 });
    const before = other.events.length;
    await viaSocket(socket.path, 'POST', `/g/${other.ctx.token}/submit`, { model_path: ck });
    expect(other.events.length).toBe(before);
  });

  it('is a socket only its owner group may use, removed when closed', async () => {
    expect(statSync(socket.path).mode & 0o777).toBe(0o660);
    const extra = await server.sockets.open(path.join(server.home, 'extra.sock'), mine.ctx.token);
    await extra.close();
    expect(() => statSync(extra.path)).toThrow();
  });
});
