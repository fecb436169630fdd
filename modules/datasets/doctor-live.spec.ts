import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { TaskPack, TaskRequirement } from '../../tasks/task-pack.js';
import { diagnoseTask, machineProbe } from './doctor.js';

const pack = (requirements: TaskRequirement[]): TaskPack => ({
  id: 'deepsearchqa', level: 3, title: 'pack', baseModel: 'base', evaluatorVersion: '1', description: '', requirements,
  materialize: async () => undefined,
  evaluate: async () => ({ score: 0, details: {} }),
});

interface Scripted {
  url: string;
  requests: { route: string; body: string; auth: string | undefined }[];
  close(): Promise<void>;
}

/** A local server answering every request with `answer(route)`: the judge and search services doctor calls for real. */
async function scripted(answer: (route: string) => { status: number; type: string; body: string }): Promise<Scripted> {
  const requests: Scripted['requests'] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const route = (req.url ?? '').split('?')[0]!;
      requests.push({ route, body, auth: req.headers.authorization });
      const a = answer(route);
      res.writeHead(a.status, { 'content-type': a.type });
      res.end(a.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

const CHAT = JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: 'OK' }, finish_reason: 'length' }], usage: { prompt_tokens: 5, completion_tokens: 1 } });
const DDG = '<div><a class="result__a" href="https://example.org/a">Result A</a><a class="result__snippet">about a</a></div>';

let home: string;
let judge: Scripted;
let search: Scripted;
let broken: Scripted;
beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-doctor-live-'));
  judge = await scripted(() => ({ status: 200, type: 'application/json', body: CHAT }));
  search = await scripted(() => ({ status: 200, type: 'text/html', body: DDG }));
  broken = await scripted(() => ({ status: 503, type: 'application/json', body: '{"error":"overloaded"}' }));
});
afterAll(async () => {
  await Promise.all([judge.close(), search.close(), broken.close()]);
  await rm(home, { recursive: true, force: true });
});

const REQS: TaskRequirement[] = [{ kind: 'judge' }, { kind: 'search' }];

describe('doctor calls the judge and search services a task needs', () => {
  it('makes one 1-token chat completion to the judge and one query to the search backend, and says they answered', async () => {
    const env = { A2RL_JUDGE_URL: `${judge.url}/v1`, A2RL_JUDGE_MODEL: 'gpt-4o', A2RL_JUDGE_API_KEY: 'sk-doctor', A2RL_SEARCH_FALLBACK_URL: `${search.url}/html/` };
    const probe = machineProbe(home, env);
    const d = await diagnoseTask('deepsearchqa', pack(REQS), probe);
    await diagnoseTask('deepsearchqa', pack(REQS), probe); // a second task needing them: no second call
    expect(d.ready).toBe(true);
    expect(d.checks.slice(1).map((c) => [c.name, c.status])).toEqual([['judge', 'ok'], ['search', 'optional']]);
    expect(d.checks[1]!.detail).toMatch(/answered a 1-token chat completion/);
    expect(d.checks[2]!.detail).toMatch(/a real query answered/);
    expect(judge.requests).toHaveLength(1);
    expect(judge.requests[0]).toMatchObject({ route: '/v1/chat/completions', auth: 'Bearer sk-doctor' });
    expect(JSON.parse(judge.requests[0]!.body)).toMatchObject({ model: 'gpt-4o', max_tokens: 1 });
    expect(search.requests.map((r) => r.route)).toEqual(['/html/']);
  });

  it('reports a judge or search service that fails its call as missing, one line each', async () => {
    const env = { A2RL_JUDGE_URL: broken.url, A2RL_JUDGE_MODEL: 'gpt-4o', A2RL_SEARCH_FALLBACK_URL: `${broken.url}/html/` };
    const d = await diagnoseTask('deepsearchqa', pack(REQS), machineProbe(home, env));
    expect(d.ready).toBe(false);
    const [judgeCheck, searchCheck] = d.checks.slice(1);
    expect(judgeCheck).toMatchObject({ status: 'missing', detail: expect.stringMatching(/failed a 1-token chat completion: .*HTTP 503/) });
    expect(searchCheck).toMatchObject({ status: 'missing', detail: expect.stringMatching(/a real query failed: .*HTTP 503/) });
    for (const c of [judgeCheck!, searchCheck!]) expect(c.detail).not.toMatch(/\n/);
    const down = await diagnoseTask('deepsearchqa', pack([{ kind: 'judge' }]), machineProbe(home, { A2RL_JUDGE_URL: 'http://127.0.0.1:1', A2RL_JUDGE_MODEL: 'm' }));
    expect(down.checks[1]).toMatchObject({ status: 'missing', detail: expect.stringMatching(/stopped answering|ECONNREFUSED/) });
  });
});
