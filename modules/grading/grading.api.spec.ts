import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FakeTask, get, OPERATOR, post, rawRequest, startGradingServer, type TestServer } from './testing/grading-fixtures.js';
import { eventId } from '../ledger/events/ids.js';

let server: TestServer;
beforeAll(async () => {
  // Four GPUs, as if CUDA_VISIBLE_DEVICES=0,1,2,3: a submission without `gpu` is graded on "0".
  server = await startGradingServer({ evaluatorTimeoutMs: 1500, availableGpus: ['0', '1', '2', '3'] });
});
afterAll(async () => {
  await server?.close();
});

const types = (events: { type: string }[]) => events.map((e) => e.type);

/** The paper's entry fields of a submit answer (what `best` holds). */
const entryOf = (body: any) => {
  const { best: _best, best_score: _score, total_submissions: _total, ...entry } = body;
  return entry;
};

describe('POST /submit', () => {
  it('grades a checkpoint through the capability URL with no header and archives every file by content', async () => {
    let submitted = 0;
    const r = await server.newRun({ baselineScore: 20, onSubmitted: () => submitted++ });
    const modelPath = await r.checkpoint('ck1', { score: 55 }, { 'manifest.json': '{"format":"fake/1"}', 'sub/extra.bin': 'xyz' });
    const before = Date.now();
    const res = await post(`${r.url}/submit`, { model_path: modelPath });
    expect(res.status).toBe(200);
    const { timestamp, elapsed_seconds } = res.body;
    const entry = { submission_id: 'sub-1', timestamp, model_path: modelPath, score: 55, baseline_score: 20, improvement: 35, elapsed_seconds };
    expect(res.body).toEqual({ ...entry, best: entry, best_score: 55, total_submissions: 1 });
    expect(new Date(timestamp).toISOString()).toBe(timestamp);
    expect(Date.parse(timestamp) >= before - 1000 && Date.parse(timestamp) <= Date.now()).toBe(true);
    expect(typeof elapsed_seconds === 'number' && elapsed_seconds >= 0).toBe(true);
    expect(types(r.events)).toEqual(['SubmissionReceived', 'SubmissionGraded']);
    const received = r.events[0].data as any;
    expect(received.submissionId).toBe('sub-1');
    expect(received.modelPath).toBe('output/ck1');
    expect(received.manifest.map((m: any) => m.path)).toEqual(['manifest.json', 'sub/extra.bin', 'weights.json']);
    for (const entry of received.manifest) expect(await server.artifacts.exists(entry.sha256)).toBe(true);
    expect(await server.artifacts.exists(received.checkpoint.sha256)).toBe(true);
    expect(r.events[1].data).toEqual({ submissionId: 'sub-1', score: 55, details: { graded: 'fake' }, causedBy: { event: eventId(r.ctx.runId, 0), seq: 0, submissionId: 'sub-1' } });
    expect(submitted).toBe(1);
  });

  it('accepts the run token as a bearer on the plain path, and an absolute path inside the workspace', async () => {
    const r = await server.newRun();
    await r.checkpoint('ck', { score: 30 });
    const res = await post(`${server.base}/submit`, { model_path: path.join(r.ws.outputDir, 'ck'), gpu: 0 }, { authorization: `Bearer ${r.ctx.token}` });
    expect(res.status).toBe(200);
    expect(res.body.score).toBe(30);
    expect(types(r.events)).toEqual(['SubmissionReceived', 'SubmissionGraded']);
  });

  it('returns the earlier grade for identical content without re-running the evaluator, recorded as its own submission', async () => {
    const r = await server.newRun({ baselineScore: 10 });
    await r.checkpoint('a', { score: 40 });
    await r.checkpoint('b', { score: 40 }); // same bytes, other directory
    const first = await post(`${r.url}/submit`, { model_path: 'output/a' });
    const second = await post(`${r.url}/submit`, { model_path: 'output/b' });
    expect(first.body.score).toBe(40);
    expect(second.body).toMatchObject({ submission_id: 'sub-2', model_path: 'output/b', score: 40, baseline_score: 10, improvement: 30, best_score: 40, total_submissions: 2 });
    // A tie: the best entry is the earlier one.
    expect(second.body.best).toEqual(entryOf(first.body));
    expect(r.task.calls).toBe(1);
    expect(types(r.events)).toEqual(['SubmissionReceived', 'SubmissionGraded', 'SubmissionReceived', 'SubmissionGraded']);
    expect((r.events[2].data as any).checkpoint.sha256).toBe((r.events[0].data as any).checkpoint.sha256);
    expect(r.events[3].data).toEqual({ submissionId: 'sub-2', score: 40, details: { duplicateOf: 'sub-1' }, causedBy: { event: eventId(r.ctx.runId, 2), seq: 2, submissionId: 'sub-2' } });
  });

  it('grades identical content submitted concurrently once, the original recorded before its duplicate', async () => {
    const r = await server.newRun();
    await r.checkpoint('p', { score: 60, delayMs: 150 });
    await r.checkpoint('q', { score: 60, delayMs: 150 });
    const [p, q] = await Promise.all([post(`${r.url}/submit`, { model_path: 'output/p' }), post(`${r.url}/submit`, { model_path: 'output/q' })]);
    expect([p.body.score, q.body.score]).toEqual([60, 60]);
    expect(r.task.calls).toBe(1);
    const graded = r.events.filter((e) => e.type === 'SubmissionGraded').map((e) => e.data as any);
    expect(graded.map((g) => g.details)).toEqual([{ graded: 'fake' }, { duplicateOf: graded[0].submissionId }]);
  });

  it('answers an unloadable checkpoint with an error field (HTTP 200) and records invalid_checkpoint', async () => {
    const r = await server.newRun();
    await r.checkpoint('garbage', 'this is not json');
    const res = await post(`${r.url}/submit`, { model_path: 'output/garbage' });
    expect(res.status).toBe(200);
    // The paper's numeric score on failure; a2rl's information stays: no improvement, no best score, the reason.
    expect(res.body).toMatchObject({ submission_id: 'sub-1', model_path: 'output/garbage', score: 0, improvement: null, best_score: null, total_submissions: 1, reason: 'invalid_checkpoint' });
    expect(res.body.error).toMatch(/invalid checkpoint: weights.json is missing or not JSON/);
    expect(res.body.best).toEqual(entryOf(res.body));
    expect(types(r.events)).toEqual(['SubmissionReceived', 'SubmissionRejected']);
    expect(r.events[1].data).toMatchObject({ submissionId: 'sub-1', reasonClass: 'invalid_checkpoint', causedBy: { event: eventId(r.ctx.runId, 0), seq: 0, submissionId: 'sub-1' } });
  });

  it('reports an evaluator crash as evaluator_error, not blamed on the agent, and grades the same content again later', async () => {
    const r = await server.newRun();
    await r.checkpoint('crash', { fail: 'evaluator' });
    const res = await post(`${r.url}/submit`, { model_path: 'output/crash' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ score: 0, reason: 'evaluator_error' });
    expect(res.body.error).toMatch(/evaluator error \(not caused by your checkpoint\): the fake evaluator crashed/);
    expect(r.events[1].data).toMatchObject({ reasonClass: 'evaluator_error' });
    await post(`${r.url}/submit`, { model_path: 'output/crash' });
    expect(r.task.calls).toBe(2);
  });

  it('aborts an evaluator that exceeds the timeout and records evaluator_error', async () => {
    const r = await server.newRun();
    await r.checkpoint('hang', { hang: true, score: 50 });
    const res = await post(`${r.url}/submit`, { model_path: 'output/hang' });
    expect(res.status).toBe(200);
    expect(res.body.error).toMatch(/did not finish within 2 s/);
    expect(r.events[1].data).toMatchObject({ reasonClass: 'evaluator_error' });
  });

  it('never runs two gradings at once on one device, but does on two devices', async () => {
    const pair = async (a: unknown, b: unknown) => {
      const task = new FakeTask();
      const r = await server.newRun({ task });
      await r.checkpoint('x', { score: 11, delayMs: 200 });
      await r.checkpoint('y', { score: 12, delayMs: 200 });
      const both = await Promise.all([post(`${r.url}/submit`, { model_path: 'output/x', gpu: a }), post(`${r.url}/submit`, { model_path: 'output/y', gpu: b })]);
      expect(both.map((res) => res.status)).toEqual([200, 200]);
      return task.maxActive;
    };
    expect(await pair(undefined, '0')).toBe(1); // no gpu: the first available GPU, as the paper's server
    expect(await pair('cpu', 'cpu')).toBe(1);
    expect(await pair('0,1', 1)).toBe(1); // overlapping lists share GPU 1
    expect(await pair(0, 1)).toBe(2);
    expect(await pair('0,1', '2,3')).toBe(2);
  });

  it('unregister waits for a grading in progress, so its events are recorded before the run ends', async () => {
    const r = await server.newRun();
    await r.checkpoint('slow', { score: 70, delayMs: 300 });
    const pending = post(`${r.url}/submit`, { model_path: 'output/slow' });
    while (r.events.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await server.registry.unregister(r.ctx.runId);
    expect(types(r.events)).toEqual(['SubmissionReceived', 'SubmissionGraded']);
    expect((await pending).body.score).toBe(70);
  });

  it('refuses submissions after the deadline with 409 and records budget_exhausted', async () => {
    const r = await server.newRun({ deadline: new Date(Date.now() - 1000) });
    await r.checkpoint('late', { score: 90 });
    const res = await post(`${r.url}/submit`, { model_path: 'output/late' });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ submission_id: 'sub-1', reason: 'budget_exhausted' });
    expect(res.body.error).toMatch(/budget is exhausted/);
    expect(r.events).toEqual([{ type: 'SubmissionRejected', data: expect.objectContaining({ submissionId: 'sub-1', reasonClass: 'budget_exhausted' }) }]);
    expect(r.task.calls).toBe(0);
  });

  it('refuses a checkpoint with more than 2000 files with 422 and records invalid_checkpoint', async () => {
    const r = await server.newRun();
    const dir = path.join(r.ws.outputDir, 'huge');
    await mkdir(dir, { recursive: true });
    await Promise.all(Array.from({ length: 2001 }, (_, i) => writeFile(path.join(dir, `f${i}`), '')));
    const res = await post(`${r.url}/submit`, { model_path: 'output/huge' });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatch(/more than 2000 files/);
    expect(types(r.events)).toEqual(['SubmissionRejected']);
    expect(r.events[0].data).toMatchObject({ reasonClass: 'invalid_checkpoint' });
  });
});

