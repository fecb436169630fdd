import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createEvaluationContext } from '../../modules/serving/model-server.js';
import { loadServingConfig } from '../../modules/serving/serving.config.js';
import type { ScriptedAnswers } from '../../test/servers/openai-test-server.js';
import { DatasetMissingError } from '../paper-common/dataset.js';
import { EvaluatorError, InvalidCheckpointError, type EvaluationContext, type EvaluationResult } from '../task-pack.js';
import { formatAvailable, MAX_STEPS, parseReply, PROTOCOL, userMessage, webshop, webshopPolicy } from './index.js';
import { processesWith, rejection } from '../../test/servers/processes.js';

const FAKE_VLLM = path.resolve('test/servers/fake-vllm.mjs');
const ENV_SERVER = path.resolve('tasks/paper-common/env_server.py');
const FAKE_BACKEND = path.resolve('test/servers/fake_env_backend.py');
const EVAL = 6;
const sessions = [...Array(EVAL).keys()];

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-webshop-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A servable fake checkpoint: config.json plus the fake server's scripted answers. Its unique path is a `ps` marker. */
async function checkpoint(answers: ScriptedAnswers | null, withConfig = true): Promise<string> {
  const dir = await mkdtemp(path.join(root, 'ckpt-'));
  if (withConfig) await writeFile(path.join(dir, 'config.json'), '{}');
  if (answers) await writeFile(path.join(dir, 'answers.json'), JSON.stringify(answers));
  return dir;
}

/**
 * The harness's evaluation context with fake-vllm as the model server and the scripted WebShop-like
 * backend as the environment server; `marker` (an option the backend ignores) finds its process in `ps`.
 */
function context(envOptions = '', extra: NodeJS.ProcessEnv = {}) {
  const marker = `ws-${randomUUID()}`;
  const config = loadServingConfig({
    A2RL_SERVE_COMMAND: `'${process.execPath}' '${FAKE_VLLM}' {model_path} --port {port} --served-model-name {name}`,
    A2RL_SERVE_READY_TIMEOUT: '20s',
    A2RL_ENV_READY_TIMEOUT: '20s',
    A2RL_ENV_WEBSHOP_COMMAND: `python3 '${ENV_SERVER}' --backend '${FAKE_BACKEND}' --port {port} --option kind=webshop --option eval=${EVAL} --option marker=${marker} ${envOptions}`,
    ...extra,
  });
  return { ctx: createEvaluationContext(config, 'cpu', { stopGraceMs: 1_000, pollMs: 50 }), marker };
}

// Pages of the fake backend (test/servers/fake_env_backend.py, kind=webshop): session i asks for FAKE<i>;
// its results page lists fake<i>, fake<i+1>, fake<i+2> in that order (for i < 8). Every request is a fresh
// [system, user] chat whose user message ends with `Observation <n>: <page>\nAction <n>:`.
const FIRST_PAGE = (i: number) => `FAKE${i}, price lower than 50.00 dollars [SEP] Search\nAction 1:`;
const RESULTS_PAGE = (i: number) => `Product FAKE${i + 2} [SEP] $10.00\nAction 2:`;
const ITEM_PAGE = 'Price: $10.00 [SEP] Buy Now\nAction 3:';

/** Searches, opens product `pick(i)` and buys it; the buy reply has a second line, which the stop sequence "\n" cuts. */
function shopper(pick: (i: number) => number, choose = 'Action: click'): ScriptedAnswers {
  return {
    rules: [
      { contains: ITEM_PAGE, reply: 'click[buy now]\nThis is it.', tail: true },
      ...sessions.map((i) => ({ contains: RESULTS_PAGE(i), reply: `${choose}[fake${pick(i)}]`, tail: true })),
      ...sessions.map((i) => ({ contains: FIRST_PAGE(i), reply: `search[fake${i}]`, tail: true })),
    ],
    default: 'I am lost',
  };
}

async function evaluateWith(answers: ScriptedAnswers, envOptions = ''): Promise<{ result: EvaluationResult; marker: string; dir: string }> {
  const dir = await checkpoint(answers);
  const { ctx, marker } = context(envOptions);
  const result = await webshop.evaluate(dir, path.join(root, 'unused-private'), undefined, ctx);
  return { result, marker, dir };
}

