import { cp, mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { testEvaluationContext } from '../../test/servers/openai-test-server.js';
import { DatasetMissingError } from '../paper-common/dataset.js';
import { EvaluatorError, InvalidCheckpointError, type TaskPaths } from '../task-pack.js';
import { extractAnswer, goldAnswer, isCorrect, NO_PREDICTION } from './extract.js';
import { gsm8k, gsm8kPrompt } from './index.js';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');

describe('GSM8K answer extraction (OpenCompass gsm8k_postprocess, gsm8k_dataset_postprocess, Gsm8kEvaluator)', () => {
  it.each([
    ['reasoning 3 + 4 = 7\n#### 12', '12'],
    ['The answer is 201\n', '201'],
    ['He spends $1,375.', '375'],
    ['each piece is 2.25 meters', '2.25'],
    ['3 - 11 = -8', '-8'],
    ['The answer is 4\n\nQuestion: Tom has 7 apples', '4'],
    ['<think>maybe 10</think>The answer is 12', '12'],
    ['10 then 11</think> so 12', '12'],
    ['7.0', '7.0'],
  ])('%j → %s', (reply, expected) => {
    expect(extractAnswer(reply)).toBe(expected);
  });

  it('predicts NULL, a wrong answer, when no number comes before the first "Question:"', () => {
    expect(extractAnswer('I am not sure how to solve this.')).toBe(NO_PREDICTION);
    expect(extractAnswer('Question: 5 apples')).toBe(NO_PREDICTION);
    expect(isCorrect(NO_PREDICTION, '0')).toBe(false);
  });

  it('compares |float(prediction) − int(reference)| < 1e-6, and a non-integer reference only as the same string', () => {
    expect(isCorrect('40.0', '40')).toBe(true);
    expect(isCorrect('-8', '-8')).toBe(true);
    expect(isCorrect('8', '-8')).toBe(false);
    expect(isCorrect('2.25', '2.25')).toBe(true);
    expect(isCorrect('2.250', '2.25')).toBe(false);
    expect(isCorrect('375', '1375')).toBe(false);
  });

  it('reads the reference after the first "#### " with commas removed, and refuses an answer without one', () => {
    expect(goldAnswer('3*7=<<3*7=21>>21\n#### 21')).toBe('21');
    expect(goldAnswer('x\n#### 1,200')).toBe('1200');
    expect(() => goldAnswer('no marker 5')).toThrow(/####/);
  });

  it('sends the four fixed OpenCompass few-shot rounds, then the question, exactly as gsm8k_gen_1d7fe4 renders them', () => {
    const messages = gsm8kPrompt('What is 2 + 2?');
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user']);
    expect(messages.at(-1)).toEqual({ role: 'user', content: "Question: What is 2 + 2?\nLet's think step by step\nAnswer:" });
    expect(messages[0]!.content).toMatch(/^Question: Angelo and Melanie want to plan how many hours .* 30 minutes for lunch each day\?\nLet's think step by step\nAnswer:$/s);
    expect(messages.filter((m) => m.role === 'assistant').map((m) => m.content.split('\n').at(-2))).toEqual([
      'The answer is 4', 'The answer is 201', 'The answer is 140', 'The answer is 146',
    ]);
    expect(messages).toMatchSnapshot();
  });
});

describe('the gsm8k pack on the fixture dataset', () => {
  let root: string;
  let paths: TaskPaths;
  const servers: string[] = [];
  const stopped: string[] = [];
  const ctx = testEvaluationContext({ started: servers, stopped });

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-gsm8k-'));
    paths = { datasetDir: fixtures, dataDir: path.join(root, 'data'), modelDir: path.join(root, 'model'), privateDir: path.join(root, 'private') };
    await gsm8k.materialize(paths);
  });
  afterAll(() => rm(root, { recursive: true, force: true }));
  beforeAll(() => {
    servers.length = 0;
    stopped.length = 0;
  });

  it('puts the train split in data/ and the test split in the private dir, row for row', async () => {
    const rows = async (file: string) => (await readFile(file, 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as unknown);
    const train = await rows(path.join(paths.dataDir, 'train.jsonl'));
    const test = await rows(path.join(paths.privateDir, 'test.jsonl'));
    expect(train).toEqual(await rows(path.join(fixtures, 'train.jsonl')));
    expect(test).toEqual(await rows(path.join(fixtures, 'test.jsonl')));
    expect([train.length, test.length]).toEqual([12, 8]);
    expect(await readdir(paths.dataDir)).toEqual(['train.jsonl']);
    expect((await readdir(paths.modelDir)).sort()).toEqual(['answers.json', 'config.json']);
  });

  it('scores the base checkpoint at 2/8 and the better one at 6/8 as OpenCompass would ($1,375 reads as 375, 2.5 ≠ 2.25), stopping each server', async () => {
    const base = await gsm8k.evaluate(paths.modelDir, paths.privateDir, undefined, ctx);
    expect(base.score).toBe(25);
    expect(base.details).toMatchObject({ correct: 2, total: 8, unanswered: 3 });
    const good = await gsm8k.evaluate(path.join(fixtures, 'good-model'), paths.privateDir, undefined, ctx);
    expect(good.score).toBe(75);
    expect(good.details).toMatchObject({ correct: 6, total: 8, unanswered: 0 });
    expect(stopped).toEqual([paths.modelDir, path.join(fixtures, 'good-model')]);
  });

  it('refuses a checkpoint without config.json as the agent’s fault, before serving anything', async () => {
    const empty = path.join(root, 'empty-ckpt');
    await mkdir(empty);
    const before = servers.length;
    await expect(gsm8k.evaluate(empty, paths.privateDir, undefined, ctx)).rejects.toBeInstanceOf(InvalidCheckpointError);
    expect(servers.length).toBe(before);
  });

  it('fails as an evaluator error, not the agent’s, without a serving context', async () => {
    await expect(gsm8k.evaluate(paths.modelDir, paths.privateDir)).rejects.toBeInstanceOf(EvaluatorError);
  });

  it('fails materialisation with a message saying to run `a2rl data fetch gsm8k` when the dataset is missing', async () => {
    const partial = path.join(root, 'partial-dataset');
    await mkdir(partial);
    await cp(path.join(fixtures, 'train.jsonl'), path.join(partial, 'train.jsonl'));
    const target = { dataDir: path.join(root, 'd2'), modelDir: path.join(root, 'm2'), privateDir: path.join(root, 'p2') };
    for (const datasetDir of [path.join(root, 'nowhere'), partial]) {
      const attempt = gsm8k.materialize({ ...target, datasetDir });
      await expect(attempt).rejects.toBeInstanceOf(DatasetMissingError);
      await expect(gsm8k.materialize({ ...target, datasetDir })).rejects.toThrow(/a2rl data fetch gsm8k/);
    }
  });

  it('declares level 1 and what the machine needs (GPU, vllm, the dataset)', () => {
    expect(gsm8k.level).toBe(1);
    expect(gsm8k.reference).toBeUndefined();
    expect(gsm8k.requirements!.map((r) => r.kind)).toEqual(['gpu', 'command', 'dataset']);
  });
});