describe("POST /submit answers with the paper's entry, best and total", () => {
  it('keeps `best` the full entry of the highest graded score while failures and lower scores come in', async () => {
    let submitted = 0;
    const r = await server.newRun({ baselineScore: 20, onSubmitted: () => submitted++ });
    await r.checkpoint('v1', { score: 30 });
    await r.checkpoint('v2', { score: 50 });
    await r.checkpoint('v3', { fail: 'evaluator' });
    await r.checkpoint('v4', { score: 40 });
    const answers = [];
    for (const v of ['v1', 'v2', 'v3', 'v4']) answers.push((await post(`${r.url}/submit`, { model_path: `output/${v}` })).body);
    expect(answers.map((a) => [a.submission_id, a.score, a.best.submission_id, a.best_score, a.total_submissions])).toEqual([
      ['sub-1', 30, 'sub-1', 30, 1],
      ['sub-2', 50, 'sub-2', 50, 2],
      ['sub-3', 0, 'sub-2', 50, 3],
      ['sub-4', 40, 'sub-2', 50, 4],
    ]);
    expect(answers[3].best).toEqual(entryOf(answers[1]));
    expect([answers[2].improvement, typeof answers[2].error, answers[1].error]).toEqual([null, 'string', undefined]);
    expect(submitted).toBe(4); // run_meta's last_submit_time follows failed gradings too (as the paper's server)
    expect(r.run.answered.map((e) => e.submission_id)).toEqual(['sub-1', 'sub-2', 'sub-3', 'sub-4']);
  });

  it('echoes model_path as the agent gave it, never the resolved or staged host path', async () => {
    const r = await server.newRun();
    await r.checkpoint('real', { score: 33 });
    await symlink('real', path.join(r.ws.outputDir, 'alias'));
    const viaLink = await post(`${r.url}/submit`, { model_path: 'output/alias' });
    expect([viaLink.status, viaLink.body.model_path, viaLink.body.best.model_path]).toEqual([200, 'output/alias', 'output/alias']);
    await r.checkpoint('abs', { score: 34 });
    const absolute = path.join(r.ws.outputDir, 'abs');
    expect((await post(`${r.url}/submit`, { model_path: absolute })).body.model_path).toBe(absolute);
    await r.checkpoint('boom', { fail: 'evaluator' });
    const failed = await post(`${r.url}/submit`, { model_path: './output/boom' });
    expect(failed.body.model_path).toBe('./output/boom');
    const text = JSON.stringify(failed.body);
    expect([text.includes(path.join(server.home, 'staging')), text.includes(r.ctx.privateDir), text.includes(path.join(r.ws.outputDir, 'real'))]).toEqual([false, false, false]);
  });

  it('counts the wait for the device in elapsed_seconds', async () => {
    const r = await server.newRun();
    await r.checkpoint('p', { score: 10, delayMs: 300 });
    await r.checkpoint('q', { score: 11, delayMs: 300 });
    const [p, q] = await Promise.all([post(`${r.url}/submit`, { model_path: 'output/p', gpu: '2' }), post(`${r.url}/submit`, { model_path: 'output/q', gpu: '2' })]);
    // The one graded second waited for the other's 300 ms grading before its own 300 ms.
    expect(Math.max(p.body.elapsed_seconds, q.body.elapsed_seconds) >= 0.59).toBe(true);
  });
});

