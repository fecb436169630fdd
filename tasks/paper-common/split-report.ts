import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseCsv } from './csv.js';
import { loadProtocol, ProtocolError, type EvalProtocol } from './protocol.js';
import { loadPermutation, rowsRecipe, splitIndices } from './split-rows.js';

/** What `a2rl data split <task>` prints: the source rows (0-based, fetched file order) of each side. */
export interface SplitReport {
  task: string;
  visible: number[];
  private: number[];
  /** The file each side's indices refer to. */
  files: { visible: string; private: string };
  /** `fetched`: row counts read from the fetched files; `expected`: the upstream release's sizes (not fetched here). */
  rowCounts: 'fetched' | 'expected';
  recipe: string;
}

/** The task's split is its environment's own (ALFWorld games, WebShop goals), not rows a2rl picks. */
export class SplitNotDerivedError extends Error {
  override readonly name = 'SplitNotDerivedError';
}

/**
 * The split of `taskId` per its protocol: for each file, the row count of the fetched copy under
 * `datasetDir` when it is there (else the upstream size the protocol records), then the protocol's ranges.
 */
export async function splitReport(taskId: string, datasetDir: string | null, env: NodeJS.ProcessEnv = process.env, protocol: EvalProtocol = loadProtocol(taskId)): Promise<SplitReport> {
  if (protocol.split.kind !== 'rows') throw new SplitNotDerivedError(`${taskId}: the split is not derived by a2rl: ${protocol.split.recipe}`);
  const recipe = rowsRecipe(protocol);
  const files = [...new Set([recipe.visible.file, recipe.private.file])];
  const counted = await Promise.all(files.map((f) => (datasetDir ? countRows(path.join(datasetDir, f)) : Promise.resolve(null))));
  const fetched = counted.every((c) => c !== null);
  const rows = Object.fromEntries(files.map((f, i) => [f, fetched ? counted[i]! : recipe.expectedRows[f]!]));
  const permutation = recipe.permutation ? loadPermutation(taskId, recipe) : undefined;
  const indices = splitIndices(recipe, rows, { permutation, env });
  return { task: taskId, ...indices, files: { visible: recipe.visible.file, private: recipe.private.file }, rowCounts: fetched ? 'fetched' : 'expected', recipe: recipe.recipe };
}

/** Rows of a dataset file by its kind: JSON Lines (non-blank lines), a JSON array, or CSV records after the header; null when absent. */
export async function countRows(file: string): Promise<number | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return null;
  }
  if (file.endsWith('.jsonl')) return text.split('\n').filter((l) => l.trim() !== '').length;
  if (file.endsWith('.csv')) return Math.max(0, parseCsv(text).length - 1);
  if (file.endsWith('.json')) {
    const parsed: unknown = JSON.parse(text);
    if (!Array.isArray(parsed)) throw new ProtocolError(`${file} is not a JSON array`);
    return parsed.length;
  }
  throw new ProtocolError(`${file}: no row counter for this kind of file`);
}
