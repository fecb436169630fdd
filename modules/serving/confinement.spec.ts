import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { processesWith, rejection } from '../../test/servers/processes.js';
import { gsm8k } from '../../tasks/gsm8k/index.js';
import { EvaluatorError, type ServedModel } from '../../tasks/task-pack.js';
import { sandboxPlan } from '../sandbox/capabilities.js';
import { memoryCgroupSupport } from '../sandbox/cgroup.js';
import { createEvaluationContext } from './model-server.js';
import { loadServingConfig } from './serving.config.js';
import { serverEnv } from './server-view.js';

const HOSTILE = path.resolve('modules/serving/testing/hostile-serve.mjs');
const FAKE_VLLM = path.resolve('test/servers/fake-vllm.mjs');
const GSM8K_FIXTURES = path.resolve('tasks/gsm8k/fixtures');
const TIMINGS = { stopGraceMs: 1_000, pollMs: 50 };
/** Credentials the harness holds while it grades: none may reach a server. */
const SECRETS = { A2RL_LLM_OPENAI_KEY: 'sk-a2rl-spec-openai', OPENAI_API_KEY: 'sk-a2rl-spec-plain', HF_TOKEN: 'hf_a2rlspec', VLLM_API_KEY: 'a2rl-spec-vllm' };

const confined = sandboxPlan().mode !== 'none';

describe('what a started server gets of the harness\'s environment', () => {
  it('passes the ML stack\'s tuning and the offline switches, never a credential or an a2rl variable', () => {
    const env = serverEnv({ PATH: '/usr/bin', VLLM_LOGGING_LEVEL: 'DEBUG', NCCL_DEBUG: 'INFO', LANG: 'de_DE.UTF-8', ...SECRETS, A2RL_HOME: '/h', AWS_SECRET_ACCESS_KEY: 'x', ALFWORLD_DATA: '/d' }, [], { A2RL_ENV_TOKEN: 't' });
    expect(env).toEqual({
      PATH: '/usr/bin',
      HOME: '/tmp',
      TMPDIR: '/tmp',
      LANG: 'de_DE.UTF-8',
      HF_HUB_OFFLINE: '1',
      HF_DATASETS_OFFLINE: '1',
      TRANSFORMERS_OFFLINE: '1',
      VLLM_NO_USAGE_STATS: '1',
      DO_NOT_TRACK: '1',
      VLLM_LOGGING_LEVEL: 'DEBUG',
      NCCL_DEBUG: 'INFO',
      A2RL_ENV_TOKEN: 't',
    });
    expect(serverEnv({ ALFWORLD_DATA: '/d', HF_TOKEN: 'x' }, ['ALFWORLD_DATA', 'HF_TOKEN'], {})).toMatchObject({ ALFWORLD_DATA: '/d' });
    expect(serverEnv({ HF_TOKEN: 'x' }, ['HF_TOKEN'], {}).HF_TOKEN).toBeUndefined();
  });

  it('refuses to be configured to pass a credential or to trust remote code', () => {
    expect(() => loadServingConfig({ A2RL_SERVER_ENV: 'ALFWORLD_DATA,A2RL_LLM_OPENAI_KEY' })).toThrow(/^A2RL_SERVER_ENV: A2RL_LLM_OPENAI_KEY cannot be given to servers/);
    expect(() => loadServingConfig({ A2RL_SERVER_ENV: 'HF_TOKEN' })).toThrow(/A2RL_SERVER_ENV/);
    expect(() => loadServingConfig({ A2RL_SERVE_COMMAND: 'vllm serve {model_path} --port {port} --trust-remote-code' })).toThrow(/^A2RL_SERVE_COMMAND: must not enable trust_remote_code/);
    expect(loadServingConfig({}).serveCommand).toContain('--load-format');
    expect(loadServingConfig({ A2RL_SERVER_MEMORY: 'none', A2RL_SERVER_MAX_PROCESSES: '64' }).server).toMatchObject({ memoryBytes: null, maxProcesses: 64 });
  });
});