describe('POST /submit: gpu as the paper has it', () => {
  it('grades on a list such as "2,3", a single id, "cuda:1" or "cpu", and on the first GPU without gpu', async () => {
    const task = new FakeTask();
    const r = await server.newRun({ task });
    await r.checkpoint('ck', { score: 50 });
    const asked: unknown[] = ['2,3', ' 3, 2 ', 1, '3', 'cuda:1', 'cpu', undefined];
    for (const gpu of asked) {
      await r.checkpoint(`ck-${String(gpu).trim()}`, { score: 50, salt: String(gpu) }); // new content: graded, not a duplicate
      const res = await post(`${r.url}/submit`, { model_path: `output/ck-${String(gpu).trim()}`, gpu });
      expect([res.status, gpu]).toEqual([200, gpu]);
    }
    expect(task.devices).toEqual(['2,3', '2,3', '1', '3', '1', 'cpu', '0']);
  });

  it.each([4, '2,9', '', ' , ', 'cpu,0', 'GPU-1234'])('refuses gpu %p with 400 {error, available_gpus}, no id and no event', async (gpu) => {
    const r = await server.newRun();
    await r.checkpoint('ck', { score: 50 });
    const res = await post(`${r.url}/submit`, { model_path: 'output/ck', gpu });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ statusCode: 400, available_gpus: ['0', '1', '2', '3'], error: expect.any(String) });
    expect(res.body.submission_id).toBeUndefined();
    expect([r.events.length, r.task.calls, r.run.totalSubmissions]).toEqual([0, 0, 0]);
    expect((await post(`${r.url}/submit`, { model_path: 'output/ck' })).body.submission_id).toBe('sub-1');
  });

  it('a run holding some GPUs (a campaign worker gave it "2") is graded on those only', async () => {
    const r = await server.newRun({ gpus: ['2'] });
    await r.checkpoint('ck', { score: 50 });
    expect((await get(`${r.url}/health`)).body.available_gpus).toEqual(['2']);
    const refused = await post(`${r.url}/submit`, { model_path: 'output/ck', gpu: 0 });
    expect([refused.status, refused.body.available_gpus]).toEqual([400, ['2']]);
    expect((await post(`${r.url}/submit`, { model_path: 'output/ck' })).status).toBe(200);
  });
});

