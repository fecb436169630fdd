import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FakeTask, get, OPERATOR, post, rawRequest, startGradingServer, type TestServer } from './testing/grading-fixtures.js';

let server: TestServer;
beforeAll(async () => {
  server = await startGradingServer({ evaluatorTimeoutMs: 1500 });
});
afterAll(async () => {
  await server?.close();
});

const types = (events: { type: string }[]) => events.map((e) => e.type);

describe('POST /submit', () => {
  it('grades a checkpoint through the capability URL with no header and archives every file by content', async () => {
    let submitted = 0;
    const r = await server.newRun({ baselineScore: 20, onSubmitted: () => submitted++ });
    const modelPath = await r.checkpoint('ck1', { score: 55 }, { 'manifest.json': '{"format":"fake/1"}', 'sub/extra.bin': 'xyz' });
    const res = await post(`${r.url}/submit`, { model_path: modelPath });
    expect(res).toEqual({
      status: 200,
      body: { submission_id: 'sub-1', score: 55, baseline_score: 20, improvement: 35, best: 55, total_submissions: 1 },
    });
    expect(types(r.events)).toEqual(['SubmissionReceived', 'SubmissionGraded']);
    const received = r.events[0].data as any;
    expect(received.submissionId).toBe('sub-1');
    expect(received.modelPath).toBe('output/ck1');
    expect(received.manifest.map((m: any) => m.path)).toEqual(['manifest.json', 'sub/extra.bin', 'weights.json']);
    for (const entry of received.manifest) expect(await server.artifacts.exists(entry.sha256)).toBe(true);
    expect(await server.artifacts.exists(received.checkpoint.sha256)).toBe(true);
    expect(r.events[1].data).toEqual({ submissionId: 'sub-1', score: 55, improvement: 35, details: { graded: 'fake' } });
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
    expect(second.body).toEqual({ submission_id: 'sub-2', score: 40, baseline_score: 10, improvement: 30, best: 40, total_submissions: 2 });
    expect(r.task.calls).toBe(1);
    expect(types(r.events)).toEqual(['SubmissionReceived', 'SubmissionGraded', 'SubmissionReceived', 'SubmissionGraded']);
    expect((r.events[2].data as any).checkpoint.sha256).toBe((r.events[0].data as any).checkpoint.sha256);
    expect(r.events[3].data).toEqual({ submissionId: 'sub-2', score: 40, improvement: 30, details: { duplicateOf: 'sub-1' } });
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
    expect(res.body).toMatchObject({ submission_id: 'sub-1', score: null, improvement: null, best: null, total_submissions: 1 });
    expect(res.body.error).toMatch(/invalid checkpoint: weights.json is missing or not JSON/);
    expect(types(r.events)).toEqual(['SubmissionReceived', 'SubmissionRejected']);
    expect(r.events[1].data).toMatchObject({ submissionId: 'sub-1', reasonClass: 'invalid_checkpoint' });
  });

  it('reports an evaluator crash as evaluator_error, not blamed on the agent, and grades the same content again later', async () => {
    const r = await server.newRun();
    await r.checkpoint('crash', { fail: 'evaluator' });
    const res = await post(`${r.url}/submit`, { model_path: 'output/crash' });
    expect(res.status).toBe(200);
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
    const task = new FakeTask();
    const r = await server.newRun({ task });
    await r.checkpoint('x', { score: 11, delayMs: 200 });
    await r.checkpoint('y', { score: 12, delayMs: 200 });
    const both = await Promise.all([post(`${r.url}/submit`, { model_path: 'output/x' }), post(`${r.url}/submit`, { model_path: 'output/y', gpu: 'cpu' })]);
    expect(both.map((b) => b.status)).toEqual([200, 200]);
    expect(task.calls).toBe(2);
    expect(task.maxActive).toBe(1);

    await r.checkpoint('z', { score: 13, delayMs: 300 });
    await r.checkpoint('w', { score: 14, delayMs: 300 });
    await Promise.all([post(`${r.url}/submit`, { model_path: 'output/z', gpu: 0 }), post(`${r.url}/submit`, { model_path: 'output/w', gpu: 1 })]);
    expect(task.maxActive).toBe(2);
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
    expect(await get(`${server.base}/health`)).toEqual({ status: 200, body: { status: 'ok', service: 'a2rl-grading' } });
    expect(await get(`${r.url}/health`)).toEqual({ status: 200, body: { status: 'ok', service: 'a2rl-grading', run_id: r.ctx.runId, task: 'fake-task' } });
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
});

describe('POST /set_baseline', () => {
  it('lets the operator set the baseline: recorded and used for later improvements', async () => {
    const r = await server.newRun({ baselineScore: 20 });
    const res = await post(`${server.base}/set_baseline`, { score: 35.5, run_id: r.ctx.runId }, { authorization: `Bearer ${OPERATOR}` });
    expect(res).toEqual({ status: 200, body: { run_id: r.ctx.runId, baseline_score: 35.5 } });
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
    { route: 'submit', bodies: [{}, [], [{ model_path: 'output/ck' }], { model_path: 5 }, { model_path: '' }, { model_path: 'output/ck', gpu: { a: 1 } }, { model_path: 'output/ck', gpu: -1 }, { model_path: 'output/ck', extra: true }, { model_path: 'x'.repeat(5000) }] },
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
