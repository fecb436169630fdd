import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { BaselineCache, BaselineCacheError } from './baseline-cache.js';

const key = { task: 'ref-arith', baseModel: 'tiny', evaluatorVersion: '1', baseModelHash: 'a'.repeat(64), taskKey: 'k1' };
const dirs: string[] = [];
const file = async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-baseline-'));
  dirs.push(dir);
  return path.join(dir, 'nested', 'baselines.json');
};
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe('BaselineCache', () => {
  it('grades once per (task, base model, evaluator version) and serves the cached score, also from a new instance', async () => {
    const f = await file();
    let grades = 0;
    const grade = async () => {
      grades++;
      return 12.5;
    };
    expect(await new BaselineCache(f).getOrGrade(key, grade)).toEqual({ score: 12.5, cached: false });
    expect(await new BaselineCache(f).getOrGrade(key, grade)).toEqual({ score: 12.5, cached: true });
    expect(await new BaselineCache(f).getOrGrade({ ...key, evaluatorVersion: '2' }, grade)).toEqual({ score: 12.5, cached: false });
    expect(grades).toBe(2);
    expect(Object.keys(JSON.parse(await readFile(f, 'utf8')).entries)).toHaveLength(2);
  });

  it('grades again when the base model content or the task key changes under the same names', async () => {
    const f = await file();
    let grades = 0;
    const grade = async () => ++grades;
    expect(await new BaselineCache(f).getOrGrade(key, grade)).toEqual({ score: 1, cached: false });
    expect(await new BaselineCache(f).getOrGrade({ ...key, baseModelHash: 'b'.repeat(64) }, grade)).toEqual({ score: 2, cached: false });
    expect(await new BaselineCache(f).getOrGrade({ ...key, taskKey: 'k2' }, grade)).toEqual({ score: 3, cached: false });
    expect(await new BaselineCache(f).getOrGrade(key, grade)).toEqual({ score: 1, cached: true });
  });

  it('shares one grading among concurrent callers for the same key', async () => {
    const cache = new BaselineCache(await file());
    let grades = 0;
    const slow = async () => {
      grades++;
      await new Promise((resolve) => setTimeout(resolve, 50));
      return 30;
    };
    const results = await Promise.all([cache.getOrGrade(key, slow), cache.getOrGrade(key, slow), cache.getOrGrade(key, slow)]);
    expect(grades).toBe(1);
    expect(results.map((r) => r.score)).toEqual([30, 30, 30]);
  });

  it('never caches a failed grading or an out-of-range score', async () => {
    const f = await file();
    const cache = new BaselineCache(f);
    await expect(cache.getOrGrade(key, async () => Promise.reject(new Error('evaluator down')))).rejects.toThrow('evaluator down');
    await expect(cache.getOrGrade(key, async () => 140)).rejects.toThrow(BaselineCacheError);
    await expect(cache.getOrGrade(key, async () => Number.NaN)).rejects.toThrow(/not a score in 0–100; not cached/);
    expect(await cache.getOrGrade(key, async () => 25)).toEqual({ score: 25, cached: false });
  });

  it('names the file and the remedy when the cache is corrupt', async () => {
    const f = await file();
    await new BaselineCache(f).getOrGrade(key, async () => 1);
    await writeFile(f, '{ not json');
    await expect(new BaselineCache(f).getOrGrade(key, async () => 1)).rejects.toThrow(/is not valid JSON .*delete it to re-grade/);
  });
});