describe('an agent written for the paper harness', () => {
  /** Reads the answers the way the paper's agents and their scripts do (Python dict access, transcribed). */
  async function paperAgent(url: string) {
    const health = (await get(`${url}/health`)).body;
    const gpus: string[] = health.available_gpus;
    const gpu = gpus.slice(-2).join(','); // "2,3": the last two GPUs for evaluation
    const timeLeft = (await get(`${url}/time`)).body;
    const good = (await post(`${url}/submit`, { model_path: 'output/v1', gpu })).body;
    const bad = (await post(`${url}/submit`, { model_path: 'output/v2', gpu })).body;
    return {
      task: health.task,
      gpu,
      remaining: timeLeft.remaining,
      within: timeLeft.remaining <= timeLeft.timeout_s && timeLeft.remaining > 0,
      score: good.score,
      bestScore: bad.best.score,
      bestPath: bad.best.model_path,
      failedScore: bad.score,
      failedError: 'error' in bad,
      improvementOk: typeof good.improvement === 'number',
      total: bad.total_submissions,
      summary: `Score ${bad.score.toFixed(2)} | Best ${bad.best.score.toFixed(2)}`,
    };
  }

  it('reads best.score, /time remaining, passes gpu "2,3" and gets a numeric score on failure', async () => {
    const task = new FakeTask();
    const r = await server.newRun({ task, budgetSeconds: 600, baselineScore: 10 });
    await r.checkpoint('v1', { score: 62.5 });
    await r.checkpoint('v2', 'corrupt');
    const seen = await paperAgent(r.url);
    expect(seen).toEqual({
      task: 'fake-task',
      gpu: '2,3',
      remaining: expect.any(Number),
      within: true,
      score: 62.5,
      bestScore: 62.5,
      bestPath: 'output/v1',
      failedScore: 0,
      failedError: true,
      improvementOk: true,
      total: 2,
      summary: 'Score 0.00 | Best 62.50',
    });
    expect(task.devices).toEqual(['2,3', '2,3']);
  });
});

