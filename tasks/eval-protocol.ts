// The shape of a paper task's evaluation protocol (tasks/<task>/protocol.json): types only, so that
// TaskPack can name it without importing the paper packs' shared code; reading and checking the file
// is tasks/paper-common/protocol.ts.

export type RequestApi = 'chat' | 'completion';

/** One generation request's settings, as sent to the OpenAI-compatible server. */
export interface RequestSettings {
  api: RequestApi;
  maxTokens: number;
  stop: string[];
  temperature: number;
}

/** Rows `[start, end)` of a fetched file, in file order or in the order of a shipped permutation. */
export interface RowRange {
  file: string;
  start: number;
  /** null = to the end of the file. */
  end: number | null;
  /** An environment variable that replaces `end` when set (e.g. A2RL_ALPACAEVAL_TRAIN_COUNT). */
  endVariable?: string;
  /** `permutation`: row `i` of the range is the file's row `permutation[i]`. */
  order: 'file' | 'permutation';
}

export type SplitRecipe =
  | {
      kind: 'rows';
      /** How the paper's harness draws it (for auditors). */
      recipe: string;
      visible: RowRange;
      private: RowRange;
      /** Rows per source file in the upstream release, used when the file is not fetched. */
      expectedRows: Record<string, number>;
      /** A shipped index list (tasks/<task>/<file>) for `order: "permutation"`. */
      permutation?: { file: string; length: number; sha256: string };
    }
  | { kind: 'environment'; recipe: string };

export interface Deviation {
  /** A short kebab-case name, the heading of its entry in docs/paper-tasks.md. */
  name: string;
  reason: string;
}

export interface EvalProtocol {
  task: string;
  /** The harness code this protocol follows (repository, commit, path). */
  source: string;
  split: SplitRecipe;
  request: RequestSettings;
  /** Task-specific prompt data (templates with `{placeholders}`, few-shot examples). */
  prompt: Record<string, unknown>;
  /** Task-specific post-processing of replies (names of the rules and their parameters). */
  postprocess: Record<string, unknown>;
  /** Task-specific extra settings (judge, environment options, step limits). */
  settings: Record<string, unknown>;
  deviations: Deviation[];
}
