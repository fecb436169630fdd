import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EnvClient } from '../../modules/serving/env-client.js';
import { processesWith, rejection } from '../../test/servers/processes.js';
import { flat, stubBackendHarness } from '../../test/servers/stub-backend-harness.js';
import { EvaluatorError } from '../task-pack.js';

// The real backend (tasks/webshop/env_backend.py) behind the bundled server, started the way the
// harness starts it, with a stub WebShop package (test/servers/stubs/web_agent_site) in place of the real one.
const MARKER = `webshop-env-backend-spec-${process.pid}`;
const { startError, withServer } = stubBackendHarness('webshop', MARKER);

/** A stub human goal: "i am looking for a <adjective> <material> <noun> in <colour>, and price lower than …". */
function goalOf(observation: string): { title: string; color: string } {
  const match = /i am looking for a ([a-z]+ [a-z]+ [a-z]+) in ([a-z]+), and price lower than/.exec(observation);
  if (!match) throw new Error(`no stub WebShop goal in: ${observation}`);
  return { title: match[1]!, color: match[2]! };
}

/** The ASIN a results page lists right before the product titled `title` (titles are capitalised there). */
function asinOf(observation: string, title: string): string {
  const match = new RegExp(`(B0STUB\\d{4}) \\[SEP\\] ${title} \\[SEP\\]`, 'i').exec(observation);
  if (!match) throw new Error(`"${title}" is not on the results page: ${observation}`);
  return match[1]!;
}

interface StubEvent {
  event: 'server' | 'env' | 'reset';
  server: number;
  server_given?: boolean;
  user_sessions?: number;
}
async function events(file: string): Promise<StubEvent[]> {
  return (await readFile(file, 'utf8')).split('\n').filter(Boolean).map((line) => JSON.parse(line) as StubEvent);
}

/** Plays one session to its purchase: search the goal's title, open the product, choose the colour, buy. */
async function buy(client: EnvClient, sessionId: string, goal: { title: string; color: string }, chooseColor = true) {
  const results = await client.step(sessionId, `search[${goal.title}]`);
  await client.step(sessionId, `click[${asinOf(results.observation, goal.title)}]`);
  if (chooseColor) await client.step(sessionId, `click[${goal.color}]`);
  return client.step(sessionId, 'click[buy now]');
}