describe('POST /submit refuses paths the agent may not submit, and records each refusal', () => {
  const cases: Array<{ name: string; status: number; error: RegExp; setup(r: Awaited<ReturnType<TestServer['newRun']>>): Promise<string> }> = [
    { name: 'an absolute path outside the workspace', status: 403, error: /outside the workspace/, setup: async (r) => r.ctx.privateDir },
    { name: 'a path with a ".." segment', status: 400, error: /'\.\.' segments/, setup: async () => 'output/../output/ck' },
    { name: 'a path with a NUL byte', status: 400, error: /NUL byte/, setup: async () => 'output/ck\u0000' },
    {
      name: 'a symlink leading out of the workspace',
      status: 403,
      error: /"output\/sneaky" leads \(through a symlink\) outside the workspace$/,
      setup: async (r) => {
        await symlink(r.ctx.privateDir, path.join(r.ws.outputDir, 'sneaky'));
        return 'output/sneaky';
      },
    },
    {
      // Same answer whether the target exists or not: the grading API is no oracle for host paths.
      name: 'a symlink to a host path that does not exist',
      status: 403,
      error: /"output\/probe\/x" leads \(through a symlink\) outside the workspace$/,
      setup: async (r) => {
        await symlink('/no/such/host/dir', path.join(r.ws.outputDir, 'probe'));
        return 'output/probe/x';
      },
    },
    {
      name: 'a relative symlink climbing out through a linked directory',
      status: 403,
      error: /leads \(through a symlink\) outside the workspace$/,
      setup: async (r) => {
        await mkdir(path.join(r.ws.codeDir, 'deep'), { recursive: true });
        await symlink('../code/deep', path.join(r.ws.outputDir, 'hop'));
        await symlink('../../..', path.join(r.ws.codeDir, 'deep', 'up'));
        return 'output/hop/up';
      },
    },
    {
      name: 'a checkpoint containing a file symlinked out of the workspace',
      status: 403,
      error: /weights.json is a symlink leading outside the workspace/,
      setup: async (r) => {
        await mkdir(path.join(r.ws.outputDir, 'leaky'));
        await symlink(path.join(r.ctx.privateDir, 'weights.json'), path.join(r.ws.outputDir, 'leaky', 'weights.json'));
        return 'output/leaky';
      },
    },
    { name: 'the base model directory', status: 403, error: /inside the read-only base model directory/, setup: async () => 'models/base' },
    {
      name: 'a symlink to the base model directory',
      status: 403,
      error: /inside the read-only base model directory/,
      setup: async (r) => {
        await symlink(r.ws.baseModelDir, path.join(r.ws.outputDir, 'base-link'));
        return 'output/base-link';
      },
    },
    { name: 'the data directory', status: 403, error: /inside the read-only data directory/, setup: async (r) => r.ws.dataDir },
    { name: 'a directory containing the base model', status: 403, error: /contains the read-only base model directory/, setup: async () => 'models' },
    { name: 'a missing path', status: 404, error: /does not exist/, setup: async () => 'output/never-written' },
    { name: 'a file rather than a directory', status: 422, error: /not a directory/, setup: async () => 'description.md' },
  ];

  it.each(cases)('$name → $status', async ({ status, error, setup }) => {
    const r = await server.newRun();
    await r.checkpoint('ck', { score: 50 });
    const modelPath = await setup(r);
    const res = await post(`${r.url}/submit`, { model_path: modelPath });
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({ statusCode: status, submission_id: 'sub-1' });
    expect(res.body.error).toMatch(error);
    expect(r.events).toHaveLength(1);
    expect(r.events[0]).toEqual({ type: 'SubmissionRejected', data: expect.objectContaining({ submissionId: 'sub-1', reasonClass: 'invalid_path' }) });
    expect(r.task.calls).toBe(0);
  });
});

