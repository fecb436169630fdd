import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../modules/settings/package-root.js';
import { ProtocolError, type EvalProtocol, type RowRange, type SplitRecipe } from './protocol.js';

type RowsRecipe = Extract<SplitRecipe, { kind: 'rows' }>;

/** The source row indices (0-based, in the fetched file's order) of a task's visible and private items. */
export interface SplitIndices {
  visible: number[];
  private: number[];
}

/** The protocol's row split, or a ProtocolError for a task whose split is its environment's own. */
export function rowsRecipe(protocol: EvalProtocol): RowsRecipe {
  if (protocol.split.kind !== 'rows') throw new ProtocolError(`${protocol.task}'s split is not derived by a2rl: ${protocol.split.recipe}`);
  return protocol.split;
}

/**
 * Reads the shipped index list named by the recipe (`tasks/<task>/<file>`, `{"permutation": [...]}`)
 * and checks it: a permutation of 0..length-1 whose canonical JSON (`[i,j,…]`, no spaces) has the
 * recorded sha256. A mismatch is a broken checkout, never silently used.
 */
export function loadPermutation(taskId: string, recipe: RowsRecipe, root = packageRoot()): number[] {
  const spec = recipe.permutation;
  if (!spec) throw new ProtocolError(`tasks/${taskId}/protocol.json names no permutation`);
  const file = path.join(root, 'tasks', taskId, spec.file);
  let perm: unknown;
  try {
    perm = (JSON.parse(readFileSync(file, 'utf8')) as { permutation?: unknown }).permutation;
  } catch (err) {
    throw new ProtocolError(`${file}: ${(err as Error).message}`);
  }
  if (!Array.isArray(perm) || perm.length !== spec.length || !isPermutation(perm)) {
    throw new ProtocolError(`${file}: "permutation" must list each of 0..${spec.length - 1} once`);
  }
  const digest = createHash('sha256').update(JSON.stringify(perm)).digest('hex');
  if (digest !== spec.sha256) throw new ProtocolError(`${file}: sha256 of the permutation is ${digest}, the protocol records ${spec.sha256}`);
  return perm;
}

function isPermutation(xs: unknown[]): xs is number[] {
  const seen = new Set<number>();
  for (const x of xs) {
    if (!Number.isSafeInteger(x) || (x as number) < 0 || (x as number) >= xs.length || seen.has(x as number)) return false;
    seen.add(x as number);
  }
  return true;
}

/**
 * The indices of both sides for files of the given row counts. `env` supplies `endVariable`s (e.g.
 * A2RL_ALPACAEVAL_TRAIN_COUNT); a range longer than its file is cut at the file's end, as a Python
 * slice is.
 */
export function splitIndices(recipe: RowsRecipe, rows: Record<string, number>, opts: { permutation?: readonly number[]; env?: NodeJS.ProcessEnv } = {}): SplitIndices {
  const side = (range: RowRange): number[] => {
    const count = rows[range.file];
    if (count === undefined) throw new ProtocolError(`no row count for ${range.file}`);
    const end = Math.min(endOf(range, opts.env ?? process.env) ?? count, count);
    const positions = Array.from({ length: Math.max(0, end - range.start) }, (_, i) => range.start + i);
    if (range.order === 'file') return positions;
    const perm = opts.permutation;
    if (!perm) throw new ProtocolError(`${range.file}: the split needs its permutation`);
    if (perm.length !== count) throw new ProtocolError(`${range.file} has ${count} rows, the shipped permutation orders ${perm.length}: is it the upstream release?`);
    return positions.map((i) => perm[i]!);
  };
  return { visible: side(recipe.visible), private: side(recipe.private) };
}

function endOf(range: RowRange, env: NodeJS.ProcessEnv): number | null {
  const raw = range.endVariable ? env[range.endVariable]?.trim() : undefined;
  if (!raw) return range.end;
  if (!/^[1-9]\d*$/.test(raw)) throw new ProtocolError(`${range.endVariable}: not a positive integer: "${raw}"`);
  return Number(raw);
}

/** Picks `indices` out of `items` (the file's rows in order). */
export function pickRows<T>(items: readonly T[], indices: readonly number[]): T[] {
  return indices.map((i) => {
    if (i >= items.length) throw new ProtocolError(`row ${i} is past the ${items.length} rows read`);
    return items[i]!;
  });
}
