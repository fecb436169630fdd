import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { processesWith, rejection } from '../../test/servers/processes.js';
import { EvaluatorError, type EnvServer } from '../../tasks/task-pack.js';
import { EnvClient } from './env-client.js';
import { startEnvServer } from './env-server.js';
import { loadServingConfig } from './serving.config.js';
import { until } from '../../test/testing/helpers.js';

const ENV_SERVER = path.resolve('tasks/paper-common/env_server.py');
const FAKE_BACKEND = path.resolve('test/servers/fake_env_backend.py');
const MARKER = `env-server-spec-${process.pid}`;
const TIMINGS = { stopGraceMs: 1_000, pollMs: 50 };

const started: EnvServer[] = [];
afterAll(() => Promise.all(started.map((s) => s.stop())));

async function start(env: NodeJS.ProcessEnv = {}, options = ''): Promise<EnvServer> {
  const config = loadServingConfig({
    A2RL_ENV_ALFWORLD_COMMAND: `python3 ${ENV_SERVER} --backend ${FAKE_BACKEND} --port {port} --option marker=${MARKER} ${options}`,
    A2RL_ENV_READY_TIMEOUT: '20s',
    ...env,
  });
  const server = await startEnvServer(config, 'alfworld', TIMINGS);
  started.push(server);
  return server;
}

async function post(server: Pick<EnvServer, 'baseUrl'>, route: string, body: unknown, token?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${server.baseUrl}${route}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('environment servers started from their command', () => {
  it('answer only requests bearing the per-start token, speak protocol 1 and stop with their process group', async () => {
    const server = await start();
    expect(server.token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(await post(server, '/reset', { split: 'eval', index: 0 })).toEqual({ status: 401, body: { error: 'missing or wrong bearer token' } });
    expect((await post(server, '/reset', { split: 'eval', index: 0 }, 'guess')).status).toBe(401);
    const client = new EnvClient(server);
    expect(await client.health()).toEqual({ protocol: 1, env: 'fake-alfworld', splits: { train: 12, eval: 6 } });
    const first = await client.reset('train', 3);
    expect(first.info).toMatchObject({ task_type: 'pick_heat_then_place_in_recep' });
    expect(await client.step(first.sessionId, 'look')).toMatchObject({ observation: 'Nothing happens.', reward: 0, done: false });
    await client.close(first.sessionId);
    expect((await rejection(client.step(first.sessionId, 'look'))).message).toMatch(/HTTP 409\): session e1 has finished its episode/);
    expect((await rejection(client.reset('eval', 6))).message).toMatch(/HTTP 400\): index must be an integer in \[0, 6\) for split eval/);
    expect((await post(server, '/step', { session_id: 'e99', action: 'look' }, server.token!)).status).toBe(404);
    expect(processesWith(MARKER).filter((line) => !/\bbwrap\b|server-bridge\.mjs/.test(line))).toHaveLength(1); // not the sandbox's own processes
    await server.stop();
    expect(processesWith(MARKER)).toEqual([]);
  });

  it('leave no server behind when the harness is killed (SIGKILL: no exit hook runs; the watchdog kills the group)', async () => {
    // A harness stand-in: starts the server through the built module, prints READY, then waits to be killed.
    const marker = `${MARKER}-orphan`;
    const module = path.resolve('dist/modules/serving/env-server.js');
    const config = path.resolve('dist/modules/serving/serving.config.js');
    const script = `
      const { startEnvServer } = await import(${JSON.stringify(module)});
      const { loadServingConfig } = await import(${JSON.stringify(config)});
      const env = { A2RL_ENV_ALFWORLD_COMMAND: ${JSON.stringify(`python3 ${ENV_SERVER} --backend ${FAKE_BACKEND} --port {port} --option marker=${marker}`)} };
      await startEnvServer(loadServingConfig(env), 'alfworld', { stopGraceMs: 1000, pollMs: 50 });
      console.log('READY');
      setInterval(() => {}, 1000);`;
    const harness = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    // The stand-in's own command line holds the marker too: count only the server.
    const servers = () => processesWith(marker).filter((line) => line.includes('env_server.py') && !line.includes('startEnvServer') && !/\bbwrap\b|server-bridge\.mjs/.test(line));
    try {
      await new Promise<void>((resolve, reject) => {
        harness.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('READY') && resolve());
        harness.once('exit', (code) => reject(new Error(`the harness stand-in exited early (${code})`)));
      });
      expect(servers()).toHaveLength(1);
      harness.kill('SIGKILL');
      await until(() => `the env server to end: ${servers().join('; ')}`, () => servers().length === 0);
    } finally {
      harness.kill('SIGKILL');
    }
  }, 120_000); // the wait for the watchdog is capped at 60 s: a busy machine

  it('name the variable when the command cannot be started', async () => {
    const err = await rejection(start({ A2RL_ENV_ALFWORLD_COMMAND: '/nonexistent/env-server --port {port}' }));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/cannot start the alfworld environment server "\/nonexistent\/env-server" \(A2RL_ENV_ALFWORLD_COMMAND\)/);
  });
});

  it('write to blocking pipes, so that all of a long burst of output (a traceback written a byte at a time) reaches the error', async () => {
    // Flags of the server's stdout/stderr as it sees them after the bridge has been up a while; then
    // 4,000 one-byte writes to stderr, more than a socket buffer holds in small writes, and a last line.
    const script = [
      'import fcntl, os, sys, time',
      'time.sleep(0.3)',
      'print("nonblocking", [bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK) for fd in (1, 2)], flush=True)',
      'for _ in range(4000): sys.stderr.write("^"); sys.stderr.flush()',
      'sys.stderr.write("\\nlast line of the burst\\n")',
      'sys.exit(3)',
    ].join('\n');
    const err = await rejection(start({ A2RL_ENV_ALFWORLD_COMMAND: `python3 -c '${script}' {port}` }));
    expect(err.message).toMatch(/exited before becoming ready \(exit code 3\)/);
    expect(err.message).toContain('nonblocking [False, False]');
    expect(err.message).toMatch(/last line of the burst$/);
  }, 30_000);

describe('environment servers at a configured URL', () => {
  it('are probed, used with the configured token and never stopped by a2rl', async () => {
    const own = await start();
    const server = await startEnvServer(loadServingConfig({ A2RL_ENV_ALFWORLD_URL: own.baseUrl, A2RL_ENV_ALFWORLD_TOKEN: own.token! }), 'alfworld', TIMINGS);
    expect(server).toMatchObject({ baseUrl: own.baseUrl, token: own.token });
    await server.stop();
    expect((await new EnvClient(server).reset('eval', 1)).observation).toContain('Your task is to:');
  });

  it('fail with the variable named when nothing speaking the protocol answers', async () => {
    const other = http.createServer((_req, res) => res.end(JSON.stringify({ status: 'ok' })));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
      const err = await rejection(startEnvServer(loadServingConfig({ A2RL_ENV_WEBSHOP_URL: url }), 'webshop', TIMINGS));
      expect(err.message).toBe(`the webshop environment server at ${url} (A2RL_ENV_WEBSHOP_URL) does not answer GET /health with a2rl environment protocol 1`);
    } finally {
      other.closeAllConnections();
      await new Promise((resolve) => other.close(resolve));
    }
  });
});