describe('credentials', () => {
  it('refuses a request without a credential or with an unknown one (401, no event)', async () => {
    const r = await server.newRun();
    await r.checkpoint('ck', { score: 50 });
    const none = await post(`${server.base}/submit`, { model_path: 'output/ck' });
    expect(none.status).toBe(401);
    expect(none.body.error).toMatch(/missing run credential.*GRADING_SERVER_URL.*A2RL_RUN_TOKEN/);
    expect((await post(`${server.base}/g/not-a-token/submit`, { model_path: 'output/ck' })).status).toBe(401);
    expect((await post(`${server.base}/submit`, { model_path: 'output/ck' }, { authorization: 'Bearer nope' })).status).toBe(401);
    expect((await post(`${server.base}/submit`, { model_path: 'output/ck' }, { authorization: `Bearer ${OPERATOR}` })).status).toBe(401);
    expect((await get(`${server.base}/time`)).status).toBe(401);
    expect((await post(`${server.base}/env/reset`, {})).status).toBe(401);
    expect(r.events).toEqual([]);
  });

  it("acts only for the token's own run: another run's token records on that run, disagreeing tokens are refused", async () => {
    const a = await server.newRun();
    const b = await server.newRun();
    await a.checkpoint('ck', { score: 50 });
    const mixed = await post(`${a.url}/submit`, { model_path: 'output/ck' }, { authorization: `Bearer ${b.ctx.token}` });
    expect(mixed.status).toBe(401);
    expect(mixed.body.error).toMatch(/different runs/);
    // B's token acts on B's workspace: A's checkpoint is not there.
    const viaB = await post(`${b.url}/submit`, { model_path: 'output/ck' });
    expect(viaB.status).toBe(404);
    expect(a.events).toEqual([]);
    expect(types(b.events)).toEqual(['SubmissionRejected']);
  });

  it("refuses an ended run's token", async () => {
    const r = await server.newRun();
    await server.registry.unregister(r.ctx.runId);
    expect((await get(`${r.url}/time`)).status).toBe(401);
    expect((await get(`${r.url}/health`)).status).toBe(401);
  });
});

