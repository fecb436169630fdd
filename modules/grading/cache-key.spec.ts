import { cp, mkdir, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { TaskPack, TaskPaths } from '../../tasks/task-pack.js';
import { materializeTask } from './task-cache.js';
import { BaselineCache } from './baseline-cache.js';
import { baseModelHash, keyHash, taskCacheKey, taskParameters } from './cache-key.js';
import { directoryHash, HashMemo } from '../workspace-fs/content-hash.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-cache-key-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

let n = 0;
const fresh = async () => mkdtemp(path.join(root, `d${n++}-`));

/** A paper-like pack: copies the fetched `base-model/` and writes as many training rows as A2RL_CACHEPACK_TRAIN_COUNT says. */
function copyingPack(extra: Partial<TaskPack> = {}): TaskPack & { materializations: number } {
  return {
    id: 'cachepack', level: 1, title: 'cache pack', baseModel: 'base-model', evaluatorVersion: '1', description: '', materializations: 0,
    ...extra,
    async materialize(paths: TaskPaths) {
      this.materializations++;
      await cp(path.join(paths.datasetDir!, 'base-model'), paths.modelDir, { recursive: true });
      const count = Number(process.env.A2RL_CACHEPACK_TRAIN_COUNT ?? 2);
      await writeFile(path.join(paths.dataDir, 'train.jsonl'), Array.from({ length: count }, (_, i) => `{"i":${i}}\n`).join(''));
      await writeFile(path.join(paths.privateDir, 'eval.jsonl'), '{"q":1}\n');
    },
    async evaluate() {
      return { score: 1, details: {} };
    },
  };
}

async function datasets(weights: string): Promise<string> {
  const dir = await fresh();
  await mkdir(path.join(dir, 'cachepack', 'base-model'), { recursive: true });
  await writeFile(path.join(dir, 'cachepack', 'base-model', 'config.json'), '{}');
  await writeFile(path.join(dir, 'cachepack', 'base-model', 'model.safetensors'), weights);
  return dir;
}

describe('content hash', () => {
  it('depends on paths, sizes and contents only, and is memoised by path, mtime and size', async () => {
    const [a, b] = [await fresh(), await fresh()];
    for (const d of [a, b]) {
      await mkdir(path.join(d, 'sub'));
      await writeFile(path.join(d, 'sub', 'w.bin'), 'weights');
    }
    expect(await directoryHash(a)).toBe(await directoryHash(b));
    const file = path.join(a, 'sub', 'w.bin');
    await utimes(file, 1_700_000_000, 1_700_000_000); // whole seconds: restorable exactly below
    const memo = new HashMemo(path.join(root, `memo-${n++}.json`));
    const before = await directoryHash(a, memo);
    expect(Object.keys(JSON.parse(await readFile(memo.file!, 'utf8')).files)).toEqual([path.join(a, 'sub', 'w.bin')]);
    // Same size and mtime: the memo answers without reading (so the stale digest shows).
    await writeFile(file, 'WEIGHTS');
    await utimes(file, 1_700_000_000, 1_700_000_000);
    expect(await directoryHash(a, new HashMemo(memo.file))).toBe(before);
    expect(await directoryHash(a)).not.toBe(before); // an unmemoised read sees the change
  });
});

describe('cache keys of materialised tasks and baselines', () => {
  it('re-materialises the task and grades the baseline again when the base model changes under the same name', async () => {
    const taskCache = await fresh();
    const data = await datasets('v1 weights');
    const pack = copyingPack();
    const cache = new BaselineCache(path.join(taskCache, '..', `baselines-${n++}.json`));
    let gradings = 0;
    const baseline = async () => {
      const m = await materializeTask(pack, taskCache, data);
      const key = { task: pack.id, baseModel: pack.baseModel, evaluatorVersion: pack.evaluatorVersion, baseModelHash: baseModelHash(m.manifest, pack.baseModel), taskKey: m.cacheKey };
      return cache.getOrGrade(key, async () => ++gradings * 10);
    };
    expect(await baseline()).toEqual({ score: 10, cached: false });
    expect(await baseline()).toEqual({ score: 10, cached: true });
    expect(pack.materializations).toBe(1);

    await writeFile(path.join(data, 'cachepack', 'base-model', 'model.safetensors'), 'v2 weights, longer');
    expect(await baseline()).toEqual({ score: 20, cached: false });
    expect(pack.materializations).toBe(2);
    expect(await readFile(path.join(taskCache, 'cachepack', 'model', 'model.safetensors'), 'utf8')).toBe('v2 weights, longer');
  });

  it('changes with a training-sample count, the evaluation protocol and the evaluator version, not with unrelated variables', async () => {
    const data = await datasets('w');
    const pack = copyingPack();
    const key = async (env: NodeJS.ProcessEnv, p: TaskPack = pack) => keyHash(await taskCacheKey(p, data, { env }));
    const base = await key({});
    expect(await key({ A2RL_OTHER: 'x', A2RL_CACHEPACK_TRAIN_COUNT: '' })).toBe(base);
    expect(await key({ A2RL_CACHEPACK_TRAIN_COUNT: '500' })).not.toBe(base);
    expect(await key({}, copyingPack({ evaluatorVersion: '2' }))).not.toBe(base);
    const withProtocol = copyingPack() as TaskPack & { protocol?: unknown };
    withProtocol.protocol = { maxTokens: 256, stop: ['\n'] } as never;
    const p1 = await key({}, withProtocol);
    withProtocol.protocol = { maxTokens: 100, stop: ['\n'] } as never;
    expect(new Set([base, p1, await key({}, withProtocol)]).size).toBe(3);
    expect(taskParameters({ ...pack, requirements: [{ kind: 'env-var', name: 'ALFWORLD_DATA', hint: '' }] }, { ALFWORLD_DATA: '/data/alfworld', A2RL_CACHEPACK_TRAIN_COUNT: '7' })).toEqual({
      A2RL_CACHEPACK_TRAIN_COUNT: '7',
      ALFWORLD_DATA: '/data/alfworld',
    });
  });

  it('re-materialises when the training-sample count changes', async () => {
    const [taskCache, data] = [await fresh(), await datasets('w')];
    const pack = copyingPack();
    const first = await materializeTask(pack, taskCache, data);
    process.env.A2RL_CACHEPACK_TRAIN_COUNT = '5';
    try {
      const second = await materializeTask(pack, taskCache, data);
      expect(second.cacheKey).not.toBe(first.cacheKey);
      expect((await readFile(path.join(second.dataDir, 'train.jsonl'), 'utf8')).trim().split('\n')).toHaveLength(5);
    } finally {
      delete process.env.A2RL_CACHEPACK_TRAIN_COUNT;
    }
    expect(pack.materializations).toBe(2);
  });
});
