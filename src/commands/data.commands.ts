import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CommanderError, type Command } from 'commander';
import { datasetDir, datasetSpec } from '../../modules/datasets/dataset-registry.js';
import { fetchDataset, type FetchProgress } from '../../modules/datasets/fetch-dataset.js';
import { installMicroAssets, MICRO_TASKS } from '../../modules/datasets/micro/micro-assets.js';
import { describeSandbox, sandboxPlan, type SandboxCheck } from '../../modules/sandbox/capabilities.js';
import { doctorAgentView } from '../../modules/sandbox/agent-view.js';
import { straceWorks } from '../../modules/instrumentation/process-tracer.js';
import { ptraceTracerBinary, ptraceTracerProblem } from '../../modules/instrumentation/ptrace-tracer.js';
import { diagnoseTask, machineProbe, PAPER_TASKS, type TaskDiagnosis } from '../../modules/datasets/doctor.js';
import { packageRoot } from '../../modules/settings/package-root.js';
import { TASKS } from '../../tasks/index.js';
import { splitReport, SplitNotDerivedError } from '../../tasks/paper-common/split-report.js';
import { loadConfig } from '../config/config.js';
import { StatusLine } from './status-line.js';

/** Commands that prepare a machine for the paper tasks: data fetch, doctor. */
export function registerDataCommands(program: Command): void {
  const data = program.command('data').description('datasets of the paper tasks (stored under $A2RL_HOME/datasets, outside every workspace)');
  data
    .command('fetch')
    .description('download a task\'s datasets from the Hugging Face Hub (or import them with --from), verify checksums, write manifest.json')
    .argument('<task>', 'gsm8k | humaneval | alpacaeval | alfworld | webshop | deepsearchqa')
    .option('--from <dir>', 'import files fetched elsewhere (air-gapped machines) instead of downloading')
    .option('--base-model <dir>', 'install this Hugging Face checkpoint directory as the task\'s base model')
    .option('--force', 'replace micro assets (`a2rl data micro`) with the real dataset')
    .option('--json', 'one JSON object: {task, dir, files: [{name, size, sha256, status: present|verified|recorded}], note, baseModelMissing}')
    .action(async (task: string, opts: { from?: string; baseModel?: string; force?: boolean; json?: boolean }) => {
      const config = loadConfig();
      const status = new StatusLine();
      const result = await fetchDataset(task, { home: config.home, from: opts.from, baseModel: opts.baseModel, force: opts.force, onProgress: progressLine(status) }).finally(() => status.stop());
      const files = result.manifest.files.map((f) => ({
        name: f.name, size: f.size, sha256: f.sha256, status: result.skipped.includes(f.name) ? 'present' : f.check === 'registry' ? 'verified' : 'recorded',
      }));
      const note = datasetSpec(task).environmentData ?? null;
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ task, dir: result.dir, files, note, baseModelMissing: result.baseModelMissing })}\n`);
        return;
      }
      const how = { present: 'already present', verified: 'verified', recorded: 'hash recorded (first fetch)' } as Record<string, string>;
      for (const f of files) process.stdout.write(`${f.name}  ${f.size} bytes  sha256 ${f.sha256}  ${how[f.status]}\n`);
      process.stdout.write(`${task}: ${files.length} file(s) in ${result.dir}\n`);
      if (note) process.stdout.write(`${task}: ${note}\n`);
      if (result.baseModelMissing) process.stdout.write(`${task} also needs its base checkpoint: a2rl data fetch ${task} --base-model <Hugging Face checkpoint dir>\n`);
    });

  data
    .command('micro')
    .description('make small synthetic assets offline (the dataset files `data fetch` stores, and a tiny base model trained briefly), deterministic per seed, into $A2RL_HOME/datasets/<task>')
    .argument('<task>', MICRO_TASKS.join(' | '))
    .option('--seed <n>', 'the seed: the same seed makes byte-identical files', '1')
    .option('--force', 'replace a fetched (real) dataset')
    .option('--no-cache', 'generate afresh: neither copy the assets from the machine cache (<cache>/micro/) nor keep them there')
    .option('--json', 'one JSON object: {task, dir, seed, present, cached, files: [{name, size, sha256}], summary}')
    .action(async (task: string, opts: { seed: string; force?: boolean; cache: boolean; json?: boolean }) => {
      const seed = /^\d+$/.test(opts.seed) ? Number(opts.seed) : NaN;
      const log = opts.json ? undefined : (line: string) => process.stderr.write(`${line}\n`);
      const result = await installMicroAssets(task, { home: loadConfig().home, seed, force: opts.force, noCache: !opts.cache, log });
      const files = result.manifest.files.map((f) => ({ name: f.name, size: f.size, sha256: f.sha256 }));
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ task, dir: result.dir, seed, present: result.present, cached: result.cached, files, summary: result.summary })}\n`);
        return;
      }
      process.stdout.write(`${task}: micro assets (seed ${seed}) ${result.present ? 'already present' : result.cached ? 'copied from the machine cache' : 'made'} in ${result.dir}: ${files.length} file(s)\n`);
      if (result.summary) process.stdout.write(`${JSON.stringify(result.summary)}\n`);
      if (task === 'alfworld') process.stdout.write(`alfworld: export ALFWORLD_DATA=${result.dir} (the micro games; the pack's backend plays them with its micro engine)\n`);
    });

  data
    .command('split')
    .description('the source rows (0-based, in the fetched file\'s order) of a task\'s visible and private items, as its protocol derives them')
    .argument('<task>', 'gsm8k | humaneval | alpacaeval | deepsearchqa')
    .option('--json', 'one JSON object: {task, visible: [...], private: [...], files, rowCounts: fetched|expected, recipe}')
    .action(async (task: string, opts: { json?: boolean }) => {
      const refuse = (message: string): never => {
        process.stderr.write(`a2rl: ${message}\n`);
        throw new CommanderError(2, 'a2rl.data.split', message);
      };
      if (!TASKS.find((t) => t.id === task)?.protocol) {
        refuse(`a2rl derives no split for ${task}: it has no evaluation protocol (tasks with one: ${TASKS.filter((t) => t.protocol).map((t) => t.id).join(', ')})`);
      }
      let report;
      try {
        report = await splitReport(task, datasetDir(loadConfig().home, task));
      } catch (err) {
        if (err instanceof SplitNotDerivedError) refuse(err.message);
        throw err;
      }
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(report)}\n`);
        return;
      }
      const show = (xs: number[]) => (xs.length > 12 ? `${xs.slice(0, 6).join(', ')}, … , ${xs.slice(-3).join(', ')}` : xs.join(', '));
      process.stdout.write(`${task}: ${report.recipe}\n`);
      process.stdout.write(`  visible  ${report.visible.length} rows of ${report.files.visible}: ${show(report.visible)}\n`);
      process.stdout.write(`  private  ${report.private.length} rows of ${report.files.private}: ${show(report.private)}\n`);
      if (report.rowCounts === 'expected') process.stdout.write(`  (not fetched here: row counts are the upstream release's; \`a2rl data fetch ${task}\` to count the files)\n`);
    });

  program
    .command('doctor')
    .description('how agents are sandboxed here, and what this machine lacks to run a task (GPU, vLLM, data, judge, search key, environment servers) and how to get it')
    .option('--task <id>', 'only this task (default: the six paper tasks and every registered pack)')
    .option('--sandbox', 'only how agents are sandboxed here (exit 1 when they would run unsandboxed)')
    .option('--json', 'one JSON object: {version, sandbox: {mode, checks: [{name, status, detail}], notes}, tasks: [{task, implemented, ready, checks: [{name, status, detail, hint?}]}], ready} (no tasks with --sandbox); the exit status is the same')
    .action(async (opts: { task?: string; sandbox?: boolean; json?: boolean }) => {
      const plan = sandboxPlan();
      const sandbox = { mode: plan.mode, checks: [...describeSandbox(plan), tracerCheck(), ...(await doctorAgentView(plan, process.env, opts.task))], notes: plan.capabilities.notes };
      if (!opts.json) printSandbox(sandbox);
      if (opts.sandbox) {
        if (opts.json) process.stdout.write(`${JSON.stringify({ version: packageVersion(), sandbox, ready: plan.mode !== 'none' })}\n`);
        if (plan.mode === 'none') throw new CommanderError(1, 'a2rl.doctor.notReady', '');
        return;
      }
      const probe = machineProbe(loadConfig().home);
      const ids = opts.task ? [opts.task] : [...new Set([...PAPER_TASKS, ...TASKS.map((t) => t.id)])];
      const results: TaskDiagnosis[] = [];
      for (const id of ids) results.push(await diagnoseTask(id, TASKS.find((t) => t.id === id), probe));
      const ready = results.every((r) => r.ready);
      if (opts.json) process.stdout.write(`${JSON.stringify({ version: packageVersion(), sandbox, tasks: results, ready })}\n`);
      else printDiagnoses(results);
      // Exit 1 without an error message: a not-ready machine is an answer, already printed.
      if (!ready) throw new CommanderError(1, 'a2rl.doctor.notReady', '');
    });
}

