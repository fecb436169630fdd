import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startOpenAiTestServer, testEvaluationContext } from '../../test/servers/openai-test-server.js';
import { DatasetMissingError } from '../paper-common/dataset.js';
import { EvaluatorError, InvalidCheckpointError, type EvaluationContext, type OpenAiEndpoint, type TaskPaths } from '../task-pack.js';
import { alpacaeval, TRAIN_COUNT_VARIABLE } from './index.js';
import { judgePrompt, modelShownFirst, parseVerdict, winRates } from './judging.js';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');

describe('AlpacaEval verdict parsing', () => {
  it.each([
    ['Output (a)', 'a'],
    ['Output (b)', 'b'],
    ['  output (B).\n', 'b'],
    ['(a)', 'a'],
    ['b', 'b'],
    ['**Output (a)**', 'a'],
    ['`Output (b)`', 'b'],
  ])('%j → %s', (reply, verdict) => {
    expect(parseVerdict(reply)).toBe(verdict);
  });

  it.each([
    'Output (a) is better because it is more complete.',
    'Both are good.',
    'Output (a) and Output (b)',
    'Output (c)',
    'tie',
    '',
    'I cannot decide.',
  ])('%j is a judge error, not a verdict', (reply) => {
    expect(parseVerdict(reply)).toBeNull();
  });

  it('shows the two outputs under (a) and (b) in the order given, after the instruction', () => {
    const [system, user] = judgePrompt('Say hi.', 'FIRST', 'SECOND');
    expect(system!.role).toBe('system');
    expect(user!.content).toMatch(/^## Instruction\n\nSay hi\.\n\n## Output \(a\)\n\nFIRST\n\n## Output \(b\)\n\nSECOND\n\n## Verdict/);
  });

  it('draws the order per instruction, the same on every call', () => {
    const draws = Array.from({ length: 64 }, (_, i) => modelShownFirst(`instruction ${i}`));
    expect(draws).toEqual(Array.from({ length: 64 }, (_, i) => modelShownFirst(`instruction ${i}`)));
    expect(draws.filter(Boolean).length).toBeGreaterThan(16);
    expect(draws.filter((d) => !d).length).toBeGreaterThan(16);
  });
});

describe('AlpacaEval win rates', () => {
  it('with no length differences, the LC win rate is the L2-shrunk mean preference (hand-checked)', () => {
    // θ solves sigmoid(θ) − 0.75 + 0.01·θ = 0 → θ ≈ 1.043, sigmoid(θ) ≈ 0.7394.
    const rates = winRates([1, 1, 1, 0].map((p) => ({ preference: p as 0 | 1, lengthDiff: 0 })));
    expect(rates.winRate).toBe(0.75);
    expect(rates.lcWinRate).toBeCloseTo(0.7394, 3);
    expect(rates.lengthCoefficient).toBe(0);
  });

  it('discounts wins that come with longer outputs (hand-checked against the unpenalised two-group fit)', () => {
    // Δlen = [1,1,1,1,−2,−2] (sd √2): long group wins 3/4, short group 1/2. Without the penalty,
    // θ + φ·tanh(1/√2) = ln 3 and θ + φ·tanh(−√2) = 0 → φ ≈ 0.7337, θ ≈ 0.6518, sigmoid(θ) ≈ 0.657; the
    // 0.01 L2 penalty moves the optimum to θ ≈ 0.623, φ ≈ 0.675 (checked by a grid search of the objective).
    const prefs = [1, 1, 1, 0, 1, 0] as const;
    const diffs = [1, 1, 1, 1, -2, -2];
    const rates = winRates(prefs.map((p, i) => ({ preference: p, lengthDiff: diffs[i]! })));
    expect(rates.winRate).toBeCloseTo(4 / 6, 10);
    expect(rates.lcWinRate).toBeCloseTo(0.6509, 3);
    expect(rates.lcWinRate).toBeLessThan(0.657);
    expect(rates.lengthCoefficient).toBeCloseTo(0.675, 2);
  });

  it('leaves judge errors out of both rates and counts them', () => {
    const rates = winRates([
      { preference: 1, lengthDiff: 0 },
      { preference: null, lengthDiff: 500 },
      { preference: 0, lengthDiff: 0 },
    ]);
    expect(rates).toMatchObject({ winRate: 0.5, judged: 2, judgeErrors: 1 });
    expect(rates.lcWinRate).toBeCloseTo(0.5, 10);
  });
});

/** A scripted judge: `decide(first, second)` is its reply; every reply reports 50 + 3 tokens of usage. */
async function startJudge(decide: (first: string, second: string) => string): Promise<OpenAiEndpoint & { close(): Promise<void>; calls: number }> {
  const state = { calls: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      state.calls++;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { messages: { content: string }[] };
      const prompt = body.messages.at(-1)!.content;
      const match = /## Output \(a\)\n\n([\s\S]*)\n\n## Output \(b\)\n\n([\s\S]*)\n\n## Verdict/.exec(prompt)!;
      const content = decide(match[1]!, match[2]!);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 50, completion_tokens: 3, total_tokens: 53 } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    model: 'scripted-judge',
    get calls() { return state.calls; },
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/** Prefers an answer over "I don't know.", else the longer output; ties go to (a). */
const contentJudge = (first: string, second: string): string => {
  const refuses = (o: string) => o.includes("I don't know");
  if (refuses(first) !== refuses(second)) return refuses(first) ? 'Output (b)' : 'Output (a)';
  return second.length > first.length ? 'Output (b)' : 'Output (a)';
};

describe('the alpacaeval pack on the fixture dataset', () => {
  let root: string;
  let paths: TaskPaths;
  let judges: Awaited<ReturnType<typeof startJudge>>[];
  const stopped: string[] = [];
  const contextWith = (judge: OpenAiEndpoint | null): EvaluationContext => testEvaluationContext({ stopped }, judge);

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-alpacaeval-'));
    paths = { datasetDir: fixtures, dataDir: path.join(root, 'data'), modelDir: path.join(root, 'model'), privateDir: path.join(root, 'private') };
    await alpacaeval.materialize(paths);
    judges = [];
    stopped.length = 0;
  });
  afterAll(async () => {
    await Promise.all(judges.map((j) => j.close()));
    await rm(root, { recursive: true, force: true });
  });
  const judge = async (decide: (first: string, second: string) => string) => {
    const j = await startJudge(decide);
    judges.push(j);
    return j;
  };

  it('puts the training instructions in data/ and the eval instructions with baseline outputs in the private dir', async () => {
    const train = (await readFile(path.join(paths.dataDir, 'alpaca_train.jsonl'), 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as unknown);
    expect(train).toEqual((await readFile(path.join(fixtures, 'alpaca_train.jsonl'), 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as unknown));
    expect(await readdir(paths.dataDir)).toEqual(['alpaca_train.jsonl']);
    const evalRows = JSON.parse(await readFile(path.join(paths.privateDir, 'eval.json'), 'utf8')) as { instruction: string; baseline: string }[];
    expect(evalRows).toHaveLength(6);
    expect(evalRows[3]).toEqual({ instruction: 'Suggest a name for a bakery that sells only bread.', baseline: 'Crumb & Crust.', dataset: 'a2rl-fixture' });
    expect((await readdir(paths.modelDir)).sort()).toEqual(['answers.json', 'config.json']);
  });

  it(`keeps only the first ${TRAIN_COUNT_VARIABLE} training instructions, and refuses a bad count naming the variable`, async () => {
    const target = { datasetDir: fixtures, dataDir: path.join(root, 'd-count'), modelDir: path.join(root, 'm-count'), privateDir: path.join(root, 'p-count') };
    process.env[TRAIN_COUNT_VARIABLE] = '3';
    try {
      await alpacaeval.materialize(target);
      process.env[TRAIN_COUNT_VARIABLE] = 'many';
      await expect(alpacaeval.materialize(target)).rejects.toThrow(TRAIN_COUNT_VARIABLE);
    } finally {
      delete process.env[TRAIN_COUNT_VARIABLE];
    }
    const lines = (await readFile(path.join(target.dataDir, 'alpaca_train.jsonl'), 'utf8')).trimEnd().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { instruction: string }).instruction)).toEqual([
      'List two colours that appear in a rainbow.', 'Rewrite the sentence in the passive voice.', 'Name a fruit that is yellow when ripe.',
    ]);
  });

  it('reads stanford_alpaca’s JSON array too, and refuses a parquet-only dataset saying how to convert it', async () => {
    const jsonOnly = path.join(root, 'json-dataset');
    await mkdir(path.join(jsonOnly, 'base-model'), { recursive: true });
    await writeFile(path.join(jsonOnly, 'alpaca_data.json'), JSON.stringify([{ instruction: 'Say hi.', input: '', output: 'Hi!' }]));
    await writeFile(path.join(jsonOnly, 'alpaca_eval_gpt4_baseline.json'), await readFile(path.join(fixtures, 'alpaca_eval_gpt4_baseline.json')));
    await writeFile(path.join(jsonOnly, 'base-model', 'config.json'), '{}');
    const target = { datasetDir: jsonOnly, dataDir: path.join(root, 'd-json'), modelDir: path.join(root, 'm-json'), privateDir: path.join(root, 'p-json') };
    await alpacaeval.materialize(target);
    expect(await readFile(path.join(target.dataDir, 'alpaca_train.jsonl'), 'utf8')).toBe('{"instruction":"Say hi.","input":"","output":"Hi!"}\n');

    const parquetOnly = path.join(root, 'parquet-dataset');
    await mkdir(parquetOnly);
    await writeFile(path.join(parquetOnly, 'alpaca_train.parquet'), 'PAR1');
    const attempt = alpacaeval.materialize({ ...target, datasetDir: parquetOnly });
    await expect(attempt).rejects.toBeInstanceOf(DatasetMissingError);
    await expect(alpacaeval.materialize({ ...target, datasetDir: parquetOnly })).rejects.toThrow(/parquet.*alpaca_train\.jsonl/s);
  });

  it('scores each checkpoint by LC win rate against the baseline, sums judge tokens, records the order and stops the server', async () => {
    const j = await judge(contentJudge);
    const base = await alpacaeval.evaluate(paths.modelDir, paths.privateDir, undefined, contextWith(j));
    expect(base.details).toMatchObject({ winRate: 33.33, judged: 6, total: 6, judgeErrors: 0, judgeTokens: 6 * 53, judgeModel: 'scripted-judge', modelShownFirst: '101001' });
    const good = await alpacaeval.evaluate(path.join(fixtures, 'good-model'), paths.privateDir, undefined, contextWith(j));
    expect(good.details).toMatchObject({ winRate: 83.33, judged: 6, judgeErrors: 0, judgeTokens: 6 * 53 });
    // The good model's wins all come with longer outputs: LC discounts them.
    expect(good.score).toBe(good.details.lcWinRate);
    expect(good.score).toBeLessThan(83.33);
    expect(good.score).toBeGreaterThan(base.score);
    expect(j.calls).toBe(12);
    expect(stopped).toEqual([paths.modelDir, path.join(fixtures, 'good-model')]);
  });

  it('maps the judge’s (a)/(b) back through the drawn order: a judge that always says (a) gives the model exactly its model-first instructions', async () => {
    const result = await alpacaeval.evaluate(path.join(fixtures, 'good-model'), paths.privateDir, undefined, contextWith(await judge(() => 'Output (a)')));
    expect(result.details.modelShownFirst).toBe('101001');
    expect(result.details.winRate).toBe(50);
  });

  it('grades the same checkpoint to the same score twice', async () => {
    const j = await judge(contentJudge);
    const first = await alpacaeval.evaluate(path.join(fixtures, 'good-model'), paths.privateDir, undefined, contextWith(j));
    const second = await alpacaeval.evaluate(path.join(fixtures, 'good-model'), paths.privateDir, undefined, contextWith(j));
    expect(second).toEqual(first);
  });

  it('fails as an evaluator error when the judge replies garbage, never counting it as a win', async () => {
    const garbage = await startOpenAiTestServer({ answers: { rules: [], default: 'Both outputs have merit.' }, model: 'garbage-judge' });
    try {
      const attempt = alpacaeval.evaluate(path.join(fixtures, 'good-model'), paths.privateDir, undefined, contextWith(garbage));
      await expect(attempt).rejects.toBeInstanceOf(EvaluatorError);
      await expect(alpacaeval.evaluate(path.join(fixtures, 'good-model'), paths.privateDir, undefined, contextWith(garbage))).rejects.toThrow(/6 of 6 instructions.*Both outputs have merit/);
    } finally {
      await garbage.close();
    }
    // One unparseable reply in six is above the 5% allowance too.
    const flaky = await judge((first, second) => (first.includes('3.11 miles') && second.includes('3.11 miles') ? 'hmm' : contentJudge(first, second)));
    await expect(alpacaeval.evaluate(path.join(fixtures, 'good-model'), paths.privateDir, undefined, contextWith(flaky))).rejects.toThrow(/1 of 6 instructions/);
  });

  it('refuses to grade without a judge, naming A2RL_JUDGE_URL and A2RL_JUDGE_MODEL, before serving anything', async () => {
    const before = stopped.length;
    const attempt = alpacaeval.evaluate(paths.modelDir, paths.privateDir, undefined, contextWith(null));
    await expect(attempt).rejects.toBeInstanceOf(EvaluatorError);
    await expect(alpacaeval.evaluate(paths.modelDir, paths.privateDir, undefined, contextWith(null))).rejects.toThrow(/A2RL_JUDGE_URL.*A2RL_JUDGE_MODEL/);
    expect(stopped.length).toBe(before);
  });

  it('refuses a checkpoint without config.json as the agent’s fault', async () => {
    const empty = path.join(root, 'empty-ckpt');
    await mkdir(empty);
    await expect(alpacaeval.evaluate(empty, paths.privateDir, undefined, contextWith(await judge(contentJudge)))).rejects.toBeInstanceOf(InvalidCheckpointError);
  });

  it('declares level 2 and what the machine needs (GPU, vllm, the dataset, a judge)', () => {
    expect(alpacaeval.level).toBe(2);
    expect(alpacaeval.reference).toBeUndefined();
    expect(alpacaeval.requirements!.map((r) => r.kind)).toEqual(['gpu', 'command', 'dataset', 'judge']);
  });
});
