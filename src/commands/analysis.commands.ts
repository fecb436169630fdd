import type { Command } from 'commander';
import type { RunSource } from '../../modules/query/run-reading.js';
import type { ScoreboardFilter, ScoreboardRow } from '../../projections/scoreboard/scoreboard.js';
import { formatNumber } from '../../modules/reports/results-csv.js';
import { table } from './cli-support.js';
import { withReadSide, type ReadSide } from './read-side.js';
import { documentOut, jsonOut } from './terminal.js';

// The analysis commands read the ledger and the read models without the Nest app (read-side.ts);
// what each renders with is imported on use.

/** Commands over the post-hoc analysis: scoreboard, report, transcript. */
export function registerAnalysisCommands(program: Command): void {
  program
    .command('scoreboard')
    .description('task × agent × driver: runs, baseline, best-of-budget mean with a 95% interval, improvement, valid-submission rate, route, failure classes')
    .option('--task <id>', 'only this task')
    .option('--agent <id>', 'only this agent')
    .option('--driver <llm>', 'only this driver')
    .option('--campaign <id>', "only this campaign's accepted runs (the completed run of each cell × seed; retried attempts left out)")
    .option('--json', 'canonical JSON array of rows')
    .option('--csv', "the paper's results.csv: one row per run")
    .option('--include-unfinished', 'also count runs whose set-up failed or that were cancelled (states setup_failed, cancelled; left out by default)')
    .option('--include-infra', "also count LLM-driven runs whose model never answered or whose infrastructure failed (left out by default: they measure the set-up, not the agent)")
    .action(async (opts: ScoreboardOptions) => {
      if (opts.json && opts.csv) throw new Error('give --json or --csv, not both');
      await withReadSide((side) => printScoreboard(side, opts));
    });

  program
    .command('report')
    .description("a run's audit report: header, one section per submission (code diff, processes, rollouts, score), metrics, charts; every claim cites event seqs")
    .argument('<runId>', 'run id')
    .option('--format <format>', 'md | json | html', 'md')
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .action(async (runId: string, opts: { format: string; output?: string }) => {
      const { REPORT_FORMATS, renderReport } = await import('../../modules/reports/render.js');
      type ReportFormat = (typeof REPORT_FORMATS)[number];
      if (!REPORT_FORMATS.includes(opts.format as ReportFormat)) throw new Error(`--format must be ${REPORT_FORMATS.join(', ')}, got "${opts.format}"`);
      await withReadSide(async (side) => {
        const input = await side.source.reportInput(runId);
        if (!input) throw new Error(`no run "${runId}" in the ledger`);
        const text = await renderReport(input, opts.format as ReportFormat);
        if (!opts.output) {
          // md is inert as rendered; json and html keep their bytes unless shown on a terminal.
          process.stdout.write(opts.format === 'json' ? jsonOut(text) : opts.format === 'html' ? documentOut(text) : text);
          return;
        }
        const { writeFile } = await import('node:fs/promises');
        await writeFile(opts.output, text);
        process.stderr.write(`wrote ${opts.output} (${Buffer.byteLength(text)} bytes)\n`);
      });
    });

  program
    .command('transcript')
    .description("a run's model calls (LlmCallRecorded) as a transcript: turns, prompts, tool calls and their results, answers, tokens, status and latency per call")
    .argument('<runId>', 'run id')
    .option('--follow', 'print each call as it is recorded, until the run ends')
    .option('--json', 'canonical JSON of the transcript; with --follow, one entry per line, then a line with the totals')
    .action(async (runId: string, opts: { follow?: boolean; json?: boolean }) => {
      await withReadSide(async (side) => {
        const source: RunSource = side.source;
        const write = (text: string) => void process.stdout.write(opts.json ? jsonOut(text) : text); // text: inert as composed (transcript-text.ts)
        if (opts.follow) {
          const { followTranscript } = await import('../../modules/query/follow.js');
          await followTranscript(source, runId, write, { json: opts.json });
          return;
        }
        const [{ buildTranscript }, { transcriptText }, { canonicalJson }] = await Promise.all([
          import('../../projections/transcript/transcript.js'),
          import('../../modules/reports/transcript-text.js'),
          import('../../modules/ledger/events/canonical-json.js'),
        ]);
        const events = await source.events(runId);
        if (!events.length) throw new Error(`no run "${runId}" in the ledger`);
        const transcript = buildTranscript(events);
        write(opts.json ? `${canonicalJson(transcript)}\n` : transcriptText(transcript));
      });
    });

  // Tamper evidence (issue 5): the ledger's signing key and `a2rl verify` (modules/audit); imported on use.
}

export interface ScoreboardOptions extends ScoreboardFilter {
  campaign?: string;
  json?: boolean;
  csv?: boolean;
}

/** The stores `a2rl scoreboard` reads: the read-only side, or the app's (the end of `a2rl campaign run`). */
export interface ScoreboardStores {
  source: RunSource;
  /** The ledger holding the campaigns' streams (only read with --campaign). */
  store: ReadSide['store'];
}

