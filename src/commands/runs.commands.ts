import type { INestApplication } from '@nestjs/common';
import { Option, type Command } from 'commander';
import type { ResolvedCommand } from '../../modules/agents/agent-registry.js';
import type { RunMode, RunSummary } from '../../modules/runs/run.service.js';
import { formatSeconds, parseDuration } from '../../modules/settings/duration.js';
import { parseDollars, parseLimitOverrides } from '../../modules/sandbox/limits.js';
import { redact } from '../config/config.js';
import { parseRepeats } from '../../modules/grading/baseline-repeats.js';
import { num, progressPrinter, summaryJson, table, withRunApp } from './cli-support.js';
import { inertText } from '../../modules/reports/inert-text.js';
import { choiceOption, integer } from './option-parsers.js';
import { jsonOut } from './terminal.js';

const RUN_MODES: readonly RunMode[] = ['free', 'sft-only', 'rl-oriented'];

// What only some commands use (the egress proxy, the task packs, the agent installers, the
// dashboard link, the upstream check) is imported by them: `a2rl --help` registers these commands
// without loading it.

const collect = (value: string, previous: string[]) => [...previous, value];

/** Commands that run the benchmark: run, demo, tasks, agents. */
export function registerRunsCommands(program: Command): void {
  program
    .command('run')
    .description('run one benchmark run: prepare the workspace, launch the agent with its budget, grade its submissions')
    .option('--task <id>', 'task pack (see `a2rl tasks`)')
    .option('--resume <runId>', 'continue a run whose harness was lost, in the same stream, with the budget it had left (docs/resume.md); its task, agent and limits are its own')
    .option('--harness-gone', 'with --resume: the run is still open but its harness is gone for good (its machine died): record it interrupted first')
    .option('--agent <id>', 'agent (see `a2rl agents`)')
    .option('--agent-command <command>', 'run this shell command as the agent instead of --agent')
    .option('--driver <model>', 'the model an LLM agent is told to use (default: LLM_MODEL, else its adapter\'s defaultModel); the scoreboard names the model it actually called')
    .addOption(new Option('--budget <duration>', 'wall-clock budget from agent start, e.g. 90s, 5m, 12h').argParser(parseDuration).default(parseDuration('12h'), '12h'))
    .option('--seed <n>', 'seed recorded with the run and given to the agent', integer('--seed'), 0)
    .addOption(choiceOption('--mode <mode>', 'what the agent is told to do', RUN_MODES, 'free, sft-only or rl-oriented').default('free'))
    .addOption(new Option('--grace <duration>', 'time between SIGTERM and SIGKILL at budget expiry').argParser(parseDuration).default(parseDuration('5s'), '5s'))
    .option('--limit <name=value>', 'override a resource limit of the task, e.g. diskBytes=20G, maxProcesses=512, memoryBytes=none (repeatable)', collect, [])
    .option('--max-llm-tokens <n>', 'stop serving the agent\'s model calls after this many tokens (input, output and cache; the gateway answers with its provider\'s error)')
    .option('--max-llm-cost <usd>', 'stop serving the agent\'s model calls after this many US dollars by the price table (docs/llm-gateway.md)')
    .option('--allow-net <hosts>', 'hosts the agent may reach through the egress proxy, e.g. pypi.org,files.pythonhosted.org (default: none)')
    .option('--baseline-repeats <k>', 'grade the base model k times in all before the agent starts (GradingRepeated): the task\'s evaluation noise on the scoreboard', '1')
    .option('--serve', 'also serve the HTTP API and dashboard on A2RL_HTTP_HOST:A2RL_HTTP_PORT while the run lasts (its URL is printed at start; so it is when an `a2rl serve` is already up there)')
    .option('--json', 'print a JSON summary as the last line')
    .action(async (opts: { task?: string; resume?: string; harnessGone?: boolean; agent?: string; agentCommand?: string; driver?: string; budget: number; seed: number; mode: RunMode; grace: number; limit: string[]; maxLlmTokens?: string; maxLlmCost?: string; allowNet?: string; baselineRepeats: string; serve?: boolean; json?: boolean }) => {
      if (opts.resume !== undefined) return resumeRun(opts.resume, opts);
      if (opts.harnessGone) throw new Error('--harness-gone goes with --resume <runId>');
      if (opts.task === undefined) throw new Error('give --task <id> (or --resume <runId>)');
      const task = opts.task;
      const baselineRepeats = parseRepeats(opts.baselineRepeats, '--baseline-repeats');
      if (!opts.agent && opts.agentCommand === undefined) throw new Error('give --agent <id> or --agent-command \'<shell command>\'');
      const budgetSeconds = opts.budget;
      const graceMs = opts.grace * 1000;
      const limits = parseLimitOverrides([...opts.limit, ...(opts.maxLlmTokens !== undefined ? [`llmTokens=${opts.maxLlmTokens}`] : [])]);
      if (opts.maxLlmCost !== undefined) limits.llmCostUsd = parseDollars(opts.maxLlmCost);
      const [{ parseAllowlist }, { checkUpstreams }, { upstreamsFromEnv }, { afterRun, openDashboard }] = await Promise.all([
        import('../../modules/sandbox/egress-proxy.js'),
        import('../../modules/llm-gateway/preflight.js'),
        import('../../modules/llm-gateway/upstreams.js'),
        import('./dashboard-link.js'),
      ]);
      const allowNet = opts.allowNet === undefined ? [] : parseAllowlist(opts.allowNet);
      await withRunApp(async (runs, gradingBaseUrl, config, app) => {
        const spec = runs.resolveAgent(opts); // unknown agent or missing prerequisites: fail before recording anything
        if (spec.llm) await checkUpstreams(spec.llm.providers, upstreamsFromEnv(process.env)); // its model must answer (GET …/models), or nothing is recorded
        const dashboard = await openDashboard(app, config, opts.serve === true);
        const progress = progressPrinter();
        const result = await runs.run({
          task, agent: opts.agent, agentCommand: opts.agentCommand, driver: opts.driver, budgetSeconds,
          seed: opts.seed, mode: opts.mode, graceMs, gradingBaseUrl, onProgress: progress.onProgress, limits, allowNet, baselineRepeats,
          onScheduled: async (runId) => void process.stderr.write(`run ${runId} scheduled${dashboard ? `; dashboard: ${dashboard.runUrl(runId)}` : ''}\n`),
        }).catch(async (err: unknown) => {
          await dashboard?.close();
          throw err;
        }).finally(progress.done);
        // With --json, stdout holds only the JSON summary: the human lines go to stderr.
        (opts.json ? process.stderr : process.stdout).write(inertText(
          `run ${result.runId} (${result.task}, agent ${result.agent}): baseline ${num(result.baseline)}, best ${num(result.best)}, ` +
            `improvement ${num(result.improvement)}, ${result.submissions} submissions, agent ${result.exitReason}, sandbox ${result.sandbox}\n` +
            `  events: a2rl events ${result.runId}   workspace: ${result.workspace}\n`,
        ));
        if (opts.json) process.stdout.write(jsonOut(`${summaryJson(await attributed(app, result))}\n`));
        await afterRun(dashboard, dashboard?.runUrl(result.runId) ?? '');
      });
    });

  program
    .command('demo')
    .description('run the reference agent once on each reference task and print a table')
    .option('--budget <duration>', 'budget per run', '90s')
    .option('--json', 'print one JSON summary per run')
    .action(async (opts: { budget: string; json?: boolean }) => {
      const budgetSeconds = parseDuration(opts.budget);
      const { TASKS } = await import('../../tasks/index.js');
      await withRunApp(async (runs, gradingBaseUrl, config) => {
        const results: RunSummary[] = [];
        for (const task of TASKS.filter((t) => t.reference)) {
          process.stderr.write(`running the reference agent on ${task.id} (L${task.level}: ${task.title}), budget ${formatSeconds(budgetSeconds)}\n`);
          const progress = progressPrinter();
          results.push(await runs.run({ task: task.id, agent: 'reference', budgetSeconds, seed: 0, gradingBaseUrl, onProgress: progress.onProgress }).finally(progress.done));
        }
        const rows = [['TASK', 'BASELINE', 'BEST', 'IMPROVEMENT', 'SUBMISSIONS', 'RUN']];
        for (const r of results) rows.push([r.task, num(r.baseline), num(r.best), num(r.improvement), String(r.submissions), r.runId]);
        // With --json, stdout holds only the JSON lines: the table and where things are go to stderr.
        const human = (text: string) => void (opts.json ? process.stderr : process.stdout).write(text);
        human(`\n${table(rows)}\n\n`);
        human(`events:     ${redact(config.ledgerUrl)}   (a2rl events <run>, a2rl runs)\n`);
        human(`artifacts:  ${redact(config.artifactsUrl)}\n`);
        human(`workspaces: ${config.workspacesDir}\n`);
        human(`dashboard:  a2rl serve, then open http://${config.httpHost}:${config.httpPort}/\n`);
        if (opts.json) for (const r of results) process.stdout.write(jsonOut(`${summaryJson(r)}\n`));
      });
    });

  program
    .command('tasks')
    .description('list the task packs')
    .option('--json', 'one JSON array: [{id, level, title, baseModel, evaluatorVersion, reference, interactive}]')
    .action(async (opts: { json?: boolean }) => {
      const { TASKS } = await import('../../tasks/index.js');
      if (opts.json) {
        const tasks = TASKS.map((t) => ({ id: t.id, level: t.level, title: t.title, baseModel: t.baseModel, evaluatorVersion: t.evaluatorVersion, reference: t.reference === true, interactive: t.environment !== undefined }));
        process.stdout.write(`${JSON.stringify(tasks)}\n`);
        return;
      }
      const rows = [['TASK', 'LEVEL', 'BASE MODEL', 'EVALUATOR', 'TITLE']];
      for (const t of TASKS) rows.push([t.id, `L${t.level}${t.environment ? ' (interactive)' : ''}`, t.baseModel, t.evaluatorVersion, t.title]);
      process.stdout.write(`${table(rows)}\n`);
    });

  const agents = program
    .command('agents')
    .description('list the agents and what is missing to run each (commands as the sandbox will see them, the model upstream\'s key)')
    .option('--json', 'one JSON array: [{id, kind, title, driver, defaultModel, requires {commands, env, anyEnv}, ready, missing[]}] (driver: as agent.json declares it, "none" for rule-based agents; defaultModel: an LLM agent\'s model when no --driver is given)')
    .action(async (opts: { json?: boolean }) => {
      const { agents: list, sandboxable } = await agentReadiness();
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(list)}\n`);
        if (!sandboxable) process.stderr.write(NO_SANDBOX_NOTE);
        return;
      }
      const rows = [['AGENT', 'KIND', 'READY', 'MISSING', 'TITLE']];
      for (const a of list) rows.push([a.id, a.kind, a.ready ? 'yes' : 'no', a.missing.join('; ') || '-', a.title]);
      process.stdout.write(`${table(rows)}\n`);
      if (!sandboxable) process.stdout.write(NO_SANDBOX_NOTE);
    });
  const log = (line: string) => process.stderr.write(`${line}\n`);
  agents
    .command('install')
    .description('install everything agents need: the agent CLIs at the versions a2rl is tested with (infra/agent-clis/package.json), for the project\'s use only, the agents\' Python (`agents python install`) and the Python agent systems (OpenHands, R&D-Agent: infra/python-agents, each in its own venv in the machine cache)')
    .action(async () => {
      const [{ installAgentClis }, { installAgentPython }, { installPythonAgentSystems }] = await Promise.all([
        import('../../modules/agents/agent-clis.js'), import('../../modules/agents/agent-python-env.js'), import('../../modules/agents/python-agent-systems.js'),
      ]);
      installAgentClis({ log });
      await installAgentPython({ log });
      await installPythonAgentSystems({ log });
    });
  agents
    .command('python')
    .description('the agents\' Python environment (torch CPU, transformers, trl, peft, …; infra/agent-python)')
    .command('install')
    .description('build the agents\' Python from infra/agent-python/requirements.txt (pinned, hash-checked) in the machine cache (A2RL_CACHE, default ~/.cache/a2rl); runs use it unless A2RL_AGENT_PYTHON(_<TASK>) names another')
    .option('--force', 'rebuild it even when installed')
    .action(async (opts: { force?: boolean }) => {
      const { installAgentPython } = await import('../../modules/agents/agent-python-env.js');
      const prefix = await installAgentPython({ log, force: opts.force });
      process.stdout.write(`${prefix}\n`);
    });

  // `a2rl replay` (issue 5): modules/replay; imported on use so other commands do not load it.
}

/**
 * The run's summary with the driver the scoreboard, the report and the runs page name: the model the
 * agent called most (its analysis), else the declared one (RunSummary.driver, `--driver`).
 */
async function attributed(app: INestApplication, result: RunSummary): Promise<RunSummary & { declaredDriver: string | null }> {
  const { RunSource } = await import('../../modules/query/run-reading.js');
  const analysis = await app.get(RunSource).run(result.runId);
  return { ...result, driver: analysis?.driver ?? result.driver, declaredDriver: result.driver };
}

const NO_SANDBOX_NOTE = '(this machine cannot sandbox agents: `a2rl doctor --sandbox` says why)\n';

/** Each agent and what it lacks here: its commands (and whether the sandbox would see them), its keys. */
async function agentReadiness() {
  const [{ checkAgent, listAgents, resolveCommand }, { commandsInSandbox }] = await Promise.all([import('../../modules/agents/agent-registry.js'), import('../../modules/sandbox/command-probe.js')]);
  const specs = listAgents();
  const found = specs.flatMap((spec) => (spec.requires.commands ?? []).map((name) => resolveCommand(name))).filter((c): c is ResolvedCommand => c !== null);
  const visible = await commandsInSandbox(found);
  const agents = specs.map((spec) => {
    const { missing } = checkAgent(spec);
    for (const name of spec.requires.commands ?? []) {
      if (resolveCommand(name) && visible && !visible.get(name)) missing.push(`command "${name}" is installed but not visible inside the sandbox`);
    }
    return {
      id: spec.id, kind: spec.kind, title: spec.title, driver: spec.driver ?? null, defaultModel: spec.llm?.defaultModel ?? null,
      requires: { commands: spec.requires.commands ?? [], env: spec.requires.env ?? [], anyEnv: spec.requires.anyEnv ?? [] }, ready: missing.length === 0, missing,
    };
  });
  return { agents, sandboxable: visible !== null };
}

/**
 * `a2rl run --resume <runId>`: the run's own task, agent and limits from its ledger; only how this
 * harness serves it (grace, output) comes from the command line. Options that would change the run
 * are refused rather than silently ignored.
 */
async function resumeRun(runId: string, opts: { task?: string; agent?: string; agentCommand?: string; driver?: string; limit: string[]; allowNet?: string; harnessGone?: boolean; grace: number; json?: boolean }): Promise<void> {
  const changing = [opts.task && '--task', opts.agent && '--agent', opts.agentCommand !== undefined && '--agent-command', opts.driver && '--driver', opts.limit.length > 0 && '--limit', opts.allowNet !== undefined && '--allow-net'].filter(Boolean);
  if (changing.length) throw new Error(`--resume continues the run as it was recorded: ${changing.join(', ')} cannot be given with it`);
  await withRunApp(async (runs, gradingBaseUrl, _config, app) => {
    const progress = progressPrinter();
    const result = await runs.resume({ runId, gradingBaseUrl, graceMs: opts.grace * 1000, onProgress: progress.onProgress }, { harnessGone: opts.harnessGone }).finally(progress.done);
    (opts.json ? process.stderr : process.stdout).write(inertText(
      `run ${result.runId} (${result.task}, agent ${result.agent}) resumed: baseline ${num(result.baseline)}, best ${num(result.best)}, ` +
        `improvement ${num(result.improvement)}, ${result.submissions} submissions, agent ${result.exitReason}, sandbox ${result.sandbox}\n` +
        `  events: a2rl events ${result.runId}   workspace: ${result.workspace}\n`,
    ));
    if (opts.json) process.stdout.write(jsonOut(`${summaryJson(await attributed(app, result))}\n`));
  });
}
