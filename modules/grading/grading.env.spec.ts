import { text } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FakeEnvironment, FakeTask, post, startGradingServer, type TestServer } from './testing/grading-fixtures.js';
import { until } from '../../test/testing/helpers.js';

let server: TestServer;
beforeAll(async () => {
  server = await startGradingServer();
});
afterAll(async () => {
  await server?.close();
});

const interactive = () => server.newRun({ task: new FakeTask(new FakeEnvironment()) });

async function trajectories(ref: { sha256: string }): Promise<any[]> {
  const ndjson = await text(await server.artifacts.get(ref.sha256));
  return ndjson.trim().split('\n').map((line) => JSON.parse(line));
}

describe('POST /env/reset and /env/step', () => {
  it('serves an episode through the capability URL and the bearer token alike', async () => {
    const r = await interactive();
    const reset = await post(`${r.url}/env/reset`, { seed: 7 });
    expect(reset).toEqual({ status: 200, body: { session_id: 'sess-1', observation: 'room 7', admissible_actions: ['left', 'right'], info: { seed: 7 } } });
    const step = await post(`${server.base}/env/step`, { session_id: 'sess-1', action: 'left' }, { authorization: `Bearer ${r.ctx.token}` });
    expect(step).toEqual({ status: 200, body: { observation: 'nothing happens', reward: 0, done: false, admissible_actions: ['left', 'right'], info: { success: false } } });
    const win = await post(`${r.url}/env/step`, { session_id: 'sess-1', action: 'right' });
    expect(win.body).toMatchObject({ reward: 1, done: true });
  });

  it('answers 404 for an unknown session (including another run’s) and 409 for a step after the episode ended', async () => {
    const r = await interactive();
    const other = await interactive();
    await post(`${r.url}/env/reset`, {});
    expect((await post(`${other.url}/env/step`, { session_id: 'sess-1', action: 'left' })).status).toBe(404);
    const unknown = await post(`${r.url}/env/step`, { session_id: 'sess-99', action: 'left' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatch(/unknown session_id "sess-99"/);
    await post(`${r.url}/env/step`, { session_id: 'sess-1', action: 'right' });
    const after = await post(`${r.url}/env/step`, { session_id: 'sess-1', action: 'left' });
    expect(after.status).toBe(409);
    expect(after.body.error).toMatch(/finished its episode; call \/env\/reset/);
  });

  it('answers 404 with a clear message for a task without an environment, recording nothing', async () => {
    const r = await server.newRun();
    const res = await post(`${r.url}/env/reset`, {});
    expect(res.status).toBe(404);
    expect(res.body.error).toBe('task fake-task is not interactive: it has no /env endpoints');
    expect((await post(`${r.url}/env/step`, { session_id: 'sess-1', action: 'x' })).status).toBe(404);
    expect(r.events).toEqual([]);
  });
});

describe('rollout recording', () => {
  it('records one RolloutBatchRecorded per 10 finished episodes, with every step in the trajectories blob', async () => {
    const r = await interactive();
    for (let i = 0; i < 12; i++) {
      const { body } = await post(`${r.url}/env/reset`, { seed: i });
      // Even episodes: win at once. Odd: three "left" steps, then the episode ends unsuccessfully.
      const actions = i % 2 === 0 ? ['right'] : ['left', 'left', 'left'];
      for (const action of actions) await post(`${r.url}/env/step`, { session_id: body.session_id, action });
    }
    expect(r.events.map((e) => e.type)).toEqual(['RolloutBatchRecorded']);
    const batch = r.events[0].data as any;
    expect(batch).toMatchObject({ env: 'fake-corridor', episodes: 10, steps: 5 * 1 + 5 * 3, successRate: 0.5, meanReturn: 0.5 });
    const lines = await trajectories(batch.trajectories);
    expect(lines).toHaveLength(10);
    expect(lines[0]).toMatchObject({ session_id: 'sess-1', seed: 0, done: true, success: true, return: 1, observation: 'room 0' });
    expect(lines[1].steps.map((s: any) => s.action)).toEqual(['left', 'left', 'left']);
  });

  it('flushes finished and unfinished episodes when the run is unregistered', async () => {
    const r = await interactive();
    for (let i = 0; i < 2; i++) {
      const { body } = await post(`${r.url}/env/reset`, {});
      await post(`${r.url}/env/step`, { session_id: body.session_id, action: 'right' });
    }
    const open = await post(`${r.url}/env/reset`, {});
    await post(`${r.url}/env/step`, { session_id: open.body.session_id, action: 'left' });
    expect(r.events).toEqual([]);
    await server.registry.unregister(r.ctx.runId);
    expect(r.events.map((e) => e.type)).toEqual(['RolloutBatchRecorded']);
    const batch = r.events[0].data as any;
    expect(batch).toMatchObject({ episodes: 3, steps: 3, meanReturn: 2 / 3 });
    expect(batch.successRate).toBeCloseTo(2 / 3);
    const lines = await trajectories(batch.trajectories);
    expect(lines.map((l) => [l.session_id, l.done])).toEqual([['sess-1', true], ['sess-2', true], ['sess-3', false]]);
  });
});

/** An asynchronous environment (like an environment server) that counts what it opens and closes. */
class CountingEnvironment extends FakeEnvironment {
  opens = 0;
  closes = 0;
  sessionCloses = 0;
  failOpens = 0;
  /** Steps that have reached the environment; while `held` is pending, each waits for it there. */
  stepsEntered = 0;
  held: Promise<void> | undefined;

  override open() {
    this.opens++;
    if (this.failOpens > 0) {
      this.failOpens--;
      return Promise.reject(new Error('the environment server exited before becoming ready'));
    }
    return Promise.resolve({
      createSession: async (seed: number) => {
        const inner = this.createSession(seed);
        return {
          reset: async () => inner.reset(),
          step: async (action: string) => {
            this.stepsEntered++;
            await this.held;
            return inner.step(action);
          },
          close: async () => void this.sessionCloses++,
        };
      },
      close: async () => void this.closes++,
    });
  }
}

describe('asynchronous training environments', () => {
  it('are opened once per run on first use, retried after a failed start (500), and closed with their open sessions when the run ends', async () => {
    const env = new CountingEnvironment();
    env.failOpens = 1;
    const r = await server.newRun({ task: new FakeTask(env) });
    const failed = await post(`${r.url}/env/reset`, {});
    expect(failed).toEqual({ status: 500, body: { statusCode: 500, error: 'the environment failed during start-up: the environment server exited before becoming ready' } });
    const first = await post(`${r.url}/env/reset`, {});
    await post(`${r.url}/env/step`, { session_id: first.body.session_id, action: 'right' }); // finished: its session is closed
    await post(`${r.url}/env/reset`, {}); // left open
    expect([env.opens, env.closes, env.sessionCloses]).toEqual([2, 0, 1]);
    await server.registry.unregister(r.ctx.runId);
    expect([env.opens, env.closes, env.sessionCloses]).toEqual([2, 1, 2]);
  });

  it('run one step at a time per session: a step racing the one that ends the episode gets 409, and each step is recorded once', async () => {
    const env = new CountingEnvironment();
    let release = () => {};
    env.held = new Promise((resolve) => (release = resolve));
    const r = await server.newRun({ task: new FakeTask(env) });
    const { body } = await post(`${r.url}/env/reset`, {});
    const winning = post(`${r.url}/env/step`, { session_id: body.session_id, action: 'right' });
    // The winning step is held in the environment while the late one is sent; the late one gets 409
    // whether it queued behind the winner (the usual case) or arrived once the episode had ended.
    await until('the winning step to enter the environment', () => env.stepsEntered > 0);
    const lateReply = post(`${r.url}/env/step`, { session_id: body.session_id, action: 'left' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    const [win, late] = await Promise.all([winning, lateReply]);
    expect([win.status, win.body.done, late.status]).toEqual([200, true, 409]);
    await server.registry.unregister(r.ctx.runId);
    const lines = await trajectories((r.events[0].data as any).trajectories);
    expect(lines.map((l) => l.steps.map((s: any) => s.action))).toEqual([['right']]);
  });
});
