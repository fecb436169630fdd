import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseCsv } from '../paper-common/csv.js';
import { DatasetMissingError } from '../paper-common/dataset.js';

export { parseCsv };

/** One DeepSearchQA item, as the Hub's `DSQA-full.csv` columns name them. */
export interface DsqaItem {
  problem: string;
  problem_category: string;
  answer: string;
  /** `Single Answer` or `Set Answer`. */
  answer_type: string;
}

/** The fetched file (modules/datasets/dataset-registry.ts stores DSQA-full.csv under this name). */
export const DSQA_FILE = 'dsqa_full.csv';
const REQUIRED = ['problem', 'answer', 'answer_type'] as const;

/** Reads `<datasetDir>/dsqa_full.csv` in file order; a missing or malformed file says how to fetch it. */
export async function readDsqaCsv(datasetDir: string): Promise<DsqaItem[]> {
  const path = join(datasetDir, DSQA_FILE);
  const hint = 'run `a2rl data fetch deepsearchqa` (or `--from <dir>` on an air-gapped machine)';
  let rows: string[][];
  try {
    rows = parseCsv(await readFile(path, 'utf8'));
  } catch (error) {
    const why = error instanceof SyntaxError ? `is not valid CSV (${error.message})` : 'is missing';
    throw new DatasetMissingError(`the deepsearchqa dataset file ${path} ${why}: ${hint}`);
  }
  const [header = [], ...records] = rows;
  const col = (name: string) => header.indexOf(name);
  const absent = REQUIRED.filter((name) => col(name) < 0);
  if (absent.length > 0) throw new DatasetMissingError(`${path} has no ${absent.join(', ')} column (header: ${header.join(',')}): ${hint}`);
  return records.map((record, i) => {
    if (record.length !== header.length) throw new DatasetMissingError(`${path} record ${i + 1} has ${record.length} fields, the header ${header.length}: ${hint}`);
    const get = (name: string) => (col(name) < 0 ? '' : record[col(name)]!);
    return { problem: get('problem'), problem_category: get('problem_category'), answer: get('answer'), answer_type: get('answer_type') };
  });
}

/** A `Set Answer` item is judged item by item. */
export const isSetAnswer = (item: Pick<DsqaItem, 'answer_type'>): boolean => /^set/i.test(item.answer_type.trim());

/**
 * The gold items of a set answer: a JSON array of strings if the answer is one, else its non-empty
 * lines if there are several, else its `;`-separated parts if any, else its `,`-separated parts.
 * (A comma inside one item, e.g. "Washington, D.C.", splits it: each part must then be present.)
 */
export function goldItems(answer: string): string[] {
  const trimmed = answer.trim();
  if (trimmed.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(trimmed);
      if (Array.isArray(parsed) && parsed.every((x) => typeof x === 'string')) return clean(parsed as string[]);
    } catch {
      // not JSON: split as text below
    }
  }
  const lines = clean(trimmed.split(/\r?\n/));
  if (lines.length > 1) return lines;
  return clean(trimmed.split(trimmed.includes(';') ? ';' : ','));
}

const clean = (parts: readonly string[]) => parts.map((p) => p.trim().replace(/^[-*•]\s+/, '')).filter((p) => p !== '');
