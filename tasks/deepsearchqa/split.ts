/**
 * The paper's DeepSearchQA split (tasks/deepsearchqa/protocol.json): the 900 rows of DSQA-full.csv in
 * the order of HF `Dataset.shuffle(seed=42)`, i.e. `numpy.random.default_rng(42).permutation(900)`,
 * shipped as `hf-shuffle-seed42.json` (re-derive with `derive-permutation.py`); shuffled rows 0..99
 * are visible, 100..299 private, the other 600 unused.
 */
import { loadProtocol, type EvalProtocol } from '../paper-common/protocol.js';
import { loadPermutation, pickRows, rowsRecipe, splitIndices, type SplitIndices } from '../paper-common/split-rows.js';

const TASK_ID = 'deepsearchqa';

export function splitOf(protocol: EvalProtocol = loadProtocol(TASK_ID)): { indices: (rows: number) => SplitIndices; visibleCount: number; privateCount: number } {
  const recipe = rowsRecipe(protocol);
  const permutation = loadPermutation(TASK_ID, recipe);
  const count = (r: typeof recipe.visible) => (r.end ?? permutation.length) - r.start;
  return {
    indices: (rows) => splitIndices(recipe, { [recipe.visible.file]: rows }, { permutation }),
    visibleCount: count(recipe.visible),
    privateCount: count(recipe.private),
  };
}

/** The visible and private items of the paper's split (input order = the dataset file's order). */
export function splitItems<T>(items: readonly T[], protocol?: EvalProtocol): { visible: T[]; private: T[] } {
  const { indices } = splitOf(protocol);
  const picked = indices(items.length);
  return { visible: pickRows(items, picked.visible), private: pickRows(items, picked.private) };
}