describe('GET /health and GET /time', () => {
  it('answers health without a credential, and names the run under the capability URL', async () => {
    const r = await server.newRun();
    const gpus = ['0', '1', '2', '3'];
    expect(await get(`${server.base}/health`)).toEqual({ status: 200, body: { status: 'ok', service: 'a2rl-grading', available_gpus: gpus } });
    expect(await get(`${r.url}/health`)).toEqual({
      status: 200,
      body: { status: 'ok', service: 'a2rl-grading', available_gpus: gpus, run_id: r.ctx.runId, task: 'fake-task', workspace: r.ws.root },
    });
  });

  it('reports elapsed and remaining budget', async () => {
    const deadline = new Date(Date.now() + 600_000);
    const r = await server.newRun({ budgetSeconds: 900, deadline });
    for (const res of [await get(`${r.url}/time`), await get(`${server.base}/time`, { authorization: `Bearer ${r.ctx.token}` })]) {
      expect(res.status).toBe(200);
      expect(res.body.timeout_s).toBe(900);
      expect(res.body.deadline).toBe(deadline.toISOString());
      expect(res.body.elapsed_s).toBeGreaterThanOrEqual(299);
      expect(res.body.remaining_s).toBeLessThanOrEqual(600);
      // Together they are the budget, however long the request took.
      expect(Math.abs(res.body.elapsed_s + res.body.remaining_s - 900)).toBeLessThanOrEqual(1);
    }
  });

  it("returns run_meta.json's fields with the paper's now and remaining = max(timeout_s − (now − start_time), 0)", async () => {
    const start = Math.floor(Date.now() / 1000) - 300;
    const meta = { start_time: start, timeout_s: 900, last_submit_time: start + 10, end_time: null };
    const r = await server.newRun({ budgetSeconds: 900, runMeta: () => meta });
    const before = Date.now() / 1000;
    const { status, body } = await get(`${r.url}/time`);
    expect(status).toBe(200);
    expect(body).toMatchObject(meta);
    expect(body.now >= before && body.now <= Date.now() / 1000).toBe(true);
    expect(body.remaining).toBe(Math.max(0, Math.floor(900 - (body.now - start))));
    expect(Number.isInteger(body.remaining) && body.remaining <= 600).toBe(true);

    const over = await server.newRun({ runMeta: () => ({ ...meta, start_time: start - 1000 }) });
    expect((await get(`${over.url}/time`)).body.remaining).toBe(0);
  });

  it('derives run_meta from the run when the harness gives none: last_submit_time follows every answered submission', async () => {
    const r = await server.newRun({ budgetSeconds: 900 });
    const first = (await get(`${r.url}/time`)).body;
    expect(first).toMatchObject({ start_time: r.run.startedAt.getTime() / 1000, timeout_s: 900, last_submit_time: null, end_time: null });
    await r.checkpoint('bad', 'not json');
    const sub = await post(`${r.url}/submit`, { model_path: 'output/bad' });
    expect((await get(`${r.url}/time`)).body.last_submit_time).toBe(Date.parse(sub.body.timestamp) / 1000);
  });
});

