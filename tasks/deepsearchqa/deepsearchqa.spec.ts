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
import { judgeAnswer, judgeMessages, parseVerdict, stringMatch } from './judge.js';
import { MAX_STEPS, NO_ANSWER, parseAction, reactPrompt, runEpisode } from './react.js';
import { ApiSearchBackend, DuckDuckGoHtmlBackend, parseDuckDuckGoHtml, searchBackendFromEnv, type SearchBackend, type SearchResult } from './search.js';
import { splitItems, splitOf } from './split.js';

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

describe('the deepsearchqa split (HF Dataset.shuffle(seed=42) = numpy default_rng(42).permutation(900))', () => {
  it('puts shuffled rows 0–99 in the visible split and 100–299 in the private one, from the shipped permutation', () => {
    const { indices, visibleCount, privateCount } = splitOf();
    expect([visibleCount, privateCount]).toEqual([100, 200]);
    const { visible, private: hidden } = indices(900);
    expect([visible[0], visible.at(-1), hidden[0], hidden.at(-1)]).toEqual([420, 86, 538, 664]);
    expect(visible.slice(0, 10)).toEqual([420, 231, 127, 199, 393, 895, 331, 193, 444, 259]);
    expect(new Set([...visible, ...hidden]).size).toBe(300);
    const items = [...Array(900).keys()].map((i) => `row ${i}`);
    expect(splitItems(items)).toEqual({ visible: visible.map((i) => `row ${i}`), private: hidden.map((i) => `row ${i}`) });
  });

  it('refuses a dataset that is not the 900-row upstream release', () => {
    expect(() => splitItems([...Array(899).keys()])).toThrow(/899 rows, the shipped permutation orders 900/);
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

describe('ReAct action parsing (the harness\'s Action:\\s*(search|answer)\\[(.+?)\\])', () => {
  it.each([
    ['Action: search[capital of France]', { kind: 'search', content: 'capital of France' }],
    ['Paris is it. Action:answer[ Paris ]', { kind: 'answer', content: 'Paris' }],
    ['Action: answer[The [revised] code K-7] trailing', { kind: 'answer', content: 'The [revised' }],
    ['Action: search[a] then Action: answer[b]', { kind: 'search', content: 'a' }],
    ['Action: answer[multi\nline]', { kind: 'answer', content: 'multi\nline' }],
    ['no action at all', { kind: 'none' }],
    ['Action: answer[]', { kind: 'none' }],
    ['Action: Search[capitalised]', { kind: 'none' }],
    ['search[no Action: prefix]', { kind: 'none' }],
  ])('%j → %j', (reply, action) => {
    expect(parseAction(reply)).toEqual(action);
  });

  it('starts from the harness\'s ReAct instructions, question and answer type (snapshot)', () => {
    const prompt = reactPrompt('Q?', 'Set Answer');
    expect(prompt.startsWith('You are a research assistant that answers questions by searching the web.\n')).toBe(true);
    expect(prompt.endsWith('- Be concise and factual\n\n\nQuestion: Q?\nAnswer type: Set Answer\n\nThought:')).toBe(true);
    expect(prompt).toMatchSnapshot();
  });
});

describe('ReAct episodes against a scripted model (text completions)', () => {
  let model: OpenAiTestServer;
  const noSearch: SearchBackend = { name: 'none', search: async () => [] };
  afterEach(() => model?.close());

  it('searches until the step limit, then takes the last answer written, else "I don\'t know"', async () => {
    model = await startOpenAiTestServer({ answers: { rules: [], default: 'Action: search[again]' } });
    expect(await runEpisode(model, 'Q?', 'Single Answer', noSearch)).toEqual({ answer: NO_ANSWER, answered: false, steps: MAX_STEPS, searches: MAX_STEPS, searchErrors: 0, forcedAnswers: 0 });
  });

  it('forces an answer after a reply without an action, and re-asks after the template placeholder', async () => {
    model = await startOpenAiTestServer({ answers: { rules: [{ tail: true, contains: '\nAction: answer[', reply: 'your final answer' }], default: 'hmm' } });
    // A placeholder forced answer continues the loop; every step then forces again, up to the limit.
    expect(await runEpisode(model, 'Q?', 'Single Answer', noSearch)).toMatchObject({ answer: NO_ANSWER, answered: false, steps: MAX_STEPS, forcedAnswers: MAX_STEPS });
  });

  it('turns a failing search into a "Search error: …" observation, as the harness does', async () => {
    model = await startOpenAiTestServer({ answers: { rules: [{ contains: 'Search error: down', reply: 'Action: answer[x]' }], default: 'Action: search[q]' } });
    const failing: SearchBackend = { name: 'down', search: async () => { throw new Error('down'); } };
    expect(await runEpisode(model, 'Q?', 'Single Answer', failing)).toEqual({ answer: 'x', answered: true, steps: 2, searches: 1, searchErrors: 1, forcedAnswers: 0 });
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

describe('judging (one call per question, string match when the judge fails)', () => {
  let judge: OpenAiTestServer;
  let endpoint: OpenAiEndpoint;
  beforeAll(async () => {
    judge = await startOpenAiTestServer({ answers: await readJson<ScriptedAnswers>('judge-answers.json'), model: 'judge' });
    endpoint = { baseUrl: judge.baseUrl, model: 'judge' };
  });
  afterAll(() => judge.close());
  const item = (answer: string, answer_type: string): DsqaItem => ({ problem: 'Q', problem_category: 'c', answer, answer_type });

  it('reads the first line, stripped of punctuation, as "correct" or not; an empty reply is no verdict', () => {
    expect(parseVerdict('Correct.')).toBe(true);
    expect(parseVerdict('  CORRECT!\nbecause')).toBe(true);
    expect(parseVerdict('incorrect')).toBe(false);
    expect(parseVerdict('The answer is correct')).toBe(false);
    expect(parseVerdict('')).toBeNull();
  });

  it('asks with the harness\'s system and user text (snapshot)', () => {
    expect(judgeMessages(item('Ostra, Velm, Quill', 'Set Answer'), 'Ostra and Velm')).toMatchSnapshot();
  });

  it('makes one call for a set answer too, and falls back to string matching on an empty reply or a failed call', async () => {
    expect(await judgeAnswer(endpoint, item('Ostra, Velm, Quill', 'Set Answer'), 'Ostra, Velm and Quill')).toEqual({ correct: true, fallback: false });
    expect(await judgeAnswer(endpoint, item('Red, Green, Blue', 'Set Answer'), 'Red, Green')).toEqual({ correct: false, fallback: false });
    expect(await judgeAnswer(endpoint, item('Moss', 'Single Answer'), 'Moss')).toEqual({ correct: true, fallback: true });
    const closed = { baseUrl: 'http://127.0.0.1:1', model: 'judge' };
    expect(await judgeAnswer(closed, item('Paris', 'Single Answer'), 'It is Paris')).toEqual({ correct: true, fallback: true });
  });

  it('string-matches as the harness: containment either way for a single answer, every comma item for a set', () => {
    expect(stringMatch('Paris', 'paris, France', 'Single Answer')).toBe(true);
    expect(stringMatch('Ostra, Velm and Quill', 'Ostra, Velm, Quill', 'Set Answer')).toBe(true);
    expect(stringMatch('Cobalt and Amber', 'Amber\nCobalt', 'Set Answer')).toBe(false);
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

  // ALPHA, BETA, DELTA, EPSILON (forced answer), ETA (empty verdict → string match) and IOTA are right;
  // ZETA never answers, THETA answers wrong after the placeholder, KAPPA's answer is cut at its first "]".
  const expected = {
    correct: 6, total: 10, accuracy: 0.6,
    single: { correct: 4, total: 7 }, set: { correct: 2, total: 3 },
    unanswered: 1, steps: 20, searches: 10, searchErrors: 0, forcedAnswers: 1,
    judgeCalls: 10, judgeFallbacks: 1,
  };

  it('scores the scripted agent 60 through the search API (key set), stopping the served model', async () => {
    Object.assign(process.env, { A2RL_SEARCH_API_KEY: 'test-key', A2RL_SEARCH_URL: `${api.base}/search` });
    const result = await deepsearchqa.evaluate(path.join(fixtures, 'model'), privateDir, undefined, ctx);
    expect(result.score).toBe(60);
    expect(result.details).toMatchObject({ ...expected, searchBackend: 'api' });
    expect(api.requests).toHaveLength(10);
    expect(stopped).toEqual([path.join(fixtures, 'model')]);
  });

  it('scores the same through the keyless fallback when no key is set', async () => {
    delete process.env.A2RL_SEARCH_API_KEY;
    process.env.A2RL_SEARCH_FALLBACK_URL = `${ddg.base}/html/`;
    const result = await deepsearchqa.evaluate(path.join(fixtures, 'model'), privateDir, undefined, ctx);
    expect(result.score).toBe(60);
    expect(result.details).toMatchObject({ ...expected, searchBackend: 'duckduckgo-html' });
    expect(ddg.requests).toHaveLength(10);
  });

  it('falls back to string matching for every question when the judge cannot be reached', async () => {
    process.env.A2RL_SEARCH_FALLBACK_URL = `${ddg.base}/html/`;
    const result = await deepsearchqa.evaluate(path.join(fixtures, 'model'), privateDir, undefined, { ...ctx, judge: { baseUrl: 'http://127.0.0.1:1', model: 'judge' } });
    expect(result.score).toBe(50);
    expect(result.details).toMatchObject({ correct: 5, judgeFallbacks: 10 });
  });

  it('refuses to run without a judge, and blames a checkpoint without config.json on the agent', async () => {
    await expect(deepsearchqa.evaluate(path.join(fixtures, 'model'), privateDir, undefined, { ...ctx, judge: null })).rejects.toThrow(/A2RL_JUDGE_URL/);
    await expect(deepsearchqa.evaluate(root, privateDir, undefined, ctx)).rejects.toBeInstanceOf(InvalidCheckpointError);
  });

  it('materialises the split from the fetched 900-row CSV, and refuses a missing or different-sized one', async () => {
    const datasetDir = path.join(root, 'dataset');
    await mkdir(path.join(datasetDir, 'base-model'), { recursive: true });
    await writeFile(path.join(datasetDir, 'base-model', 'config.json'), '{}');
    const fixtureCsv = await readFile(path.join(fixtures, DSQA_FILE), 'utf8');
    const filler = Array.from({ length: 890 }, (_, i) => `"Filler question ${i}?",Filler,F${i},Single Answer`).join('\n');
    await writeFile(path.join(datasetDir, DSQA_FILE), `${fixtureCsv}${filler}\n`);
    const paths: TaskPaths = { datasetDir, dataDir: path.join(root, 'data'), modelDir: path.join(root, 'model'), privateDir: path.join(root, 'p') };
    await deepsearchqa.materialize(paths);
    const rows = async (file: string) => (await readFile(file, 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as DsqaItem);
    const visible = await rows(path.join(paths.dataDir, VISIBLE_FILE));
    const hidden = await rows(path.join(paths.privateDir, PRIVATE_FILE));
    const all = await readDsqaCsv(datasetDir);
    expect([visible.length, hidden.length]).toEqual([100, 200]);
    expect({ visible, private: hidden }).toEqual(splitItems(all));
    expect(visible[0]).toEqual(all[420]);
    expect(hidden.at(-1)).toEqual(all[664]);
    expect(Object.keys(visible[0]!)).toEqual(['problem', 'problem_category', 'answer', 'answer_type']);

    const target = { dataDir: path.join(root, 'd2'), modelDir: path.join(root, 'm2'), privateDir: path.join(root, 'p2') };
    await expect(deepsearchqa.materialize({ ...target, datasetDir: fixtures })).rejects.toThrow(/holds 10 items; the paper's split orders the 900 of the upstream release/);
    await expect(deepsearchqa.materialize({ ...target, datasetDir: path.join(root, 'nowhere') })).rejects.toBeInstanceOf(DatasetMissingError);
    await expect(deepsearchqa.materialize({ ...target, datasetDir: path.join(root, 'nowhere') })).rejects.toThrow(/a2rl data fetch deepsearchqa/);
  });

  it('declares level 3 and its requirements (GPU, vllm, dataset, judge, search)', () => {
    expect(deepsearchqa.level).toBe(3);
    expect(deepsearchqa.reference).toBeUndefined();
    expect(deepsearchqa.requirements!.map((r) => r.kind)).toEqual(['gpu', 'command', 'dataset', 'judge', 'search']);
  });
});