/** a2rl's former defaults (human goals of the full catalogue, refused invalid actions): the mechanics tests below use them. */
const LEGACY = '--option human_goals=1 --option invalid_actions=refuse --option num_products=all';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-webshop-backend-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe('the WebShop backend (on a stub WebShop package)', () => {
  it('serves goals 0–99 as eval and 1500 on as train, and plays search → product → option → buy for reward 1', async () => {
    await withServer(LEGACY, async (client) => {
      // The stub's full catalogue gives 2400 human goals: eval = the first 100, train = 1500..2399.
      expect(await client.health()).toEqual({ protocol: 1, env: 'webshop', splits: { eval: 100, train: 900 } });

      const first = await client.reset('eval', 0);
      expect(first.observation).toMatch(/^WebShop \[SEP\] Instruction: \[SEP\] i am looking for a .+ dollars \[SEP\] Search$/);
      expect(first.admissibleActions).toEqual(['search[<query>]']);
      expect(first.info).toMatchObject({ session: 0, split: 'eval', goal_index: 0 });
      const again = await client.reset('eval', 0);
      expect(again.observation).toBe(first.observation);
      expect((await client.reset('eval', 1)).observation).not.toBe(first.observation);

      const goal = goalOf(first.observation);
      const id = first.sessionId;
      const results = await client.step(id, `search[${goal.title}]`);
      expect(results).toMatchObject({ reward: 0, done: false, info: { session: 0, split: 'eval', goal_index: 0 } });
      expect(results.observation).toContain(`Current Query: ${goal.title} [SEP] Results [SEP] Page 1 (1-10) of 50 total results`);
      expect(results.admissibleActions.slice(0, 2)).toEqual(['click[back to search]', 'click[next >]']);
      expect(results.admissibleActions).toHaveLength(12);
      expect(results.admissibleActions).not.toContain('search[<query>]');

      const asin = asinOf(results.observation, goal.title);
      expect(results.admissibleActions).toContain(`click[${asin.toLowerCase()}]`);
      const item = await client.step(id, `click[${asin}]`);
      expect(item.observation).toMatch(/\[SEP\] color \[SEP\] .* \[SEP\] Price: \$\d+\.99 \[SEP\] Rating: N\.A\. \[SEP\] Description \[SEP\] Features \[SEP\] Reviews \[SEP\] Buy Now$/);
      expect(item.admissibleActions).toEqual(expect.arrayContaining([`click[${goal.color}]`, 'click[buy now]', 'click[< prev]', 'click[description]']));

      expect((await client.step(id, `click[${goal.color}]`)).observation).toContain(`[SEP] ${goal.color} [SEP]`);
      const bought = await client.step(id, 'click[Buy Now]');
      expect(bought).toMatchObject({ reward: 1, done: true, admissibleActions: [] });
      expect(bought.observation).toMatch(/^Thank you for shopping with us! .*\[SEP\] Your score \(min 0\.0, max 1\.0\) \[SEP\] 1\.0$/);
      expect((await rejection(client.step(id, 'click[back to search]'))).message).toMatch(/HTTP 409\): session \S+ has finished its episode/);

      expect((await client.reset('train', 0)).info).toMatchObject({ session: 0, split: 'train', goal_index: 1500 });
      expect((await client.reset('train', 899)).info).toMatchObject({ session: 899, split: 'train', goal_index: 2399 });
      expect((await rejection(client.reset('train', 900))).message).toMatch(/HTTP 400\): index must be an integer in \[0, 900\) for split train/);
    });
  });

  it('builds the environment as the paper harness does by default: 1,000 products, synthetic goals, actions passed to WebShop unchanged, the page\'s actions and the instruction in info', async () => {
    const log = path.join(root, 'paper-defaults.log');
    await withServer(
      '',
      async (client) => {
        const first = await client.reset('eval', 0);
        expect(first.observation).toMatch(/^WebShop \[SEP\] Instruction: \[SEP\] Find me .+ \[SEP\] Search$/);
        const instruction = /Instruction: \[SEP\] (.+) \[SEP\] Search$/.exec(first.observation)![1];
        expect(first.info).toEqual({ session: 0, split: 'eval', goal_index: 0, instruction, available: { has_search_bar: true, clickables: ['search'] } });
        // WebShop ignores what the page does not offer: the same page comes back, no "Invalid action!".
        const ignored = await client.step(first.sessionId, 'click[buy now]');
        expect(ignored).toEqual({ observation: first.observation, reward: 0, done: false, admissibleActions: first.admissibleActions, info: { session: 0, split: 'eval', goal_index: 0, available: { has_search_bar: true, clickables: ['search'] } } });
      },
      { A2RL_STUB_WEBSHOP_LOG: log },
    );
    expect((await events(log)).filter((e) => e.event === 'server')).toEqual([expect.objectContaining({ num_products: 1000, human_goals: false })]);
  });

  it('answers "Invalid action!" (page unchanged) to what WebShop would not do, cleans search queries, and pays less for a purchase without the asked colour', async () => {
    await withServer(LEGACY, async (client) => {
      const first = await client.reset('eval', 5);
      const goal = goalOf(first.observation);
      const id = first.sessionId;
      const refused = (actions: string[]) => ({ observation: 'Invalid action!', reward: 0, done: false, admissibleActions: actions, info: { session: 5, split: 'eval', goal_index: 5, invalid: true } });
      for (const action of ['click[buy now]', 'click[search]', 'search[]', 'search[ [] ]', 'think[what to buy]', 'buy it', 'click[b0stub0000]']) {
        expect(await client.step(id, action)).toMatchObject(refused(['search[<query>]']));
      }
      // WebShop's parser splits at the last "[": the backend drops brackets from queries.
      const [adjective, material, noun] = goal.title.split(' ');
      const results = await client.step(id, `search[${adjective} [${material}] ${noun}]`);
      expect(results.observation).toContain(`Current Query: ${goal.title} [SEP]`);
      expect(await client.step(id, `search[${goal.title}]`)).toMatchObject(refused(results.admissibleActions)); // no search bar here

      const item = await client.step(id, ` click[ ${asinOf(results.observation, goal.title)} ] `);
      expect(item.admissibleActions).toContain('click[buy now]');
      expect(await client.step(id, 'click[purple]')).toMatchObject(refused(item.admissibleActions));
      const description = await client.step(id, 'click[Description]');
      expect(description.observation).toContain(`Description [SEP] A ${adjective} ${noun} made of ${material}.`);
      expect(description.admissibleActions).toEqual(['click[back to search]', 'click[< prev]']);
      expect((await client.step(id, 'click[< prev]')).admissibleActions).toEqual(item.admissibleActions);

      // Right product, colour not chosen: 3 of the 4 goal criteria.
      expect(await client.step(id, 'click[buy now]')).toMatchObject({ reward: 0.75, done: true });
    });
  });

  it('shares one product store between its environments, keeps two episodes of the same goal apart and reuses idle environments', async () => {
    const log = path.join(root, 'shared.log');
    await withServer(
      LEGACY,
      async (client) => {
        const a = await client.reset('eval', 7);
        const goal = goalOf(a.observation);
        const results = await client.step(a.sessionId, `search[${goal.title}]`);
        await client.step(a.sessionId, `click[${asinOf(results.observation, goal.title)}]`);
        // The same goal, started while the first episode is on the product page: its WebShop session id must differ.
        const b = await client.reset('eval', 7);
        expect(b.observation).toBe(a.observation);
        await client.step(a.sessionId, `click[${goal.color}]`);
        expect(await client.step(a.sessionId, 'click[buy now]')).toMatchObject({ reward: 1, done: true });
        expect(await buy(client, b.sessionId, goal, false)).toMatchObject({ reward: 0.75, done: true });
        for (let i = 0; i < 4; i++) await client.close((await client.reset('train', i)).sessionId);
      },
      { A2RL_STUB_WEBSHOP_LOG: log },
    );
    const logged = await events(log);
    expect(logged.filter((e) => e.event === 'server')).toEqual([expect.objectContaining({ server: 1, goals: 2400 })]);
    // The first environment built the store; the second (for the concurrent episode) was given it; later episodes reused them.
    expect(logged.filter((e) => e.event === 'env')).toEqual([
      { event: 'env', server: 1, server_given: false },
      { event: 'env', server: 1, server_given: true },
    ]);
    // Finished and closed episodes leave WebShop's per-session state: the store does not grow (2 = the environments' own start-up sessions).
    expect(logged.filter((e) => e.event === 'reset').slice(-4).map((e) => e.user_sessions)).toEqual([3, 3, 3, 3]);
  });

  it('falls back to one product store per environment when WebAgentTextEnv takes no server argument (TypeError)', async () => {
    const log = path.join(root, 'fallback.log');
    await withServer(
      LEGACY,
      async (client) => {
        const a = await client.reset('eval', 2);
        const b = await client.reset('eval', 3);
        expect(await buy(client, a.sessionId, goalOf(a.observation))).toMatchObject({ reward: 1, done: true });
        expect(await buy(client, b.sessionId, goalOf(b.observation))).toMatchObject({ reward: 1, done: true });
        const c = await client.reset('eval', 4);
        expect(await buy(client, c.sessionId, goalOf(c.observation))).toMatchObject({ reward: 1, done: true });
      },
      { A2RL_STUB_WEBSHOP_LOG: log, A2RL_STUB_WEBSHOP_NO_SERVER_ARG: '1' },
    );
    const logged = await events(log);
    expect(logged.filter((e) => e.event === 'server').map((e) => e.server)).toEqual([1, 2]);
    expect(logged.filter((e) => e.event === 'env')).toEqual([
      { event: 'env', server: 1, server_given: false },
      { event: 'env', server: 2, server_given: false },
    ]);
  });

  it('takes its goals from the options: product count, synthetic goals, train start and size', async () => {
    // WebShop's 100-product index gives fewer goals than train_start: an eval-only server (train empty), not none.
    await withServer(`${LEGACY} --option num_products=100`, async (client) => expect((await client.health()).splits).toEqual({ eval: 100, train: 0 }));
    await withServer('--option human_goals=0 --option num_products=all', async (client) => {
      expect((await client.health()).splits).toEqual({ eval: 100, train: 2100 });
      expect((await client.reset('eval', 0)).observation).toMatch(/^WebShop \[SEP\] Instruction: \[SEP\] Find me /);
    });
    await withServer(`${LEGACY} --option train_start=2000`, async (client) => expect((await client.health()).splits).toEqual({ eval: 100, train: 400 }));
    await withServer(`${LEGACY} --option train_start=2000 --option train_size=10`, async (client) => {
      expect((await client.health()).splits).toEqual({ eval: 100, train: 10 });
      expect((await client.reset('train', 9)).info).toMatchObject({ session: 9, split: 'train', goal_index: 2009 });
    });
  });

  it('fails at start-up, with the reason in the error, without WebShop or with options it cannot serve', async () => {
    const absent = await startError('', { PYTHONPATH: path.join(root, 'nothing') }, 'python3 -S');
    expect(absent).toBeInstanceOf(EvaluatorError);
    expect(absent.message).toMatch(/^the webshop environment server exited before becoming ready \(exit code 1\): env /);
    expect(flat(absent)).toMatch(/ImportError: cannot import web_agent_site \(No module named 'web_agent_site'\): clone https:\/\/github\.com\/princeton-nlp\/WebShop/);
    expect(flat(await startError('--option num_products=123'))).toMatch(/exited before becoming ready \(exit code 1\).*NotImplementedError: num_products being 123 is not supported yet\.$/);
    expect(flat(await startError(`${LEGACY} --option train_start=2300 --option train_size=200`))).toMatch(
      /exited before becoming ready \(exit code 1\).*train_start \+ train_size exceeds the 2400 WebShop goals loaded$/,
    );
    expect(processesWith(MARKER)).toEqual([]);
  });
});