/** `a2rl scoreboard` (and the end of `a2rl campaign run`, to stderr with --json): the table, its JSON rows, or results.csv, written by `write` (stdout). */
export async function printScoreboard(stores: ScoreboardStores, opts: ScoreboardOptions, write: (text: string) => void = (text) => void process.stdout.write(text)): Promise<void> {
  const [{ scoreboard, scoreboardRuns }, { resultsCsv }, { canonicalJson }] = await Promise.all([
    import('../../projections/scoreboard/scoreboard.js'),
    import('../../modules/reports/results-csv.js'),
    import('../../modules/ledger/events/canonical-json.js'),
  ]);
  const filter = { task: opts.task, agent: opts.agent, driver: opts.driver, includeUnfinished: opts.includeUnfinished === true, includeInfra: opts.includeInfra === true };
  const runs = await campaignOnly(stores, await stores.source.runs(), opts.campaign);
  if (opts.csv) {
    write(resultsCsv(scoreboardRuns(runs, filter)));
    return;
  }
  const rows = scoreboard(runs, filter);
  if (opts.json) {
    write(jsonOut(`${canonicalJson(rows)}\n`));
    return;
  }
  write(rows.length ? `${scoreboardTable(rows)}\n` : 'no runs match\n');
  const counted = scoreboardRuns(runs, filter).length;
  const unfinished = scoreboardRuns(runs, { ...filter, includeUnfinished: true }).length - counted;
  const infra = scoreboardRuns(runs, { ...filter, includeInfra: true }).length - counted;
  if (unfinished) write(`${unfinished} run(s) whose set-up failed or that were cancelled are not counted (--include-unfinished counts them)\n`);
  if (infra) write(`${infra} LLM-driven run(s) whose model never answered or whose infrastructure failed are not counted (--include-infra counts them)\n`);
}

/** The runs a campaign accepted (one per completed cell × seed), or every run without --campaign. */
async function campaignOnly<T extends { runId: string }>(stores: ScoreboardStores, runs: T[], campaignId: string | undefined): Promise<T[]> {
  if (campaignId === undefined) return runs;
  const { CampaignLedger } = await import('../../modules/campaigns/campaign-ledger.js');
  const accepted = await new CampaignLedger(stores.store, () => new Date()).acceptedRunIds(campaignId);
  if (!accepted) throw new Error(`no campaign "${campaignId}" in the ledger`);
  return runs.filter((r) => accepted.has(r.runId));
}

export function scoreboardTable(rows: readonly ScoreboardRow[]): string {
  const n = (x: number | null) => (x === null ? '-' : x.toFixed(1));
  const ci = (interval: [number, number] | null) => (interval ? ` [${n(interval[0])}, ${n(interval[1])}]` : '');
  const lines = [['TASK', 'AGENT', 'DRIVER', 'RUNS', 'N', 'BASELINE', 'BEST (95% CI)', 'NOISE FLOOR (95% CI, N)', 'IMPROVEMENT (± GRADING SD)', 'VALID', 'ROUTE', 'FAILURE CLASSES']];
  for (const r of rows) {
    const driver = `${r.driver ?? '-'}${r.driverMismatches ? ` (${r.driverMismatches} declared otherwise)` : ''}`;
    const floor = r.noiseFloor ? `${n(r.noiseFloor.mean)}${ci(r.noiseFloor.ci95)}, ${r.noiseFloor.n}` : '-';
    lines.push([
      r.task ?? '-', r.agent ?? '-', driver, String(r.runs), String(r.n), n(r.baseline), `${n(r.best.mean)}${ci(r.best.ci95)}${r.distinguishable === false ? ' *' : ''}`,
      floor, `${n(r.improvement)}${r.evaluationNoise ? ` ±${r.evaluationNoise.std.toFixed(1)}` : ''}`, r.validSubmissionRate === null ? '-' : formatNumber(r.validSubmissionRate), r.route ?? '-',
      r.failureClasses.map((f) => `${f.class}×${f.count}`).join(' '),
    ]);
  }
  const marked = rows.some((r) => r.distinguishable === false);
  // A verdict withheld (an interval of zero width) is said, never shown as clear of noise.
  const caveats = rows.filter((r) => r.caveat).map((r) => `${r.task ?? '-'} × ${r.agent ?? '-'} × ${r.driver ?? '-'}: no noise verdict: ${r.caveat}`);
  return `${table(lines)}${marked ? `\n${NOT_DISTINGUISHABLE}` : ''}${caveats.length ? `\n${caveats.join('\n')}` : ''}`;
}

/** The footnote of a row marked `*`. */
export const NOT_DISTINGUISHABLE = "* not distinguishable from noise: the best-of-budget 95% interval overlaps the task's noise floor (its baseline graded afresh, run after run)";
