import { CommanderError, type Command } from 'commander';
import { datasetSpec } from '../../modules/datasets/dataset-registry.js';
import { fetchDataset, type FetchProgress } from '../../modules/datasets/fetch-dataset.js';
import { describeSandbox, sandboxPlan } from '../../modules/runs/sandbox/capabilities.js';
import { diagnoseTask, machineProbe, PAPER_TASKS, type TaskDiagnosis } from '../../modules/datasets/doctor.js';
import { TASKS } from '../../tasks/index.js';
import { loadConfig } from '../config/config.js';

/** Commands that prepare a machine for the paper tasks: data fetch, doctor. */
export function registerDataCommands(program: Command): void {
  const data = program.command('data').description('datasets of the paper tasks (stored under $A2RL_HOME/datasets, outside every workspace)');
  data
    .command('fetch')
    .description('download a task\'s datasets from the Hugging Face Hub (or import them with --from), verify checksums, write manifest.json')
    .argument('<task>', 'gsm8k | humaneval | alpacaeval | alfworld | webshop | deepsearchqa')
    .option('--from <dir>', 'import files fetched elsewhere (air-gapped machines) instead of downloading')
    .option('--base-model <dir>', 'install this Hugging Face checkpoint directory as the task\'s base model')
    .action(async (task: string, opts: { from?: string; baseModel?: string }) => {
      const config = loadConfig();
      const result = await fetchDataset(task, { home: config.home, from: opts.from, baseModel: opts.baseModel, onProgress: progressLine() });
      if (process.stderr.isTTY) process.stderr.write('\n');
      for (const f of result.manifest.files) {
        const how = result.skipped.includes(f.name) ? 'already present' : f.check === 'registry' ? 'verified' : 'hash recorded (first fetch)';
        process.stdout.write(`${f.name}  ${f.size} bytes  sha256 ${f.sha256}  ${how}\n`);
      }
      process.stdout.write(`${task}: ${result.manifest.files.length} file(s) in ${result.dir}\n`);
      const note = datasetSpec(task).environmentData;
      if (note) process.stdout.write(`${task}: ${note}\n`);
      if (result.baseModelMissing) process.stdout.write(`${task} also needs its base checkpoint: a2rl data fetch ${task} --base-model <Hugging Face checkpoint dir>\n`);
    });

  program
    .command('doctor')
    .description('how agents are sandboxed here, and what this machine lacks to run a task (GPU, vLLM, data, judge, search key, environment servers) and how to get it')
    .option('--task <id>', 'only this task (default: the six paper tasks and every registered pack)')
    .option('--sandbox', 'only how agents are sandboxed here (exit 1 when they would run unsandboxed)')
    .action(async (opts: { task?: string; sandbox?: boolean }) => {
      const plan = sandboxPlan();
      process.stdout.write(`sandbox: ${plan.mode}${plan.mode === 'none' ? ' (agents run UNSANDBOXED)' : ''}\n`);
      for (const c of describeSandbox(plan)) process.stdout.write(`  ${c.status.padEnd(8)} ${c.name}: ${c.detail}\n`);
      for (const note of plan.capabilities.notes) process.stdout.write(`           → ${note}\n`);
      if (opts.sandbox) {
        if (plan.mode === 'none') throw new CommanderError(1, 'a2rl.doctor.notReady', '');
        return;
      }
      const probe = machineProbe(loadConfig().home);
      const ids = opts.task ? [opts.task] : [...new Set([...PAPER_TASKS, ...TASKS.map((t) => t.id)])];
      const results: TaskDiagnosis[] = [];
      for (const id of ids) results.push(await diagnoseTask(id, TASKS.find((t) => t.id === id), probe));
      for (const r of results) {
        process.stdout.write(`${r.task}: ${r.ready ? 'ready' : r.implemented ? 'not ready' : 'unknown task'}\n`);
        for (const c of r.checks) {
          process.stdout.write(`  ${c.status.padEnd(8)} ${c.name}: ${c.detail}\n`);
          if (c.hint && c.status !== 'ok') process.stdout.write(`           → ${c.hint}\n`);
        }
      }
      // Exit 1 without an error message: a not-ready machine is an answer, already printed.
      if (!results.every((r) => r.ready)) throw new CommanderError(1, 'a2rl.doctor.notReady', '');
    });
}

function progressLine(): (p: FetchProgress) => void {
  let last = 0;
  return (p) => {
    const now = Date.now(); // display pacing only
    const done = p.total !== null && p.received === p.total;
    if (!done && now - last < (process.stderr.isTTY ? 200 : 5000)) return;
    last = now;
    const mb = (n: number) => (n / 1e6).toFixed(1);
    const line = `${p.file}: ${mb(p.received)} MB${p.total !== null ? ` of ${mb(p.total)} MB (${Math.floor((100 * p.received) / p.total)}%)` : ''}`;
    process.stderr.write(process.stderr.isTTY ? `\r${line.padEnd(80)}` : `${line}\n`);
  };
}
