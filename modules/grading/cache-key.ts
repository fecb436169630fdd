import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import type { TaskPack } from '../../tasks/task-pack.js';
import { directoryHash, digestListHash, type HashMemo } from '../workspace-fs/content-hash.js';

/** Directory, inside a task's dataset dir, of the base checkpoint `a2rl data fetch` installs (tasks/paper-common/dataset.ts). */
const BASE_MODEL_DIR = 'base-model';
const DATASET_MANIFEST = 'manifest.json';

/**
 * Everything that decides what a materialised task holds and how it is graded. The task cache and
 * the baseline cache are reused only while every field is the same: a new base model (its content,
 * not its name), another training-sample count, another evaluation protocol or a re-fetched dataset
 * each make a new key.
 */
export interface TaskCacheKey {
  task: string;
  baseModel: string;
  evaluatorVersion: string;
  /** Content hash of the fetched base checkpoint the pack copies (`<datasets>/<task>/base-model`); null for generated packs. */
  baseModelSource: string | null;
  /** sha256 of the fetched dataset's manifest.json; null when there is none. */
  dataset: string | null;
  /** The pack's evaluation protocol (its version, or the hash of its protocol object); null when it declares none. */
  protocol: string | null;
  /** Environment parameters that change the data or the evaluation (see taskParameters), by name. */
  parameters: Record<string, string>;
}

/**
 * The environment variables that parameterise a pack: every `A2RL_<TASK>_*` (e.g.
 * A2RL_ALPACAEVAL_TRAIN_COUNT), the directories it requires (`env-var` requirements, e.g.
 * ALFWORLD_DATA) and any the pack names in `cacheParameters`. Unset ones are left out.
 */
export function taskParameters(task: TaskPack, env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const prefix = `A2RL_${task.id.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_`;
  const declared = (task as { cacheParameters?: readonly string[] }).cacheParameters ?? [];
  const required = (task.requirements ?? []).flatMap((r) => (r.kind === 'env-var' ? [r.name] : []));
  const names = new Set([...Object.keys(env).filter((n) => n.startsWith(prefix)), ...declared, ...required]);
  const out: Record<string, string> = {};
  for (const name of [...names].sort()) {
    const value = env[name]?.trim();
    if (value) out[name] = value;
  }
  return out;
}

/** The pack's protocol identity: `protocolVersion` when it states one, else the hash of its `protocol` object, else null. */
export function protocolIdentity(task: TaskPack): string | null {
  const t = task as { protocolVersion?: unknown; protocolHash?: unknown; protocol?: unknown };
  for (const v of [t.protocolHash, t.protocolVersion]) if (typeof v === 'string' && v) return v;
  if (t.protocol !== undefined && t.protocol !== null) return sha256(canonicalJson(t.protocol));
  return null;
}

export async function taskCacheKey(task: TaskPack, datasetsDir: string | undefined, opts: { env?: NodeJS.ProcessEnv; memo?: HashMemo } = {}): Promise<TaskCacheKey> {
  const dir = datasetsDir ? path.join(datasetsDir, task.id) : null;
  const source = dir ? path.join(dir, BASE_MODEL_DIR) : null;
  return {
    task: task.id,
    baseModel: task.baseModel,
    evaluatorVersion: task.evaluatorVersion,
    baseModelSource: source && (await isDir(source)) ? await directoryHash(source, opts.memo) : null,
    dataset: dir ? await fileHash(path.join(dir, DATASET_MANIFEST)) : null,
    protocol: protocolIdentity(task),
    parameters: taskParameters(task, opts.env),
  };
}

/** A short, stable id of a key (sha256 of its canonical JSON). */
export function keyHash(key: object): string {
  return sha256(canonicalJson(key));
}

/**
 * The content hash of the base model a materialised task gives the agent, from the task's manifest
 * (entries under `models/<baseModel>/`): what is graded as the baseline, hashed once at materialisation.
 */
export function baseModelHash(manifest: ReadonlyArray<{ path: string; size: number; sha256: string }>, baseModel: string): string {
  const prefix = `models/${baseModel}/`;
  return digestListHash(manifest.filter((e) => e.path.startsWith(prefix)).map((e) => ({ ...e, path: e.path.slice(prefix.length) })));
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

async function fileHash(file: string): Promise<string | null> {
  try {
    return createHash('sha256').update(await readFile(file)).digest('hex');
  } catch {
    return null;
  }
}

async function isDir(p: string): Promise<boolean> {
  try {
    return (await stat(p)).isDirectory();
  } catch {
    return false;
  }
}