(confined ? describe : describe.skip)('a hostile checkpoint in a confined model server (root harness, bubblewrap)', () => {
  let root: string;
  let home: string;
  const saved: Record<string, string | undefined> = {};
  const served: ServedModel[] = [];
  let tcpHits = 0;
  let unixHits = 0;
  let tcp: net.Server;
  let unix: net.Server;
  let unixPath: string;

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-confinement-'));
    home = path.join(root, 'home');
    await mkdir(path.join(home, 'tasks', 'gsm8k', 'private'), { recursive: true });
    await writeFile(path.join(home, 'ledger.db'), 'the ledger');
    await writeFile(path.join(home, 'tasks', 'gsm8k', 'private', 'test.jsonl'), '{"question": "held out"}\n');
    for (const [key, value] of Object.entries({ ...SECRETS, A2RL_HOME: home })) {
      saved[key] = process.env[key];
      process.env[key] = value;
    }
    tcp = net.createServer((s) => {
      tcpHits++;
      s.destroy();
    });
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    unixPath = path.join(root, 'host-service.sock');
    unix = net.createServer((s) => {
      unixHits++;
      s.destroy();
    });
    await new Promise<void>((resolve) => unix.listen(unixPath, resolve));
  });
  afterEach(async () => {
    await Promise.all(served.splice(0).map((s) => s.stop()));
  });
  afterAll(async () => {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
    await new Promise((resolve) => tcp.close(resolve));
    await new Promise((resolve) => unix.close(resolve));
    await rm(root, { recursive: true, force: true });
  });

  async function checkpoint(name: string, files: Record<string, string>): Promise<string> {
    const dir = path.join(root, name);
    await mkdir(dir);
    for (const [file, content] of Object.entries(files)) await writeFile(path.join(dir, file), content);
    return dir;
  }

  async function treeHash(dir: string): Promise<string> {
    const hash = createHash('sha256');
    for (const name of (await readdir(dir)).sort()) hash.update(`${name}\0${await readFile(path.join(dir, name))}\0`);
    return hash.digest('hex');
  }

  function context(command: string, env: NodeJS.ProcessEnv = {}) {
    const config = loadServingConfig({ A2RL_SERVE_COMMAND: command, A2RL_SERVE_READY_TIMEOUT: '60s', A2RL_SERVER_MAX_PROCESSES: '64', ...env });
    return createEvaluationContext(config, 'cpu', TIMINGS);
  }

  it('cannot read the harness\'s keys or files, reach loopback services, write its checkpoint, gain privilege or exceed its processes', async () => {
    const targets = {
      read: [path.join(home, 'ledger.db'), path.join(home, 'tasks', 'gsm8k', 'private', 'test.jsonl'), '/etc/shadow', path.join(root, 'host-service.sock')],
      connect: [(tcp.address() as net.AddressInfo).port, 5432, 6379],
      unix: [unixPath],
      fork: 200,
    };
    const dir = await checkpoint('hostile', { 'config.json': '{}', 'targets.json': JSON.stringify(targets) });
    const before = await treeHash(dir);
    const ctx = context(`${process.execPath} ${HOSTILE} {model_path} --port {port}`);
    const model = await ctx.serve(dir);
    served.push(model);

    const report = (await (await fetch(`${model.baseUrl}/probes`)).json()) as { uid: number; probes: { what: string; got: boolean; detail: string }[] };
    const got = report.probes.filter((p) => p.got);
    expect(got).toEqual([]);
    expect(report.probes.map((p) => p.what)).toEqual(expect.arrayContaining(['secret variables in its environment', `read ${targets.read[0]}`, 'write a new file into the checkpoint', 'start 200 processes']));
    // A fork bomb is cut off at the uid's process limit (threads count: the bridge's and its own Node).
    const forks = report.probes.find((p) => p.what === 'start 200 processes')!.detail;
    expect(Number(/^started (\d+), then EAGAIN$/.exec(forks)?.[1])).toBeLessThan(64);
    expect(report.uid).toBeGreaterThanOrEqual(160_000);
    expect([tcpHits, unixHits]).toEqual([0, 0]);
    expect(await treeHash(dir)).toBe(before);

    const [isolation] = ctx.servers;
    expect(isolation).toMatchObject({ sandbox: 'bwrap', uid: report.uid, network: 'namespace', maxProcesses: 64, memoryEnforced: memoryCgroupSupport() !== null });
    expect(isolation!.readOnly[0]).toBe(dir);
    expect(isolation!.env.filter((name) => /A2RL|KEY|TOKEN/.test(name))).toEqual([]);
    await model.stop();
    expect(processesWith(dir)).toEqual([]);
  });

  it('never lets a server swap its socket for a link to a host socket: the harness does not connect, the server never becomes ready', async () => {
    const dir = await checkpoint('swapper', { 'config.json': '{}' });
    const swap = `rm -f /run/a2rl-server/server.sock; ln -s ${unixPath} /run/a2rl-server/server.sock; exec sleep 60`;
    const ctx = createEvaluationContext(loadServingConfig({ A2RL_SERVE_COMMAND: `sh -c '${swap}' {model_path} {port}`, A2RL_SERVE_READY_TIMEOUT: '3s' }), 'cpu', { stopGraceMs: 1_000, pollMs: 500 });
    const err = await rejection(ctx.serve(dir));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/did not become ready within 3 s/);
    expect(unixHits).toBe(0);
  });

  (memoryCgroupSupport() ? it : it.skip)('is killed by the kernel past its memory limit, and the error says so', async () => {
    const dir = await checkpoint('glutton', { 'config.json': '{}' });
    const ctx = context(`${process.execPath} ${HOSTILE} {model_path} --port {port} --mode eat-memory=1024`, { A2RL_SERVER_MEMORY: '192M' });
    const err = await rejection(ctx.serve(dir));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/exited before becoming ready \(.*; \d+ process\(es\) killed for exceeding the memory limit \(A2RL_SERVER_MEMORY\)\)/);
    expect(processesWith(dir)).toEqual([]);
  });

  it('still serves an honest checkpoint, which grades as it does unconfined (gsm8k fixtures: 6 of 8)', async () => {
    const paths = { datasetDir: GSM8K_FIXTURES, dataDir: path.join(root, 'gsm8k', 'data'), modelDir: path.join(root, 'gsm8k', 'model'), privateDir: path.join(root, 'gsm8k', 'private') };
    await gsm8k.materialize(paths);
    const ctx = context(`${process.execPath} ${FAKE_VLLM} {model_path} --port {port} --served-model-name {name}`);
    const result = await gsm8k.evaluate(path.join(GSM8K_FIXTURES, 'good-model'), paths.privateDir, undefined, ctx);
    expect(result.score).toBe(75);
    expect(ctx.servers).toHaveLength(1);
    expect(ctx.servers[0]).toMatchObject({ sandbox: 'bwrap', network: 'namespace' });
    expect(processesWith(path.join(GSM8K_FIXTURES, 'good-model'))).toEqual([]);
  });
});
