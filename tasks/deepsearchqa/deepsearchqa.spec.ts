import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { startOpenAiTestServer, testEvaluationContext, type OpenAiTestServer, type ScriptedAnswers } from '../../test/servers/openai-test-server.js';
import { DatasetMissingError } from '../paper-common/dataset.js';
import { EvaluatorError, InvalidCheckpointError, type EvaluationContext, type OpenAiEndpoint, type TaskPaths } from '../task-pack.js';
import { DSQA_FILE, goldItems, parseCsv, readDsqaCsv, type DsqaItem } from './dataset.js';
import { deepsearchqa, PRIVATE_FILE, VISIBLE_FILE } from './index.js';
import { judgeAnswer, parseVerdict } from './judge.js';
import { INVALID_ACTION, LAST_STEP, MAX_STEPS, parseAction, runEpisode } from './react.js';
import { ApiSearchBackend, DuckDuckGoHtmlBackend, parseDuckDuckGoHtml, searchBackendFromEnv, type SearchBackend, type SearchResult } from './search.js';
import { PythonRandom, splitItems } from './split.js';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const readJson = async <T>(file: string) => JSON.parse(await readFile(path.join(fixtures, file), 'utf8')) as T;

/** A local HTTP server; `handle` returns [status, content type, body] and every request URL is recorded. */
async function startStub(handle: (url: URL, req: http.IncomingMessage) => [number, string, string]) {
  const requests: { url: URL; authorization?: string }[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://stub');
    requests.push({ url, authorization: req.headers.authorization });
    const [status, type, body] = handle(url, req);
    res.writeHead(status, { 'content-type': type });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, requests, close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}

type Stub = Awaited<ReturnType<typeof startStub>>;

/** Scripted results: the first key of search-results.json contained in the (lower-cased) query. */
const lookup = (table: Record<string, SearchResult[]>, query: string): SearchResult[] =>
  Object.entries(table).find(([key]) => query.toLowerCase().includes(key))?.[1] ?? [];

const escapeHtml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** DuckDuckGo's HTML results layout (result__a / result__snippet, /l/?uddg= redirects), written for these tests. */
function duckDuckGoPage(results: readonly SearchResult[]): string {
  const blocks = results.map((r) => {
    const href = `//duckduckgo.com/l/?uddg=${encodeURIComponent(r.url)}&amp;rut=fixture`;
    return `<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title"><a rel="nofollow" class="result__a" href="${href}">${escapeHtml(r.title)}</a></h2>
    <div class="result__extras"><a class="result__url" href="${href}">${escapeHtml(r.url)}</a></div>
    <a class="result__snippet" href="${href}">${escapeHtml(r.snippet)}</a>
  </div>
</div>`;
  });
  return `<!DOCTYPE html><html><head><title>DuckDuckGo</title></head><body><div id="links" class="results">${blocks.join('\n')}</div></body></html>`;
}

describe('the deepsearchqa split', () => {
  it('reproduces CPython: random.Random(42) outputs and random.Random(42).shuffle orders', () => {
    const rng = new PythonRandom(42);
    expect([rng.nextUint32(), rng.nextUint32(), rng.nextUint32()]).toEqual([2746317213, 478163327, 107420369]);
    // Reference values printed by CPython 3 for list(range(n)) shuffled with random.Random(42).
    expect(new PythonRandom(42).shuffle([...Array(10).keys()])).toEqual([7, 3, 2, 8, 5, 6, 9, 4, 0, 1]);
    expect(new PythonRandom(42).shuffle([...Array(20).keys()]).slice(0, 12)).toEqual([19, 5, 14, 4, 9, 13, 15, 18, 6, 12, 17, 10]);
    expect(new PythonRandom(42).shuffle([...Array(900).keys()]).slice(0, 12)).toEqual([92, 877, 443, 474, 589, 873, 251, 550, 311, 490, 172, 299]);
  });

  it('puts 100 shuffled items in the visible split and the next 200 in the private one, disjoint and deterministic', () => {
    const items = [...Array(310).keys()];
    const first = splitItems(items);
    expect([first.visible.length, first.private.length]).toEqual([100, 200]);
    expect(first.visible.slice(0, 5)).toEqual([120, 10, 157, 19, 209]);
    expect(first.private.slice(0, 5)).toEqual([298, 309, 66, 234, 276]);
    const used = new Set([...first.visible, ...first.private]);
    expect(used.size).toBe(300);
    expect(items.filter((i) => !used.has(i))).toEqual([12, 44, 52, 57, 71, 114, 125, 140, 216, 279]);
    expect(splitItems(items)).toEqual(first);
    expect(items).toEqual([...Array(310).keys()]);
  });
});

describe('deepsearchqa data', () => {
  it('parses RFC 4180 CSV: quoted commas, doubled quotes, embedded newlines, CRLF', () => {
    expect(parseCsv('a,b\r\n"x, y","say ""hi"""\n"multi\nline",z\n')).toEqual([['a', 'b'], ['x, y', 'say "hi"'], ['multi\nline', 'z']]);
    expect(() => parseCsv('a\n"open')).toThrow(SyntaxError);
  });

  it('reads the fixture file with its single and set answers', async () => {
    const items = await readDsqaCsv(fixtures);
    expect(items).toHaveLength(10);
    expect(items[4]!.problem).toContain('"Epsilon report", a test document');
    expect(items[8]).toMatchObject({ answer: 'Amber\nCobalt', answer_type: 'Set Answer' });
  });

  it('splits set answers into gold items: JSON array, lines, semicolons, else commas', () => {
    expect(goldItems('["A, Inc.", "B"]')).toEqual(['A, Inc.', 'B']);
    expect(goldItems('- Amber\n- Cobalt\n')).toEqual(['Amber', 'Cobalt']);
    expect(goldItems('Paris, France; Rome')).toEqual(['Paris, France', 'Rome']);
    expect(goldItems('Ostra, Velm, Quill')).toEqual(['Ostra', 'Velm', 'Quill']);
  });
});

describe('ReAct action parsing', () => {
  it.each([
    ['Search[capital of France]', { kind: 'search', query: 'capital of France' }],
    ['Thought: easy.\nAction: Answer[ Paris ]', { kind: 'answer', answer: 'Paris' }],
    ['Answer[The [revised] code K-7] trailing', { kind: 'answer', answer: 'The [revised] code K-7' }],
    ['Search[a] then Answer[b]', { kind: 'search', query: 'a' }],
    ['no action at all', { kind: 'malformed' }],
    ['Answer[]', { kind: 'malformed' }],
    ['Answer[unclosed', { kind: 'malformed' }],
    ['search[lower case]', { kind: 'malformed' }],
    ['ReSearch[x]', { kind: 'malformed' }],
  ])('%j → %j', (reply, action) => {
    expect(parseAction(reply).action).toEqual(action);
  });
});

describe('ReAct episodes against a scripted model', () => {
  let model: OpenAiTestServer;
  const noSearch: SearchBackend = { name: 'none', search: async () => [] };
  afterEach(() => model?.close());

  it('stops at the step limit without an answer, telling the model before its last step', async () => {
    const answers: ScriptedAnswers = { rules: [{ contains: LAST_STEP, reply: 'Answer[forced]' }], default: 'Search[again]' };
    model = await startOpenAiTestServer({ answers });
    const forced = await runEpisode(model, 'Q?', noSearch);
    expect(forced).toEqual({ answer: 'forced', steps: MAX_STEPS, searches: MAX_STEPS - 1, malformed: 0 });
    await model.close();
    model = await startOpenAiTestServer({ answers: { rules: [], default: 'thinking, no action' } });
    expect(await runEpisode(model, 'Q?', noSearch)).toEqual({ answer: null, steps: MAX_STEPS, searches: 0, malformed: MAX_STEPS });
  });

  it('answers a malformed reply with the invalid-action observation and goes on', async () => {
    model = await startOpenAiTestServer({ answers: { rules: [{ contains: INVALID_ACTION, reply: 'Answer[ok]' }], default: 'hmm' } });
    expect(await runEpisode(model, 'Q?', noSearch)).toEqual({ answer: 'ok', steps: 2, searches: 0, malformed: 1 });
  });
});

describe('search backends', () => {
  let api: Stub;
  let ddg: Stub;
  let table: Record<string, SearchResult[]>;
  beforeAll(async () => {
    table = await readJson('search-results.json');
    api = await startStub((url, req) =>
      req.headers.authorization === 'Bearer test-key'
        ? [200, 'application/json', JSON.stringify({ results: lookup(table, url.searchParams.get('q') ?? '') })]
        : [401, 'application/json', '{"error":"bad key"}'],
    );
    ddg = await startStub((url) => [200, 'text/html; charset=utf-8', duckDuckGoPage(lookup(table, url.searchParams.get('q') ?? ''))]);
  });
  afterAll(async () => { await api.close(); await ddg.close(); });

  it('uses the API with the key when A2RL_SEARCH_API_KEY is set, else the keyless DuckDuckGo fallback', async () => {
    const keyed = searchBackendFromEnv({ A2RL_SEARCH_API_KEY: 'test-key', A2RL_SEARCH_URL: `${api.base}/search` });
    expect(keyed).toBeInstanceOf(ApiSearchBackend);
    expect(await keyed.search('Lantern fair')).toEqual(table.lantern);
    expect(api.requests.at(-1)!.url.searchParams.get('count')).toBe('5');
    const keyless = searchBackendFromEnv({ A2RL_SEARCH_FALLBACK_URL: `${ddg.base}/html/` });
    expect(keyless).toBeInstanceOf(DuckDuckGoHtmlBackend);
    expect(await keyless.search('Lantern fair')).toEqual(table.lantern);
    expect(ddg.requests.at(-1)!.url.pathname).toBe('/html/');
    expect(searchBackendFromEnv({}).name).toBe('duckduckgo-html');
  });

  it('refuses a key without a URL and reports a rejected key as an evaluator error', async () => {
    expect(() => searchBackendFromEnv({ A2RL_SEARCH_API_KEY: 'k' })).toThrow(/A2RL_SEARCH_URL/);
    await expect(new ApiSearchBackend(`${api.base}/search`, 'wrong').search('x')).rejects.toThrow(EvaluatorError);
    await expect(new ApiSearchBackend(`${api.base}/search`, 'wrong').search('x')).rejects.toThrow(/HTTP 401/);
  });

  it('reads DuckDuckGo HTML: unwraps redirect links, strips tags and entities', () => {
    const html = duckDuckGoPage([{ title: 'A & B', url: 'https://example.org/a?x=1&y=2', snippet: 'one <two>' }])
      .replace('one &lt;two&gt;', '<b>one</b> &lt;two&gt;');
    expect(parseDuckDuckGoHtml(html)).toEqual([{ title: 'A & B', url: 'https://example.org/a?x=1&y=2', snippet: 'one <two>' }]);
    expect(parseDuckDuckGoHtml('<html><body>No results.</body></html>')).toEqual([]);
  });
});

describe('judging', () => {
  let judge: OpenAiTestServer;
  let endpoint: OpenAiEndpoint;
  beforeAll(async () => {
    judge = await startOpenAiTestServer({ answers: await readJson<ScriptedAnswers>('judge-answers.json'), model: 'judge' });
    endpoint = { baseUrl: judge.baseUrl, model: 'judge' };
  });
  afterAll(() => judge.close());
  const item = (answer: string, answer_type: string): DsqaItem => ({ problem: 'Q', problem_category: 'c', answer, answer_type });

  it('parses CORRECT / INCORRECT as whole words and nothing else', () => {
    expect(parseVerdict('CORRECT')).toBe('correct');
    expect(parseVerdict('Verdict: incorrect.')).toBe('incorrect');
    expect(parseVerdict('The response looks fine to me.')).toBe('error');
    expect(parseVerdict('CORRECT or INCORRECT?')).toBe('error');
    expect(parseVerdict('')).toBe('error');
  });

  it('needs every gold item of a set answer, one judge call per item', async () => {
    expect(await judgeAnswer(endpoint, item('Ostra, Velm, Quill', 'Set Answer'), 'Ostra, Velm and Quill')).toEqual({ verdict: 'correct', calls: 3, errors: 0 });
    expect(await judgeAnswer(endpoint, item('Red, Green, Blue', 'Set Answer'), 'Red, Green')).toEqual({ verdict: 'incorrect', calls: 3, errors: 0 });
    // A single answer is not split on its commas.
    expect(await judgeAnswer(endpoint, item('Red, Green', 'Single Answer'), 'Red, Green')).toEqual({ verdict: 'incorrect', calls: 1, errors: 0 });
  });

  it('turns an unparseable judge reply into an error, never a win', async () => {
    expect(await judgeAnswer(endpoint, item('Moss', 'Single Answer'), 'Moss')).toEqual({ verdict: 'error', calls: 1, errors: 1 });
  });
});

describe('the deepsearchqa pack end to end with stubs', () => {
  let root: string;
  let judge: OpenAiTestServer;
  let api: Stub;
  let ddg: Stub;
  let ctx: EvaluationContext;
  let stopped: string[];
  let privateDir: string;
  const savedEnv = { ...process.env };
  const searchEnv = ['A2RL_SEARCH_API_KEY', 'A2RL_SEARCH_URL', 'A2RL_SEARCH_FALLBACK_URL'];

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-dsqa-'));
    const table = await readJson<Record<string, SearchResult[]>>('search-results.json');
    api = await startStub((url, req) =>
      req.headers.authorization === 'Bearer test-key' ? [200, 'application/json', JSON.stringify({ results: lookup(table, url.searchParams.get('q') ?? '') })] : [401, 'text/plain', 'no'],
    );
    ddg = await startStub((url) => [200, 'text/html', duckDuckGoPage(lookup(table, url.searchParams.get('q') ?? ''))]);
    judge = await startOpenAiTestServer({ answers: await readJson<ScriptedAnswers>('judge-answers.json'), model: 'judge' });
    stopped = [];
    ctx = testEvaluationContext({ stopped }, { baseUrl: judge.baseUrl, model: 'judge' });
    privateDir = path.join(root, 'private');
    await mkdir(privateDir);
    const items = await readDsqaCsv(fixtures);
    await writeFile(path.join(privateDir, PRIVATE_FILE), items.map((i) => JSON.stringify(i)).join('\n') + '\n');
  });
  afterEach(() => {
    for (const key of searchEnv) {
      if (savedEnv[key] === undefined) delete process.env[key];
      else process.env[key] = savedEnv[key];
    }
  });
  afterAll(async () => {
    await Promise.all([judge.close(), api.close(), ddg.close()]);
    await rm(root, { recursive: true, force: true });
  });

  const expected = {
    correct: 5, total: 10, accuracy: 0.5,
    single: { correct: 3, total: 7 }, set: { correct: 2, total: 3 },
    unanswered: 2, steps: 24, searches: 10, malformedActions: 6,
    judgeCalls: 13, judgeErrors: 1, judgeErrorReplies: 1,
  };

  it('scores the scripted agent 50 through the search API (key set), stopping the served model', async () => {
    Object.assign(process.env, { A2RL_SEARCH_API_KEY: 'test-key', A2RL_SEARCH_URL: `${api.base}/search` });
    const result = await deepsearchqa.evaluate(path.join(fixtures, 'model'), privateDir, undefined, ctx);
    expect(result.score).toBe(50);
    expect(result.details).toMatchObject({ ...expected, searchBackend: 'api' });
    expect(api.requests).toHaveLength(10);
    expect(stopped).toEqual([path.join(fixtures, 'model')]);
  });

  it('scores the same through the keyless fallback when no key is set', async () => {
    delete process.env.A2RL_SEARCH_API_KEY;
    process.env.A2RL_SEARCH_FALLBACK_URL = `${ddg.base}/html/`;
    const result = await deepsearchqa.evaluate(path.join(fixtures, 'model'), privateDir, undefined, ctx);
    expect(result.score).toBe(50);
    expect(result.details).toMatchObject({ ...expected, searchBackend: 'duckduckgo-html' });
    expect(ddg.requests).toHaveLength(10);
  });

  it('fails as an evaluator error when the judge mostly replies garbage', async () => {
    process.env.A2RL_SEARCH_FALLBACK_URL = `${ddg.base}/html/`;
    const garbage = await startOpenAiTestServer({ answers: { rules: [], default: 'I cannot decide.' }, model: 'judge' });
    try {
      const attempt = deepsearchqa.evaluate(path.join(fixtures, 'model'), privateDir, undefined, { ...ctx, judge: { baseUrl: garbage.baseUrl, model: 'judge' } });
      await expect(attempt).rejects.toThrow(/unparseable replies .* on 8 of 10 questions/);
    } finally {
      await garbage.close();
    }
  });

  it('refuses to run without a judge, and blames a checkpoint without config.json on the agent', async () => {
    await expect(deepsearchqa.evaluate(path.join(fixtures, 'model'), privateDir, undefined, { ...ctx, judge: null })).rejects.toThrow(/A2RL_JUDGE_URL/);
    await expect(deepsearchqa.evaluate(root, privateDir, undefined, ctx)).rejects.toBeInstanceOf(InvalidCheckpointError);
  });

  it('materialises the split from the fetched CSV, and refuses a missing or too small one', async () => {
    const datasetDir = path.join(root, 'dataset');
    await mkdir(path.join(datasetDir, 'base-model'), { recursive: true });
    await writeFile(path.join(datasetDir, 'base-model', 'config.json'), '{}');
    const fixtureCsv = await readFile(path.join(fixtures, DSQA_FILE), 'utf8');
    const filler = Array.from({ length: 300 }, (_, i) => `"Filler question ${i}?",Filler,F${i},Single Answer`).join('\n');
    await writeFile(path.join(datasetDir, DSQA_FILE), `${fixtureCsv}${filler}\n`);
    const paths: TaskPaths = { datasetDir, dataDir: path.join(root, 'data'), modelDir: path.join(root, 'model'), privateDir: path.join(root, 'p') };
    await deepsearchqa.materialize(paths);
    const rows = async (file: string) => (await readFile(file, 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as DsqaItem);
    const visible = await rows(path.join(paths.dataDir, VISIBLE_FILE));
    const hidden = await rows(path.join(paths.privateDir, PRIVATE_FILE));
    const all = await readDsqaCsv(datasetDir);
    expect([visible.length, hidden.length]).toEqual([100, 200]);
    expect({ visible, private: hidden }).toEqual(splitItems(all));
    expect(Object.keys(visible[0]!)).toEqual(['problem', 'problem_category', 'answer', 'answer_type']);

    const target = { dataDir: path.join(root, 'd2'), modelDir: path.join(root, 'm2'), privateDir: path.join(root, 'p2') };
    await expect(deepsearchqa.materialize({ ...target, datasetDir: fixtures })).rejects.toThrow(/holds 10 items, the split needs at least 300/);
    await expect(deepsearchqa.materialize({ ...target, datasetDir: path.join(root, 'nowhere') })).rejects.toBeInstanceOf(DatasetMissingError);
    await expect(deepsearchqa.materialize({ ...target, datasetDir: path.join(root, 'nowhere') })).rejects.toThrow(/a2rl data fetch deepsearchqa/);
  });

  it('declares level 3 and its requirements (GPU, vllm, dataset, judge, search)', () => {
    expect(deepsearchqa.level).toBe(3);
    expect(deepsearchqa.reference).toBeUndefined();
    expect(deepsearchqa.requirements!.map((r) => r.kind)).toEqual(['gpu', 'command', 'dataset', 'judge', 'search']);
  });
});
