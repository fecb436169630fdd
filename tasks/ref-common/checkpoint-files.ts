import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidCheckpointError } from '../task-pack.js';

/** Weight files above this size are refused before parsing: keeps evaluation bounded (< 1 s). */
const MAX_JSON_BYTES = 4 * 1024 * 1024;

/**
 * Reads and parses one JSON object file of a submitted checkpoint. Every failure is the agent's
 * (InvalidCheckpointError) and names the file and what to fix.
 */
export async function readCheckpointJson(checkpointDir: string, file: string): Promise<Record<string, unknown>> {
  const path = join(checkpointDir, file);
  let size: number;
  try {
    const info = await stat(path);
    if (!info.isFile()) throw new InvalidCheckpointError(`${file} in the checkpoint is not a regular file`);
    size = info.size;
  } catch (error) {
    if (error instanceof InvalidCheckpointError) throw error;
    throw new InvalidCheckpointError(`checkpoint has no ${file} (looked for ${path})`);
  }
  if (size > MAX_JSON_BYTES) {
    throw new InvalidCheckpointError(`${file} is ${size} bytes; the limit is ${MAX_JSON_BYTES}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(await readFile(path, 'utf8'));
  } catch (error) {
    throw new InvalidCheckpointError(`${file} is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidCheckpointError(`${file} must hold a JSON object`);
  }
  return value as Record<string, unknown>;
}

/** Checks `manifest.json` names the expected format, e.g. `a2rl-ref/ref-arith/1`. */
export async function assertManifest(checkpointDir: string, format: string): Promise<void> {
  const manifest = await readCheckpointJson(checkpointDir, 'manifest.json');
  if (manifest['format'] !== format) {
    throw new InvalidCheckpointError(
      `manifest.json format is ${JSON.stringify(manifest['format'])}; this task loads "${format}"`,
    );
  }
}

/** Writes rows as JSON Lines (one trailing newline, stable key order as given). */
export async function writeJsonl(path: string, rows: readonly object[]): Promise<void> {
  await writeFile(path, rows.map((row) => JSON.stringify(row)).join('\n') + '\n');
}

export async function readJsonl<T>(path: string): Promise<T[]> {
  const text = await readFile(path, 'utf8');
  return text.split('\n').filter((line) => line.trim() !== '').map((line) => JSON.parse(line) as T);
}

/** Writes a checkpoint directory: manifest.json plus one weights file. */
export async function writeCheckpoint(dir: string, manifest: object, weightsFile: string, weights: object): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  await writeFile(join(dir, weightsFile), JSON.stringify(weights, null, 2) + '\n');
}