describe('webshop replies and prompts (the paper harness\'s protocol)', () => {
  it.each([
    ['search[red shoes]', 'search[red shoes]'],
    ['  Action: click[B09ABC] ', 'click[B09ABC]'],
    ['choose[large]', 'click[large]'],
    ['Action:choose[large]', 'click[large]'],
    ['I should look. click[x]', 'I should look. click[x]'],
    ['', ''],
  ])('%j → action %j', (reply, expected) => {
    expect(parseReply(reply)).toBe(expected);
  });

  it('lists the page\'s actions as the harness does: search[<your query>] when there is a search bar, then click[...] for every clickable', () => {
    expect(formatAvailable({ has_search_bar: true, clickables: ['search'] })).toBe('  search[<your query>]\n  click[search]');
    expect(formatAvailable({ has_search_bar: false, clickables: ['back to search', 'b0abc', 'buy now'] })).toBe('  click[back to search]\n  click[b0abc]\n  click[buy now]');
  });

  it('rebuilds one [system, user] chat per step with the last 5 steps and the current page (snapshot), greedy, 100 tokens, stop "\\n"', () => {
    const policy = webshopPolicy();
    expect(policy.request).toEqual({ api: 'chat', maxTokens: 100, stop: ['\n'], temperature: 0 });
    const transcript = policy.start({
      observation: 'WebShop [SEP] Instruction: [SEP] i need socks [SEP] Search', admissibleActions: ['search[<query>]'],
      info: { instruction: 'i need socks', available: { has_search_bar: true, clickables: ['search'] } },
    });
    const first = transcript.input() as { messages: { role: string; content: string }[] };
    expect(first.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(first.messages[0]!.content).toBe(PROTOCOL.prompt.system);
    expect(first.messages[1]!.content.endsWith('\nObservation 1: WebShop [SEP] Instruction: [SEP] i need socks [SEP] Search\nAction 1:')).toBe(true);
    for (let k = 1; k <= 7; k++) {
      transcript.record(`a${k}`, `click[a${k}]`, { observation: `page ${k}`, reward: 0, done: false, admissibleActions: [], info: { available: { has_search_bar: false, clickables: [`next${k}`] } } });
    }
    const later = (transcript.input() as { messages: readonly { content: string }[] }).messages[1]!.content;
    expect(later).toContain('\nObservation 3: page 3\nAction 3: click[a3]\n');
    expect(later).not.toContain('Observation 2:');
    expect(later.endsWith('\nObservation 8: page 7\nAction 8:')).toBe(true);
    expect(later).toMatchSnapshot();
    expect(userMessage('i need socks', [], 'the page', { has_search_bar: true, clickables: [] })).toMatchSnapshot();
  });

  it('shows the agent the exact evaluation prompt in the description and data/README.md', async () => {
    const system = String(PROTOCOL.prompt.system);
    expect(webshop.description).toContain(`    ${system}`);
    expect(webshop.description).toContain('    Now it\'s your turn:');
    const datasetDir = path.join(root, 'dataset');
    await mkdir(path.join(datasetDir, 'base-model'), { recursive: true });
    await writeFile(path.join(datasetDir, 'base-model', 'config.json'), '{"model_type":"test"}');
    const paths = { datasetDir, dataDir: path.join(root, 'm', 'data'), modelDir: path.join(root, 'm', 'model'), privateDir: path.join(root, 'm', 'private') };
    await webshop.materialize(paths);
    expect(await readdir(paths.dataDir)).toEqual(['README.md']);
    const readme = await readFile(path.join(paths.dataDir, 'README.md'), 'utf8');
    expect(readme).toContain(`    ${system}`);
    expect(readme).toMatch(/POST \$GRADING_SERVER_URL\/env\/reset/);
    expect(readme).toMatch(/never served/);
    expect(await readFile(path.join(paths.modelDir, 'config.json'), 'utf8')).toBe('{"model_type":"test"}');
    const elsewhere = { dataDir: path.join(root, 'n', 'data'), modelDir: path.join(root, 'n', 'model'), privateDir: path.join(root, 'n', 'private') };
    await expect(webshop.materialize({ ...elsewhere, datasetDir: path.join(root, 'nowhere') })).rejects.toBeInstanceOf(DatasetMissingError);
  });

  it('declares level 3, its requirements and a 50-step environment', () => {
    expect(webshop.level).toBe(3);
    expect(webshop.evaluatorVersion).toBe('webshop-eval-2');
    expect(webshop.protocol).toBe(PROTOCOL);
    expect(webshop.requirements!.map((r) => r.kind)).toEqual(['gpu', 'command', 'dataset', 'env-server']);
    expect(webshop.requirements![3]).toMatchObject({ name: 'webshop', pythonModule: 'web_agent_site' });
    expect(webshop.environment).toMatchObject({ name: 'webshop/v1', maxSteps: 50 });
    expect(MAX_STEPS).toBe(50);
  });
});

describe('evaluating webshop checkpoints on the scripted environment server', () => {
  it('scores a checkpoint that buys every requested product 100 and stops both servers', async () => {
    const { result, marker, dir } = await evaluateWith(shopper((i) => i));
    expect(result.score).toBe(100);
    expect(result.details).toEqual({
      episodes: EVAL, successes: EVAL, successRate: 1, meanReward: 1, meanSteps: 3,
      outcomes: { bought: EVAL, ran_out_of_steps: 0 }, environment: 'fake-webshop', evalSessions: EVAL, fullEvalSet: false,
    });
    expect(processesWith(marker)).toEqual([]);
    expect(processesWith(dir)).toEqual([]);
  });

  it('scores 0 with mean reward 0.25 a checkpoint that buys the wrong product (success needs ≥ 0.5), reading choose[ as click[', async () => {
    const { result } = await evaluateWith(shopper((i) => i + 1, 'choose'));
    expect(result.score).toBe(0);
    expect(result.details).toMatchObject({ successes: 0, successRate: 0, meanReward: 0.25, meanSteps: 3, outcomes: { bought: EVAL, ran_out_of_steps: 0 } });
  });

  it('sends every reply to the environment and runs a checkpoint without a valid action out of its 50 replies', async () => {
    const { result } = await evaluateWith({ rules: [], default: 'I am lost\nreally' });
    expect(result.score).toBe(0);
    expect(result.details).toMatchObject({ successes: 0, meanReward: 0, meanSteps: 50, outcomes: { bought: 0, ran_out_of_steps: EVAL } });
  }, 60_000); // 300 model replies: slack for a loaded machine

  it('fails with EvaluatorError when the environment server crashes mid-evaluation, leaving no process', async () => {
    const dir = await checkpoint(shopper((i) => i));
    const { ctx, marker } = context('--option crash_after=3');
    const err = await rejection(webshop.evaluate(dir, root, undefined, ctx));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/HTTP 500.*fake backend crashed/);
    expect(processesWith(marker)).toEqual([]);
    expect(processesWith(dir)).toEqual([]);
  });

  it('blames a checkpoint without config.json on the agent before starting anything', async () => {
    const started: string[] = [];
    const ctx: EvaluationContext = {
      device: 'cpu',
      judge: null,
      envServer: async (name) => { started.push(`env:${name}`); throw new Error('must not start'); },
      serve: async (dir) => { started.push(`model:${dir}`); throw new Error('must not start'); },
    };
    const dir = await checkpoint(shopper((i) => i), false);
    await expect(webshop.evaluate(dir, root, undefined, ctx)).rejects.toBeInstanceOf(InvalidCheckpointError);
    await expect(webshop.evaluate(path.join(root, 'missing'), root, undefined, ctx)).rejects.toBeInstanceOf(InvalidCheckpointError);
    expect(started).toEqual([]);
  });

  it('reports the bundled backend failing to import WebShop as an EvaluatorError with the ImportError', async () => {
    // No A2RL_ENV_WEBSHOP_COMMAND: the default command, tasks/webshop/env_backend.py without WebShop installed.
    const config = loadServingConfig({
      A2RL_SERVE_COMMAND: `'${process.execPath}' '${FAKE_VLLM}' {model_path} --port {port} --served-model-name {name}`,
      A2RL_ENV_READY_TIMEOUT: '20s',
    });
    expect(config.envServers.webshop).toMatchObject({ kind: 'command' });
    const dir = await checkpoint(shopper((i) => i));
    const err = await rejection(webshop.evaluate(dir, root, undefined, createEvaluationContext(config, 'cpu', { stopGraceMs: 1_000, pollMs: 50 })));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/the webshop environment server exited before becoming ready \(exit code 1\)/);
    expect(err.message).toMatch(/tasks\/webshop\/env_backend\.py/);
    expect(err.message).toMatch(/ImportError: cannot import web_agent_site/);
    expect(err.message).toMatch(/princeton-nlp\/WebShop/);
    expect(processesWith(dir)).toEqual([]);
  });
});

describe('the webshop training environment', () => {
  it('serves train sessions by seed and ends an episode as done at 50 steps', async () => {
    const { ctx, marker } = context('--option train=12');
    const env = await webshop.environment!.open(ctx);
    try {
      // seed 14 → train session 14 mod 12 = 2
      const session = await env.createSession(14);
      const first = await session.reset();
      expect(first.observation).toMatch(/the product FAKE2,/);
      expect(first.info).toEqual({ session: 2 });
      for (let step = 1; step < 50; step++) {
        const result = await session.step('click[nothing]');
        expect(result).toMatchObject({ observation: 'Invalid action!', done: false, reward: 0 });
      }
      const last = await session.step('click[nothing]');
      expect(last).toMatchObject({ done: true, reward: 0, admissibleActions: [], info: { truncated: true } });

      const winner = await env.createSession(3);
      await winner.reset();
      await winner.step('search[fake3]');
      await winner.step('click[fake3]');
      expect(await winner.step('click[buy now]')).toMatchObject({ done: true, reward: 1 });
      expect(() => env.createSession(-1)).toThrow(RangeError);
    } finally {
      await env.close?.();
    }
    expect(processesWith(marker)).toEqual([]);
  }, 60_000);
});
