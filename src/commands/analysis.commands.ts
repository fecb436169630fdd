import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { followTranscript } from '../../modules/query/follow.js';
import { RunSource } from '../../modules/query/run-source.js';
import { REPORT_FORMATS, renderReport, type ReportFormat } from '../../modules/reports/render.js';
import { formatNumber, resultsCsv } from '../../modules/reports/results-csv.js';
import { transcriptText } from '../../modules/reports/transcript-text.js';
import { filterRuns, scoreboard } from '../../projections/scoreboard/scoreboard.js';
import { buildTranscript } from '../../projections/transcript/transcript.js';
import { table, withApp } from './cli-support.js';

/** Commands over the post-hoc analysis: scoreboard, report, transcript. */
export function registerAnalysisCommands(program: Command): void {
  program
    .command('scoreboard')
    .description('task × agent × driver: runs, baseline, best-of-budget mean with a 95% interval, improvement, valid-submission rate, route, failure classes')
    .option('--task <id>', 'only this task')
    .option('--agent <id>', 'only this agent')
    .option('--driver <llm>', 'only this driver')
    .option('--json', 'canonical JSON array of rows')
    .option('--csv', "the paper's results.csv: one row per run")
    .action(async (opts: { task?: string; agent?: string; driver?: string; json?: boolean; csv?: boolean }) => {
      if (opts.json && opts.csv) throw new Error('give --json or --csv, not both');
      await withApp(async (app) => {
        const filter = { task: opts.task, agent: opts.agent, driver: opts.driver };
        const runs = await app.get(RunSource).runs();
        if (opts.csv) {
          process.stdout.write(resultsCsv(filterRuns(runs, filter)));
          return;
        }
        const rows = scoreboard(runs, filter);
        if (opts.json) {
          process.stdout.write(`${canonicalJson(rows)}\n`);
          return;
        }
        if (!rows.length) {
          process.stdout.write('no runs match\n');
          return;
        }
        const n = (x: number | null) => (x === null ? '-' : x.toFixed(1));
        const lines = [['TASK', 'AGENT', 'DRIVER', 'RUNS', 'BASELINE', 'BEST (95% CI)', 'IMPROVEMENT', 'VALID', 'ROUTE', 'FAILURE CLASSES']];
        for (const r of rows) {
          const ci = r.best.ci95 ? ` [${n(r.best.ci95[0])}, ${n(r.best.ci95[1])}]` : '';
          const driver = `${r.driver ?? '-'}${r.driverMismatches ? ` (${r.driverMismatches} declared otherwise)` : ''}`;
          lines.push([
            r.task ?? '-', r.agent ?? '-', driver, String(r.runs), n(r.baseline), `${n(r.best.mean)}${ci}`, n(r.improvement),
            r.validSubmissionRate === null ? '-' : formatNumber(r.validSubmissionRate), r.route ?? '-',
            r.failureClasses.map((f) => `${f.class}×${f.count}`).join(' '),
          ]);
        }
        process.stdout.write(`${table(lines)}\n`);
      });
    });

  program
    .command('report')
    .description("a run's audit report: header, one section per submission (code diff, processes, rollouts, score), metrics, charts; every claim cites event seqs")
    .argument('<runId>', 'run id')
    .option('--format <format>', 'md | json | html', 'md')
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .action(async (runId: string, opts: { format: string; output?: string }) => {
      if (!REPORT_FORMATS.includes(opts.format as ReportFormat)) throw new Error(`--format must be ${REPORT_FORMATS.join(', ')}, got "${opts.format}"`);
      await withApp(async (app) => {
        const input = await app.get(RunSource).reportInput(runId);
        if (!input) throw new Error(`no run "${runId}" in the ledger`);
        const text = await renderReport(input, opts.format as ReportFormat);
        if (!opts.output) {
          process.stdout.write(text);
          return;
        }
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
      await withApp(async (app) => {
        const source = app.get(RunSource);
        const write = (text: string) => void process.stdout.write(text);
        if (opts.follow) {
          await followTranscript(source, runId, write, { json: opts.json });
          return;
        }
        const events = await source.events(runId);
        if (!events.length) throw new Error(`no run "${runId}" in the ledger`);
        const transcript = buildTranscript(events);
        write(opts.json ? `${canonicalJson(transcript)}\n` : transcriptText(transcript));
      });
    });

  // Tamper evidence (issue 5): the ledger's signing key and `a2rl verify` (modules/audit); imported on use.
}
