import type { Command } from 'commander';
import { checkAgent, listAgents } from '../../modules/agents/agent-registry.js';
import type { RunSummary } from '../../modules/runs/run.service.js';
import { TASKS } from '../../tasks/index.js';
import { formatSeconds, parseDuration } from '../../modules/settings/duration.js';
import { parseAllowlist } from '../../modules/runs/sandbox/egress-proxy.js';
import { parseLimitOverrides } from '../../modules/runs/sandbox/limits.js';
import { redact } from '../server.js';
import { num, progressPrinter, summaryJson, table, withRunApp } from './cli-support.js';

const collect = (value: string, previous: string[]) => [...previous, value];

/** Commands that run the benchmark: run, demo, tasks, agents. */
export function registerRunsCommands(program: Command): void {
  program
    .command('run')
    .description('run one benchmark run: prepare the workspace, launch the agent with its budget, grade its submissions')
    .requiredOption('--task <id>', 'task pack (see `a2rl tasks`)')
    .option('--agent <id>', 'agent (see `a2rl agents`)')
    .option('--agent-command <command>', 'run this shell command as the agent instead of --agent')
    .option('--driver <llm>', 'driver LLM to record (default: LLM_MODEL, CHAT_MODEL or OPENAI_MODEL, else the agent\'s own)')
    .option('--budget <duration>', 'wall-clock budget from agent start, e.g. 90s, 5m, 12h', '12h')
    .option('--seed <n>', 'seed recorded with the run and given to the agent', '0')
    .option('--mode <mode>', 'free | sft-only | rl-oriented', 'free')
    .option('--grace <duration>', 'time between SIGTERM and SIGKILL at budget expiry', '5s')
    .option('--limit <name=value>', 'override a resource limit of the task, e.g. diskBytes=20G, maxProcesses=512, memoryBytes=none (repeatable)', collect, [])
    .option('--allow-net <hosts>', 'hosts the agent may reach through the egress proxy, e.g. pypi.org,files.pythonhosted.org (default: none)')
    .option('--json', 'print a JSON summary as the last line')
    .action(async (opts: { task: string; agent?: string; agentCommand?: string; driver?: string; budget: string; seed: string; mode: string; grace: string; limit: string[]; allowNet?: string; json?: boolean }) => {
      if (!/^-?\d+$/.test(opts.seed)) throw new Error(`--seed must be an integer, got "${opts.seed}"`);
      if (!['free', 'sft-only', 'rl-oriented'].includes(opts.mode)) throw new Error(`--mode must be free, sft-only or rl-oriented, got "${opts.mode}"`);
      if (!opts.agent && opts.agentCommand === undefined) throw new Error('give --agent <id> or --agent-command \'<shell command>\'');
      const budgetSeconds = parseDuration(opts.budget);
      const graceMs = parseDuration(opts.grace) * 1000;
      const limits = parseLimitOverrides(opts.limit);
      const allowNet = opts.allowNet === undefined ? [] : parseAllowlist(opts.allowNet);
      await withRunApp(async (runs, gradingBaseUrl) => {
        runs.resolveAgent(opts); // unknown agent or missing prerequisites: fail before recording anything
        const result = await runs.run({
          task: opts.task, agent: opts.agent, agentCommand: opts.agentCommand, driver: opts.driver, budgetSeconds,
          seed: Number(opts.seed), mode: opts.mode as 'free', graceMs, gradingBaseUrl, onProgress: progressPrinter(), limits, allowNet,
        });
        if (process.stderr.isTTY) process.stderr.write('\n');
        process.stdout.write(
          `run ${result.runId} (${result.task}, agent ${result.agent}): baseline ${num(result.baseline)}, best ${num(result.best)}, ` +
            `improvement ${num(result.improvement)}, ${result.submissions} submissions, agent ${result.exitReason}, sandbox ${result.sandbox}\n` +
            `  events: a2rl events ${result.runId}   workspace: ${result.workspace}\n`,
        );
        if (opts.json) process.stdout.write(`${summaryJson(result)}\n`);
      });
    });

  program
    .command('demo')
    .description('run the reference agent once on each reference task and print a table')
    .option('--budget <duration>', 'budget per run', '90s')
    .option('--json', 'print one JSON summary per run')
    .action(async (opts: { budget: string; json?: boolean }) => {
      const budgetSeconds = parseDuration(opts.budget);
      await withRunApp(async (runs, gradingBaseUrl, config) => {
        const results: RunSummary[] = [];
        for (const task of TASKS.filter((t) => t.reference)) {
          process.stderr.write(`running the reference agent on ${task.id} (L${task.level}: ${task.title}), budget ${formatSeconds(budgetSeconds)}\n`);
          results.push(await runs.run({ task: task.id, agent: 'reference', budgetSeconds, seed: 0, gradingBaseUrl, onProgress: progressPrinter() }));
          if (process.stderr.isTTY) process.stderr.write('\n');
        }
        const rows = [['TASK', 'BASELINE', 'BEST', 'IMPROVEMENT', 'SUBMISSIONS', 'RUN']];
        for (const r of results) rows.push([r.task, num(r.baseline), num(r.best), num(r.improvement), String(r.submissions), r.runId]);
        process.stdout.write(`\n${table(rows)}\n\n`);
        process.stdout.write(`events:     ${redact(config.ledgerUrl)}   (a2rl events <run>, a2rl runs)\n`);
        process.stdout.write(`artifacts:  ${redact(config.artifactsUrl)}\n`);
        process.stdout.write(`workspaces: ${config.workspacesDir}\n`);
        if (opts.json) for (const r of results) process.stdout.write(`${summaryJson(r)}\n`);
      });
    });

  program
    .command('tasks')
    .description('list the task packs')
    .action(() => {
      const rows = [['TASK', 'LEVEL', 'BASE MODEL', 'EVALUATOR', 'TITLE']];
      for (const t of TASKS) rows.push([t.id, `L${t.level}${t.environment ? ' (interactive)' : ''}`, t.baseModel, t.evaluatorVersion, t.title]);
      process.stdout.write(`${table(rows)}\n`);
    });

  program
    .command('agents')
    .description('list the agents and what is missing on this machine to use each')
    .action(() => {
      const rows = [['AGENT', 'KIND', 'READY', 'MISSING', 'TITLE']];
      for (const spec of listAgents()) {
        const { missing } = checkAgent(spec);
        rows.push([spec.id, spec.kind, missing.length ? 'no' : 'yes', missing.join('; ') || '-', spec.title]);
      }
      process.stdout.write(`${table(rows)}\n`);
    });

  // `a2rl replay` (issue 5): modules/replay; imported on use so other commands do not load it.
}