describe('POST /set_baseline', () => {
  it('lets the operator set the baseline: recorded and used for later improvements', async () => {
    const r = await server.newRun({ baselineScore: 20 });
    const res = await post(`${server.base}/set_baseline`, { score: 35.5, run_id: r.ctx.runId }, { authorization: `Bearer ${OPERATOR}` });
    expect(res).toEqual({ status: 200, body: { run_id: r.ctx.runId, baseline_score: 35.5, status: 'set' } });
    expect(r.events).toEqual([{ type: 'BaselineEvaluated', data: { score: 35.5, cached: false, evaluatorVersion: 'operator' } }]);
    await r.checkpoint('ck', { score: 50 });
    const sub = await post(`${r.url}/submit`, { model_path: 'output/ck' });
    expect(sub.body).toMatchObject({ baseline_score: 35.5, improvement: 14.5 });
  });

  it("refuses the run's own token (403) and anything else (401), recording nothing", async () => {
    const r = await server.newRun();
    const body = { score: 99, run_id: r.ctx.runId };
    expect((await post(`${r.url}/set_baseline`, body)).status).toBe(403);
    expect((await post(`${server.base}/set_baseline`, body, { authorization: `Bearer ${r.ctx.token}` })).status).toBe(403);
    expect((await post(`${server.base}/set_baseline`, body)).status).toBe(401);
    expect((await post(`${server.base}/set_baseline`, body, { authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await post(`${server.base}/set_baseline`, { score: 1, run_id: 'no-such-run' }, { authorization: `Bearer ${OPERATOR}` })).status).toBe(404);
    expect(r.events).toEqual([]);
    expect(r.run.baselineScore).toBe(20);
  });
});

describe('malformed, oversized and mistyped bodies', () => {
  const endpoints = [
    { method: 'POST', route: 'submit' },
    { method: 'POST', route: 'set_baseline' },
    { method: 'POST', route: 'env/reset' },
    { method: 'POST', route: 'env/step' },
    { method: 'GET', route: 'time' },
    { method: 'GET', route: 'health' },
  ];
  const oversized = JSON.stringify({ model_path: 'x'.repeat(70 * 1024) });

  it.each(endpoints)('$method /$route: malformed JSON → 400, oversized → 413, as JSON, with no event', async ({ method, route }) => {
    const r = await server.newRun();
    for (const url of [`${r.url}/${route}`, `${server.base}/${route}`]) {
      for (const [body, status] of [['{"model_path": ', 400], ['{"a":1}}', 400], ['"just a string"', 400], [oversized, 413]] as const) {
        const res = await rawRequest(method, url, body, { authorization: `Bearer ${OPERATOR}` });
        expect([res.status, body.slice(0, 20)]).toEqual([status, body.slice(0, 20)]);
        expect(res.body).toMatchObject({ statusCode: status, error: expect.any(String) });
      }
    }
    expect(r.events).toEqual([]);
  });

  const mistyped: Array<{ route: string; bodies: unknown[]; operator?: boolean }> = [
    { route: 'submit', bodies: [{}, [], [{ model_path: 'output/ck' }], { model_path: 5 }, { model_path: '' }, { model_path: 'output/ck', gpu: { a: 1 } }, { model_path: 'output/ck', gpu: -1 }, { model_path: 'output/ck', gpu: [2, 3] }, { model_path: 'output/ck', gpu: '0;rm' }, { model_path: 'output/ck', extra: true }, { model_path: 'x'.repeat(5000) }] },
    { route: 'set_baseline', operator: true, bodies: [{}, { score: '50', run_id: 'run-1' }, { score: 101, run_id: 'run-1' }, { score: 50, run_id: 5 }, { score: 50 }, { score: 50, run_id: 'run-1', x: 1 }] },
    { route: 'env/reset', bodies: [{ seed: -1 }, { seed: 1.5 }, { seed: '1' }, { other: 1 }, []] },
    { route: 'env/step', bodies: [{}, { session_id: 3, action: 'left' }, { session_id: 'sess-1', action: null }, { session_id: 'sess-1' }, { session_id: 'sess-1', action: 'left', extra: 1 }] },
  ];

  it.each(mistyped)('POST /$route: wrong types, missing and unknown fields → 400 with no event', async ({ route, bodies, operator }) => {
    const r = await server.newRun();
    await r.checkpoint('ck', { score: 50 });
    for (const body of bodies) {
      const res = operator
        ? await post(`${server.base}/${route}`, body, { authorization: `Bearer ${OPERATOR}` })
        : await post(`${r.url}/${route}`, body);
      expect([res.status, body]).toEqual([400, body]);
      expect(typeof res.body.error).toBe('string');
    }
    expect(r.events).toEqual([]);
    expect(r.task.calls).toBe(0);
  });
});
