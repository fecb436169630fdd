import path from 'node:path';

/**
 * Where each paper task's data comes from. Files are stored under `$A2RL_HOME/datasets/<task>/<name>`
 * as served (only `gunzip` is applied): the task packs read these files. The Hugging Face copies of
 * GSM8K and HumanEval are parquet only (no reader here), so those two come from the JSONL originals
 * the Hub copies were converted from (GitHub); the rest come from the Hub. No host could be reached
 * when this table was written: `sha256` is null (the observed hash is recorded in the manifest on
 * first fetch and enforced afterwards) and `revision` is a branch; for Hub files the manifest records
 * the commit actually served (`X-Repo-Commit`).
 */
export interface DatasetFile {
  /** Target file name under the task's dataset directory. */
  name: string;
  /** `hf`: a Hugging Face Hub dataset repository; `github`: a GitHub repository (raw files). */
  host: 'hf' | 'github';
  /** Repository (`owner/name`). */
  repo: string;
  /** Branch, tag or commit to download from. */
  revision: string;
  /** Path inside the repository. */
  path: string;
  /** The source is gzip-compressed; the stored file is decompressed. */
  gunzip?: boolean;
  /** Expected sha256 (hex) of the stored file, null while unknown. */
  sha256: string | null;
  /** The split the task pack derives from it; private data never leaves A2RL_HOME. */
  use: 'visible' | 'private' | 'visible+private';
}

export interface DatasetSpec {
  task: string;
  files: DatasetFile[];
  /** Data that comes with the task's environment server rather than from a2rl (games, products): how to get it. */
  environmentData?: string;
  /** The pack also needs `base-model/` (a Hugging Face checkpoint), imported with `--base-model <dir>`. */
  baseModel?: boolean;
}

const hub = (repo: string, repoPath: string, name: string, use: DatasetFile['use']): DatasetFile =>
  ({ name, host: 'hf', repo, revision: 'main', path: repoPath, sha256: null, use });
const github = (repo: string, repoPath: string, name: string, use: DatasetFile['use'], gunzip = false): DatasetFile =>
  ({ name, host: 'github', repo, revision: 'master', path: repoPath, sha256: null, use, ...(gunzip ? { gunzip } : {}) });

export const DATASETS: readonly DatasetSpec[] = [
  {
    task: 'gsm8k',
    // Hub copy: openai/gsm8k main/{train,test}-00000-of-00001.parquet (same rows).
    files: [
      github('openai/grade-school-math', 'grade_school_math/data/train.jsonl', 'train.jsonl', 'visible'),
      github('openai/grade-school-math', 'grade_school_math/data/test.jsonl', 'test.jsonl', 'private'),
    ],
    baseModel: true,
  },
  {
    task: 'humaneval',
    // 164 problems; the pack splits them 82 visible / 82 private. Hub copy: openai/openai_humaneval (parquet).
    files: [github('openai/human-eval', 'data/HumanEval.jsonl.gz', 'HumanEval.jsonl', 'visible+private', true)],
    baseModel: true,
  },
  {
    task: 'alpacaeval',
    files: [
      // AlpacaEval 2.0's 805 instructions with the GPT-4 baseline outputs (JSON).
      hub('tatsu-lab/alpaca_eval', 'alpaca_eval_gpt4_baseline.json', 'alpaca_eval_gpt4_baseline.json', 'private'),
      // Training instructions: the original JSON the Hub's parquet copy (tatsu-lab/alpaca) was made from.
      { ...github('tatsu-lab/stanford_alpaca', 'alpaca_data.json', 'alpaca_data.json', 'visible'), revision: 'main' },
    ],
    baseModel: true,
  },
  {
    task: 'deepsearchqa',
    files: [hub('google/deepsearchqa', 'DSQA-full.csv', 'dsqa_full.csv', 'visible+private')],
    baseModel: true,
  },
  {
    task: 'alfworld',
    // The ReAct few-shot examples (two per task type) the evaluation prompt is built from.
    files: [github('ysymyth/ReAct', 'prompts/alfworld_3prompts.json', 'alfworld_3prompts.json', 'visible')],
    environmentData: 'the ALFWorld games come with the environment: `pip install alfworld && alfworld-download`, then export ALFWORLD_DATA',
    baseModel: true,
  },
  {
    task: 'webshop',
    files: [],
    environmentData: 'the WebShop products, goals and search index come with the environment server: clone https://github.com/princeton-nlp/WebShop and run its setup.sh',
    baseModel: true,
  },
];

export class UnknownDatasetError extends Error {
  override readonly name = 'UnknownDatasetError';
  constructor(task: string) {
    super(`no dataset is registered for task "${task}" (known: ${DATASETS.map((d) => d.task).join(', ')})`);
  }
}

export function datasetSpec(task: string): DatasetSpec {
  const spec = DATASETS.find((d) => d.task === task);
  if (!spec) throw new UnknownDatasetError(task);
  return spec;
}

/** The download URL; `endpoint` replaces the host's base URL (mirrors, proxies, tests). */
export function sourceUrl(file: DatasetFile, endpoint?: string): string {
  const rev = encodeURIComponent(file.revision);
  const rel = file.path.split('/').map(encodeURIComponent).join('/');
  if (file.host === 'github') return `${(endpoint ?? 'https://raw.githubusercontent.com').replace(/\/+$/, '')}/${file.repo}/${rev}/${rel}`;
  return `${(endpoint ?? 'https://huggingface.co').replace(/\/+$/, '')}/datasets/${file.repo}/resolve/${rev}/${rel}`;
}

/** `$A2RL_HOME/datasets/<task>`: outside every workspace (never mounted into a sandbox). */
export function datasetDir(home: string, task: string): string {
  return path.join(home, 'datasets', task);
}
