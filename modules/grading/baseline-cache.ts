import { randomUUID } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';

export interface BaselineKey {
  task: string;
  baseModel: string;
  evaluatorVersion: string;
  /** Content hash of the graded base model (cache-key.ts baseModelHash): another model under the same name is another key. */
  baseModelHash: string;
  /** keyHash of the task's TaskCacheKey: data parameters, evaluation protocol, fetched dataset. */
  taskKey: string;
}

interface CacheEntry extends BaselineKey {
  score: number;
  gradedAt: string;
}

export class BaselineCacheError extends Error {
  override readonly name = 'BaselineCacheError';
}

/**
 * Baseline scores graded once per key (task, base model name and content, evaluator version, the
 * task's data and protocol parameters), kept in a JSON file that
 * is replaced atomically (temp file, fsync, rename). A grading that fails is never cached; callers
 * asking concurrently for the same key share one grading. Every write re-reads the file first, so
 * entries written by another process are kept (a lost race only costs a re-grade).
 */
export class BaselineCache {
  private readonly grading = new Map<string, Promise<{ score: number; cached: boolean }>>();

  constructor(readonly file: string) {}

  async getOrGrade(key: BaselineKey, grade: () => Promise<number>): Promise<{ score: number; cached: boolean }> {
    const id = cacheId(key);
    const pending = this.grading.get(id);
    if (pending) return pending;
    const work = this.lookupOrGrade(id, key, grade);
    this.grading.set(id, work);
    try {
      return await work;
    } finally {
      this.grading.delete(id);
    }
  }

  private async lookupOrGrade(id: string, key: BaselineKey, grade: () => Promise<number>): Promise<{ score: number; cached: boolean }> {
    const hit = (await this.read())[id];
    if (hit) return { score: hit.score, cached: true };
    const score = await grade();
    if (typeof score !== 'number' || !Number.isFinite(score) || score < 0 || score > 100) {
      throw new BaselineCacheError(`baseline grading for ${describe(key)} returned ${String(score)}, not a score in 0–100; not cached`);
    }
    const entries = await this.read();
    entries[id] = { ...key, score, gradedAt: new Date().toISOString() };
    await this.write(entries);
    return { score, cached: false };
  }

  private async read(): Promise<Record<string, CacheEntry>> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw err;
    }
    try {
      const parsed = JSON.parse(text) as { entries?: Record<string, CacheEntry> };
      return parsed.entries ?? {};
    } catch (err) {
      throw new BaselineCacheError(`baseline cache ${this.file} is not valid JSON (${(err as Error).message}); delete it to re-grade baselines`);
    }
  }

  private async write(entries: Record<string, CacheEntry>): Promise<void> {
    const dir = path.dirname(this.file);
    await mkdir(dir, { recursive: true });
    const temp = path.join(dir, `.${path.basename(this.file)}.${randomUUID()}.tmp`);
    try {
      const handle = await open(temp, 'wx', 0o644);
      try {
        await handle.writeFile(`${JSON.stringify({ version: 1, entries }, null, 2)}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, this.file);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
    const dirHandle = await open(dir, 'r');
    try {
      await dirHandle.sync();
    } finally {
      await dirHandle.close();
    }
  }
}

function cacheId(key: BaselineKey): string {
  return JSON.stringify([key.task, key.baseModel, key.evaluatorVersion, key.baseModelHash, key.taskKey]);
}

function describe(key: BaselineKey): string {
  return `task ${key.task}, base model ${key.baseModel} (${key.baseModelHash.slice(0, 12)}), evaluator ${key.evaluatorVersion}`;
}
