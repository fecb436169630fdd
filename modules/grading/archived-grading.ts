import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { artifactKey, type ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { EventData } from '../ledger/events/catalog.js';
import { materializeTask } from './task-cache.js';
import { createEvaluationContext } from '../serving/model-server.js';
import { loadServingConfig } from '../serving/serving.config.js';
import type { EvaluationContext, EvaluationResult, TaskPack } from '../../tasks/task-pack.js';
import { baseModelHash } from './cache-key.js';

type Manifest = EventData<'SubmissionReceived'>['manifest'];

/** Writes a checkpoint's files from the artifact store into `dir`, checking each one's sha256. */
export async function restoreCheckpoint(artifacts: ArtifactStore, manifest: Manifest, dir: string): Promise<void> {
  for (const entry of manifest) {
    const parts = entry.path.split('/');
    if (path.isAbsolute(entry.path) || parts.some((p) => p === '' || p === '.' || p === '..')) {
      throw new Error(`checkpoint path "${entry.path}" is not a plain relative path`);
    }
    const target = path.join(dir, ...parts);
    await mkdir(path.dirname(target), { recursive: true });
    const hash = createHash('sha256');
    const hashing = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        done(null, chunk);
      },
    });
    await pipeline(await artifacts.get(entry.sha256), hashing, createWriteStream(target, { flags: 'wx' }));
    const actual = hash.digest('hex');
    if (actual !== entry.sha256) throw new Error(`checkpoint file ${entry.path}: blob ${artifactKey(entry.sha256)} hashes to ${actual}`);
  }
}

export interface ArchivedGraderOptions {
  task: TaskPack;
  artifacts: ArtifactStore;
  /** The task cache (`$A2RL_HOME/tasks`): private sets and the base model a LoRA adapter is applied to. */
  taskCacheDir: string;
  datasetsDir?: string;
  /** Where checkpoints are restored (default: the OS temp dir). */
  tmpDir?: string;
  /** The run's WorkspacePrepared.dataManifest: the base model it gave the agent must be the one graded against now. */
  runManifest?: ReadonlyArray<{ path: string; size: number; sha256: string }>;
  /** Default: the configured serving (loadServingConfig) on 'cpu', with the task's base model. */
  context?: (baseModelDir: string) => EvaluationContext;
}

/** The task's base model now is not the one the run gave its agent: re-grading would grade against another model. */
export class BaseModelChangedError extends Error {
  override readonly name = 'BaseModelChangedError';
}

/**
 * Grades checkpoints archived by a run again (`a2rl regrade`, `a2rl verify --regrade`): each one is
 * restored from the artifact store into a fresh directory, graded by the task's evaluator on its
 * held-out set (the task cache, materialised if cold) and removed.
 */
export class ArchivedCheckpointGrader {
  private constructor(
    private readonly opts: ArchivedGraderOptions,
    readonly privateDir: string,
    readonly baseModelDir: string,
  ) {}

  static async open(opts: ArchivedGraderOptions): Promise<ArchivedCheckpointGrader> {
    const pack = await materializeTask(opts.task, opts.taskCacheDir, opts.datasetsDir);
    if (opts.runManifest?.some((e) => e.path.startsWith(`models/${opts.task.baseModel}/`))) {
      const [then, now] = [baseModelHash(opts.runManifest, opts.task.baseModel), baseModelHash(pack.manifest, opts.task.baseModel)];
      if (then !== now) {
        throw new BaseModelChangedError(`the ${opts.task.id} base model is not the one this run was given (content ${now.slice(0, 12)}, the run's ${then.slice(0, 12)}): restore it before re-grading`);
      }
    }
    return new ArchivedCheckpointGrader(opts, pack.privateDir, pack.modelDir);
  }

  async grade(manifest: Manifest, signal?: AbortSignal): Promise<EvaluationResult> {
    const root = await mkdtemp(path.join(this.opts.tmpDir ?? os.tmpdir(), 'a2rl-regrade-'));
    try {
      const dir = path.join(root, 'checkpoint');
      await restoreCheckpoint(this.opts.artifacts, manifest, dir);
      const ctx = this.opts.context?.(this.baseModelDir) ?? createEvaluationContext(loadServingConfig(), 'cpu', {}, { baseModelDir: this.baseModelDir });
      return await this.opts.task.evaluate(dir, this.privateDir, signal, ctx);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  }
}
