// What the campaign end-to-end specs read from the CLI.

/** The `--json` line of `campaign run` / `resume`. */
export interface CampaignJson {
  campaignId: string;
  runs: { runId: string | null; task: string; agent: string; driver: string | null; seed: number; state: string; best: number | null }[];
  completed: number;
  failed: number;
}

/** One line of `a2rl events --json`, as far as the specs look. */
export interface Ev {
  type: string;
  data: Record<string, unknown>;
}
