import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import type { TaskPack, TaskPaths } from '../task-pack.js';

/** Test helpers shared by the reference-pack specs. */

/** sha256 over every file under `roots` (relative path + bytes, in sorted order). */
export async function hashTree(roots: readonly string[]): Promise<string> {
  const hash = createHash('sha256');
  for (const [i, root] of roots.entries()) {
    const files = (await readdir(root, { recursive: true, withFileTypes: true }))
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name))
      .sort();
    for (const file of files) hash.update(`${i}:${relative(root, file)}\0`).update(await readFile(file));
  }
  return hash.digest('hex');
}

/** A fresh workspace-like layout with the pack materialised into it. */
export async function materializeInTemp(pack: TaskPack): Promise<{ root: string; paths: TaskPaths; workspace: string; outputDir: string }> {
  const root = await mkdtemp(join(tmpdir(), `a2rl-${pack.id}-`));
  const workspace = join(root, 'workspace');
  const paths: TaskPaths = {
    dataDir: join(workspace, 'data'),
    modelDir: join(workspace, 'models', pack.baseModel),
    privateDir: join(root, 'private'),
  };
  await pack.materialize(paths);
  return { root, paths, workspace, outputDir: join(workspace, 'output') };
}

/** Runs `node <script> <args>` and resolves with its exit code and output. */
export function runNode(script: string, args: readonly string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

/** The environment the harness gives an agent (issue 3), for a workspace laid out by materializeInTemp. */
export function agentEnv(pack: TaskPack, layout: { workspace: string; paths: TaskPaths; outputDir: string }, gradingUrl: string): Record<string, string> {
  return {
    TASK: pack.id,
    BASE_MODEL: pack.baseModel,
    WORKSPACE: layout.workspace,
    MODEL_PATH: layout.paths.modelDir,
    DATA_PATH: layout.paths.dataDir,
    OUTPUT_DIR: layout.outputDir,
    GRADING_SERVER_URL: gradingUrl,
  };
}
