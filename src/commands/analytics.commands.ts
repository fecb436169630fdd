import type { Command } from 'commander';
import { inertLine } from '../../modules/reports/inert-text.js';
import { withReadSide, type ReadSide } from './read-side.js';
import { documentOut, jsonOut } from './terminal.js';

// SQL over the read models and the ledger (modules/analytics, docs/analysis.md "Tables for SQL and
// dataframes"): parse, call the module, print.

interface QueryOptions {
  campaign?: string;
  json?: boolean;
  csv?: boolean;
  timeout?: string;
  maxRows?: string;
}

export function registerAnalyticsCommands(program: Command): void {
  registerAnalysisTablesCommand(program);
  program
    .command('query')
    .description('answer one read-only SQL statement (DuckDB) over the tables runs, submissions, llm_usage, events (and user projections): copies in memory, no file or network access; a table by default')
    .argument('<sql>', 'one SELECT (or WITH, DESCRIBE, SUMMARIZE, SHOW, EXPLAIN) statement')
    .option('--campaign <id>', "only this campaign's accepted runs (as scoreboard --campaign)")
    .option('--json', 'one JSON object: {columns: [{name, type}], rows: [[…]]}')
    .option('--csv', 'RFC 4180 CSV with a header line')
    .option('--timeout <seconds>', 'stop the query after this many seconds', '30')
    .option('--max-rows <n>', 'refuse a result of more rows', '100000')
    .action(async (sql: string, opts: QueryOptions) => {
      if (opts.json && opts.csv) throw new Error('give --json or --csv, not both');
      const [{ runQuery, DEFAULT_LIMITS }, out, { collectTables }] = await Promise.all([
        import('../../modules/analytics/sql-engine.js'),
        import('../../modules/analytics/query-output.js'),
        import('../../modules/analytics/collect.js'),
      ]);
      const limits = { ...DEFAULT_LIMITS, timeoutMs: positive('--timeout', opts.timeout!) * 1000, maxRows: positive('--max-rows', opts.maxRows!) };
      await withReadSide(async (side) => {
        const tables = [...(await collectTables({ runs: () => side.source.runs(), store: side.store }, { campaign: opts.campaign })), ...(await userTables(side))];
        const result = await runQuery(tables, sql, limits);
        process.stdout.write(opts.json ? jsonOut(out.resultJson(result)) : opts.csv ? out.resultCsv(result) : out.resultTable(result));
      });
    });

  program
    .command('export-tables')
    .description('write the tables runs, submissions, llm_usage and events (documented schemas, docs/analysis.md) as Parquet or CSV files, one per table, for pandas, polars or DuckDB')
    .requiredOption('-o, --output <dir>', 'directory to write <table>.parquet|csv into (created; existing files are not replaced)')
    .option('--format <format>', 'parquet | csv', 'parquet')
    .option('--campaign <id>', "only this campaign's accepted runs")
    .option('--json', 'one JSON array of {table, file, rows}')
    .action(async (opts: { output: string; format: string; campaign?: string; json?: boolean }) => {
      const [{ exportTables, TABLE_FORMATS }, { collectTables }] = await Promise.all([
        import('../../modules/analytics/export-tables.js'),
        import('../../modules/analytics/collect.js'),
      ]);
      if (!TABLE_FORMATS.includes(opts.format as never)) throw new Error(`--format must be ${TABLE_FORMATS.join(' or ')}, got "${opts.format}"`);
      await withReadSide(async (side) => {
        const tables = await collectTables({ runs: () => side.source.runs(), store: side.store }, { campaign: opts.campaign });
        const written = await exportTables(tables, opts.output, opts.format as 'parquet' | 'csv');
        if (opts.json) process.stdout.write(jsonOut(`${JSON.stringify(written)}\n`));
        else for (const w of written) process.stdout.write(`wrote ${w.file} (${w.rows} rows)\n`);
      });
    });
}

export function registerAnalysisTablesCommand(program: Command): void {
  program
    .command('analysis')
    .description("the paper's analysis tables from a campaign (docs/analysis.md \"The paper's tables\")")
    .command('tables')
    .description("improvement per task × agent × driver with intervals and the noise floor, executed routes per task, failure classes per agent × driver, the driver effect within a scaffold, improvement by level, evaluation noise; every value cites its runs; html draws the headline figures")
    .requiredOption('--campaign <id>', "the campaign (its accepted runs: one per completed cell × seed)")
    .option('--format <format>', 'md | csv | json | html', 'md')
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .action(async (opts: { campaign: string; format: string; output?: string }) => {
      const [{ analysisTables }, { renderAnalysis, ANALYSIS_FORMATS }, { campaignTableRuns }, { TASKS }] = await Promise.all([
        import('../../modules/analytics/analysis-tables.js'),
        import('../../modules/analytics/analysis-render.js'),
        import('../../modules/analytics/collect.js'),
        import('../../tasks/index.js'),
      ]);
      if (!ANALYSIS_FORMATS.includes(opts.format as never)) throw new Error(`--format must be ${ANALYSIS_FORMATS.join(', ')}, got "${opts.format}"`);
      const format = opts.format as (typeof ANALYSIS_FORMATS)[number];
      await withReadSide(async (side) => {
        const levelOf = (task: string | null) => { const level = TASKS.find((t) => t.id === task)?.level; return level === undefined ? null : `L${level}`; };
        const runs = await campaignTableRuns({ runs: () => side.source.runs(), store: side.store }, opts.campaign, levelOf);
        const text = renderAnalysis(analysisTables(opts.campaign, runs), format);
        if (opts.output) {
          const { writeFile } = await import('node:fs/promises');
          await writeFile(opts.output, text);
          process.stderr.write(`wrote ${opts.output} (${Buffer.byteLength(text)} bytes)\n`);
        } else process.stdout.write(format === 'json' ? jsonOut(text) : format === 'html' ? documentOut(text) : text);
      });
    });
}

/** The user projections' tables, each brought up to date first in its thread; one that fails is a warning line and keeps its last table. */
async function userTables(side: ReadSide) {
  const { UserProjections, userProjectionsDir } = await import('../../modules/analytics/user-projections/user-projections.js');
  const projections = new UserProjections(userProjectionsDir(side.config.home), side.store);
  for (const o of await projections.catchUp()) if (!o.ok) process.stderr.write(`a2rl: warning: ${inertLine(o.error ?? '')} (its last good table, if any, is queried)\n`);
  return projections.tables();
}

function positive(option: string, value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${option} takes a positive number, got "${value}"`);
  return n;
}
