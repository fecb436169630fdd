import { cp, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidCheckpointError, type TaskPaths } from '../task-pack.js';

/** Directory name, inside a task's dataset dir, of the base checkpoint `a2rl data fetch` installs. */
export const BASE_MODEL_DIR = 'base-model';

/** A paper task's fetched data is absent or malformed: the operator must (re)run `a2rl data fetch`. */
export class DatasetMissingError extends Error {
  override readonly name = 'DatasetMissingError';
}

/**
 * The task's fetched files, `paths.datasetDir`: the harness passes `<datasets dir>/<taskId>`
 * (materializeTask's `datasetsDir`), so a pack never reads the configuration itself.
 */
export function datasetDirOf(taskId: string, paths: Pick<TaskPaths, 'datasetDir'>): string {
  if (!paths.datasetDir) throw new Error(`the ${taskId} task pack needs its dataset directory, and the harness gave none (materializeTask without datasetsDir)`);
  return paths.datasetDir;
}

const fetchHint = (taskId: string) => `run \`a2rl data fetch ${taskId}\` (or \`a2rl data fetch ${taskId} --from <dir>\` on an air-gapped machine)`;

/** Reads a JSON Lines file of the fetched dataset; a missing or unparsable file says how to fetch it. */
export async function readDatasetJsonl<T>(taskId: string, datasetDir: string, file: string): Promise<T[]> {
  const path = join(datasetDir, file);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    throw new DatasetMissingError(`the ${taskId} dataset is missing ${path}: ${fetchHint(taskId)}`);
  }
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, i) => {
      try {
        return JSON.parse(line) as T;
      } catch {
        throw new DatasetMissingError(`${path} line ${i + 1} is not JSON (corrupt download?): ${fetchHint(taskId)}`);
      }
    });
}

/** Copies `<datasetDir>/base-model/` (a Hugging Face checkpoint directory) to the pack's model dir. */
export async function copyBaseModel(taskId: string, datasetDir: string, modelDir: string): Promise<void> {
  const source = join(datasetDir, BASE_MODEL_DIR);
  if (!(await isDir(source))) throw new DatasetMissingError(`the ${taskId} base checkpoint ${source} is missing: ${fetchHint(taskId)}`);
  await cp(source, modelDir, { recursive: true, dereference: true });
}

/** A servable checkpoint is a directory with a Hugging Face `config.json`; anything else is the agent's fault. */
export async function assertServableCheckpoint(checkpointDir: string): Promise<void> {
  if (!(await isDir(checkpointDir))) throw new InvalidCheckpointError(`checkpoint ${checkpointDir} is not a directory`);
  try {
    await stat(join(checkpointDir, 'config.json'));
  } catch {
    throw new InvalidCheckpointError('checkpoint has no config.json: save a full Hugging Face model directory (model.save_pretrained + tokenizer)');
  }
}

async function isDir(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}