/** The version in a2rl's package.json (`a2rl --version`). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}

/** Which process tracer a run would use here (docs/runs.md, "Process tracing"). */
function tracerCheck(): SandboxCheck {
  const ptrace = ptraceTracerBinary();
  if (ptrace) return { name: 'process tracer', status: 'ok', detail: `a2rl-trace (${ptrace}): every exec held until it is read, exact exits` };
  const why = ptraceTracerProblem() ?? 'unavailable';
  if (straceWorks()) return { name: 'process tracer', status: 'optional', detail: `strace (a2rl-trace: ${why}): slower on forks that do not exec; a process's second exec is not held` };
  return { name: 'process tracer', status: 'missing', detail: `the /proc poller only (a2rl-trace: ${why}; strace not installed): programs shorter than a poll are missed` };
}

function printSandbox(sandbox: { mode: string; checks: SandboxCheck[]; notes: string[] }): void {
  process.stdout.write(`sandbox: ${sandbox.mode}${sandbox.mode === 'none' ? ' (agents run UNSANDBOXED)' : ''}\n`);
  for (const c of sandbox.checks) process.stdout.write(`  ${c.status.padEnd(8)} ${c.name}: ${c.detail}\n`);
  for (const note of sandbox.notes) process.stdout.write(`           → ${note}\n`);
}

function printDiagnoses(results: TaskDiagnosis[]): void {
  for (const r of results) {
    process.stdout.write(`${r.task}: ${r.ready ? 'ready' : r.implemented ? 'not ready' : 'unknown task'}\n`);
    for (const c of r.checks) {
      process.stdout.write(`  ${c.status.padEnd(8)} ${c.name}: ${c.detail}\n`);
      if (c.hint && c.status !== 'ok') process.stdout.write(`           → ${c.hint}\n`);
    }
  }
}

function progressLine(status: StatusLine): (p: FetchProgress) => void {
  let last = 0;
  return (p) => {
    const now = Date.now(); // display pacing only
    const done = p.total !== null && p.received === p.total;
    if (!done && now - last < (status.live ? 200 : 5000)) return;
    last = now;
    const mb = (n: number) => (n / 1e6).toFixed(1);
    status.show(`${p.file}: ${mb(p.received)} MB${p.total !== null ? ` of ${mb(p.total)} MB (${Math.floor((100 * p.received) / p.total)}%)` : ''}`);
  };
}
