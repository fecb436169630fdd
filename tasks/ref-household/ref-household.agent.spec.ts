// End to end: the reference agent (and the diverge test agent) against a stub grading server that
// grades with pack.evaluate and serves the environment with pack.environment, as the real API does.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidCheckpointError, type TaskPaths } from '../task-pack.js';
import { TRAIN_SEED_LIMIT, refHousehold, trainingSession } from './index.js';
import type { HouseholdGame } from './world.js';

const AGENT_DIR = fileURLToPath(new URL('../../modules/agents/reference/ref-household/', import.meta.url));
const CAPABILITY = '/g/test-token';

interface Traffic {
  submissions: Array<{ modelPath: string; score: number | null }>;
  resetSeeds: number[];
  steps: number;
  successes: number;
}

/** A minimal grading API: /submit (paths relative to the workspace), /env/reset, /env/step under a capability prefix. */
function startStubServer(paths: TaskPaths, workspace: string, traffic: Traffic): Promise<Server> {
  const sessions = new Map<string, HouseholdGame>();
  let nextSession = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      const reply = (status: number, payload: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(payload));
      };
      void (async () => {
        const input = JSON.parse(body || '{}') as Record<string, unknown>;
        switch (req.url) {
          case `${CAPABILITY}/submit`: {
            const modelPath = resolve(workspace, String(input.model_path));
            try {
              const { score } = await refHousehold.evaluate(modelPath, paths.privateDir);
              traffic.submissions.push({ modelPath, score });
              return reply(200, { score });
            } catch (e) {
              traffic.submissions.push({ modelPath, score: null });
              return reply(e instanceof InvalidCheckpointError ? 400 : 500, { error: (e as Error).message });
            }
          }
          case `${CAPABILITY}/env/reset`: {
            const seed = typeof input.seed === 'number' ? input.seed : traffic.resetSeeds.length;
            const session = trainingSession(seed);
            const id = `s${nextSession++}`;
            sessions.set(id, session);
            traffic.resetSeeds.push(seed);
            const r = session.reset();
            return reply(200, { session_id: id, observation: r.observation, admissible_actions: r.admissibleActions });
          }
          case `${CAPABILITY}/env/step`: {
            const session = sessions.get(String(input.session_id));
            if (!session) return reply(404, { error: 'unknown session' });
            const r = session.step(String(input.action));
            traffic.steps++;
            traffic.successes += r.reward;
            if (r.done) sessions.delete(String(input.session_id));
            return reply(200, { observation: r.observation, reward: r.reward, done: r.done, admissible_actions: r.admissibleActions });
          }
          default:
            return reply(404, { error: 'not found' });
        }
      })().catch((e: Error) => reply(500, { error: e.message }));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Runs an agent entry the way start.sh would (cwd = workspace, the run's environment variables). */
function runAgent(entry: string, workspace: string, paths: TaskPaths, url: string): Promise<{ code: number | null; log: string }> {
  mkdirSync(join(workspace, 'output'), { recursive: true });
  const child = spawn(process.execPath, [join(AGENT_DIR, entry)], {
    cwd: workspace,
    env: {
      ...process.env,
      TASK: 'ref-household',
      BASE_MODEL: refHousehold.baseModel,
      WORKSPACE: workspace,
      MODEL_PATH: paths.modelDir,
      DATA_PATH: paths.dataDir,
      OUTPUT_DIR: join(workspace, 'output'),
      GRADING_SERVER_URL: url,
    },
  });
  let log = '';
  child.stdout.on('data', (c: Buffer) => (log += c));
  child.stderr.on('data', (c: Buffer) => (log += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, log })));
}

describe('ref-household reference agent, end to end against a stub grading API', () => {
  let root: string;
  let paths: TaskPaths;
  let baseline: number;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'ref-household-agent-'));
    paths = { dataDir: join(root, 'data'), modelDir: join(root, 'model'), privateDir: join(root, 'private') };
    await refHousehold.materialize(paths);
    baseline = (await refHousehold.evaluate(paths.modelDir, paths.privateDir)).score;
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  async function withServer<T>(workspace: string, fn: (url: string, traffic: Traffic) => Promise<T>): Promise<T> {
    const traffic: Traffic = { submissions: [], resetSeeds: [], steps: 0, successes: 0 };
    const server = await startStubServer(paths, workspace, traffic);
    try {
      return await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}${CAPABILITY}`, traffic);
    } finally {
      server.close();
    }
  }

  it('warms up with SFT, then improves with RL rolled out through /env, submitting better checkpoints', async () => {
    const workspace = join(root, 'ws-reference');
    await withServer(workspace, async (url, traffic) => {
      const { code, log } = await runAgent('agent.mjs', workspace, paths, url);
      expect({ code, log: code === 0 ? '' : log }).toEqual({ code: 0, log: '' });

      const scores = traffic.submissions.map((s) => s.score);
      expect(scores.length).toBeGreaterThanOrEqual(3);
      expect(scores[0]!).toBeGreaterThan(baseline);
      for (let i = 1; i < scores.length; i++) expect(scores[i]!).toBeGreaterThan(scores[i - 1]!);
      for (const s of traffic.submissions) expect(s.modelPath.startsWith(join(workspace, 'output'))).toBe(true);

      // Online RL really went through the environment endpoints, on training layouts only.
      expect(traffic.resetSeeds.length).toBeGreaterThanOrEqual(200);
      expect(traffic.steps).toBeGreaterThan(traffic.resetSeeds.length);
      expect(traffic.successes).toBeGreaterThan(0);
      for (const seed of traffic.resetSeeds) expect(seed).toBeLessThan(TRAIN_SEED_LIMIT);

      // The agent wrote its training code in the workspace and revised the RL script between rounds.
      expect(readdirSync(join(workspace, 'code')).sort()).toEqual(['args.mjs', 'policy.mjs', 'train_rl.mjs', 'train_sft.mjs']);
      expect(readFileSync(join(workspace, 'code', 'train_rl.mjs'), 'utf8')).toMatch(/^const CONFIG = .*"temperature":0\.7.*;$/m);
    });
  }, 300_000); // a real SFT + RL run (about 50 s with both cores busy); its time is `npm run bench -- timings`

  it('diverge: its training makes the policy worse than the base, and it submits once', async () => {
    const workspace = join(root, 'ws-diverge');
    await withServer(workspace, async (url, traffic) => {
      const { code, log } = await runAgent('diverge.mjs', workspace, paths, url);
      expect({ code, log: code === 0 ? '' : log }).toEqual({ code: 0, log: '' });
      expect(traffic.submissions).toHaveLength(1);
      expect(traffic.submissions[0]!.score!).toBeLessThan(baseline);
      expect(traffic.resetSeeds).toHaveLength(0);
    });
  }, 120_000);
});
