// `npm run bench -- timings`: how fast a2rl enforces its limits and does its routine work. These
// goals used to be timed assertions in the specs, which fail on a busy machine; the specs keep the
// behaviour (the tree is killed, the loop times out, the server is given up on), this bench measures
// the time each took against the limit it enforces (the reference), on this machine, now.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ProcessMonitor, type ProcessExit, type ProcessStart } from '../../modules/instrumentation/process-monitor.js';
import { straceWorks } from '../../modules/instrumentation/process-tracer.js';
import { launchAgent } from '../../modules/runs/agent-process.js';
import { createEvaluationContext } from '../../modules/serving/model-server.js';
import { loadServingConfig } from '../../modules/serving/serving.config.js';
import { runSample } from '../../tasks/humaneval/sample-run.js';
import { refArith } from '../../tasks/ref-arith/index.js';
import { refHousehold } from '../../tasks/ref-household/index.js';
import { refJudge } from '../../tasks/ref-judge/index.js';
import { agentEnv, materializeInTemp, runNode } from '../../tasks/ref-common/spec-helpers.js';
import { startStubGradingServer } from '../../tasks/ref-common/stub-grading-server.js';
import type { TaskPack } from '../../tasks/task-pack.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import { eventTime } from '../../modules/ledger/events/event-time.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import { withRunApp } from '../../src/commands/cli-support.js';

interface Figure {
  /** What was measured, in ms. */
  ms: number;
  /** The limit being enforced (or the reference the goal is relative to), in ms; 0 when none. */
  referenceMs: number;
  goalMs: number;
  pass: boolean;
}

const figure = (ms: number, referenceMs: number, goalMs: number): Figure => ({ ms: Math.round(ms), referenceMs, goalMs, pass: ms <= goalMs });

/** The /proc poller's start time of a process against when the harness spawned it. */
async function processStartTime(): Promise<Figure> {
  const starts: ProcessStart[] = [];
  const spawnedAt = Date.now();
  const child = spawn('bash', ['-c', 'sleep 0.5'], { stdio: 'ignore' });
  const monitor = new ProcessMonitor({ rootPid: child.pid!, intervalMs: 50, onStart: (p) => starts.push(p) }).start();
  await once(child, 'exit');
  monitor.stop();
  const root = starts.find((s) => s.pid === child.pid);
  return figure(root ? Math.abs(root.startedAt - spawnedAt) : Infinity, 0, 5_000);
}

/** A tree that ignores SIGTERM, with a setsid grandchild: gone after budget + grace (the reference). */
async function budgetKill(): Promise<Figure> {
  const budgetMs = 600;
  const graceMs = 400;
  const script = `trap "" TERM; sleep 97.1 & setsid bash -c 'trap "" TERM; sleep 97.2; true' & wait`;
  const started = Date.now();
  const agent = await launchAgent({ file: 'bash', args: ['-c', script], cwd: os.tmpdir(), env: process.env, budgetMs, graceMs, onOutput: () => {} });
  await agent.exited;
  return figure(Date.now() - started, budgetMs + graceMs, 5_000);
}

/** An operator interrupt: kill() of a cooperative agent until its exit is known. */
async function interruptStop(): Promise<Figure> {
  const agent = await launchAgent({ file: 'bash', args: ['-c', 'sleep 120'], cwd: os.tmpdir(), env: process.env, budgetMs: 600_000, graceMs: 1_000, onOutput: () => {} });
  const t0 = Date.now();
  await agent.kill('killed');
  return figure(Date.now() - t0, 1_000, 20_000);
}

/** A model server that never becomes ready: given up on after its readiness timeout (1 s). */
async function readinessTimeout(dir: string): Promise<Figure> {
  const config = loadServingConfig({
    A2RL_SERVE_COMMAND: `${process.execPath} ${path.resolve('test/servers/fake-vllm.mjs')} {model_path} --port {port} --served-model-name {name} --mode never-ready --child`,
    A2RL_SERVE_READY_TIMEOUT: '1s',
  });
  writeFileSync(path.join(dir, 'answers.json'), '{"rules":[],"default":"x"}');
  const t0 = Date.now();
  await createEvaluationContext(config, 'cpu', { stopGraceMs: 1_000, pollMs: 50 })
    .serve(dir)
    .then((m) => m.stop(), () => undefined);
  return figure(Date.now() - t0, 1_000, 5_000);
}

/** HumanEval's sandbox killing an infinite loop at its time limit (3 s). */
async function humanevalTimeout(): Promise<Figure> {
  const limits = { timeMs: 3_000, memoryBytes: 512 * 1024 ** 2, outputBytes: 64 * 1024 };
  const problem = { task_id: 'Bench/0', prompt: 'def f(x):\n    """Return x."""\n', canonical_solution: '    return x\n', test: 'def check(c):\n    assert c(1) == 1\n', entry_point: 'f' };
  const t0 = Date.now();
  const result = await runSample(problem, 'while True:\n    pass\n', limits);
  if (result.outcome !== 'timeout') throw new Error(`humaneval sandbox: expected a timeout, got ${result.outcome}`);
  return figure(Date.now() - t0, limits.timeMs, limits.timeMs + 2_000);
}

/** A reference task: materialising it (goal 1 s) and grading the base checkpoint. */
async function packWork(pack: TaskPack, dir: string, evaluateGoalMs: number): Promise<{ materialize: Figure; evaluate: Figure }> {
  const paths = { dataDir: path.join(dir, 'data'), modelDir: path.join(dir, 'model'), privateDir: path.join(dir, 'private') };
  let t0 = Date.now();
  await pack.materialize(paths);
  const materialize = figure(Date.now() - t0, 0, 1_000);
  t0 = Date.now();
  await pack.evaluate(paths.modelDir, paths.privateDir);
  return { materialize, evaluate: figure(Date.now() - t0, 0, evaluateGoalMs) };
}

/** A reference task's agent script (revise, train, submit) against a stub grading API, outside the harness (goal 20 s). */
async function referenceScript(pack: TaskPack): Promise<Figure> {
  const own = await materializeInTemp(pack);
  try {
    const baselineScore = (await pack.evaluate(own.paths.modelDir, own.paths.privateDir)).score;
    const server = await startStubGradingServer(pack, { workspace: own.workspace, privateDir: own.paths.privateDir, baselineScore });
    try {
      const t0 = Date.now();
      const run = await runNode(path.resolve('modules/agents/reference', pack.id, 'agent.mjs'), [], agentEnv(pack, own, server.url));
      if (run.code !== 0) throw new Error(`${pack.id} reference agent exited ${run.code}: ${run.stderr}`);
      return figure(Date.now() - t0, 0, 20_000);
    } finally {
      await server.close();
    }
  } finally {
    rmSync(own.root, { recursive: true, force: true });
  }
}

/** The reference agent's whole ref-household run through the harness (sandbox, tracing, grading). */
async function referenceAgentRun(home: string): Promise<Figure> {
  for (const name of ['A2RL_LEDGER_URL', 'A2RL_ARTIFACTS_URL', 'A2RL_READMODEL_URL', 'A2RL_WORKSPACES_DIR']) delete process.env[name];
  process.env.A2RL_HOME = home;
  const runId = await withRunApp(async (runs, gradingBaseUrl) =>
    (await runs.run({ task: 'ref-household', agent: 'reference', budgetSeconds: 90, seed: 0, gradingBaseUrl, warn: () => {} })).runId,
  );
  // From the ledger: AgentStarted (appended right after the launch) to the tree seen gone.
  const store = await SqliteEventStore.open(path.join(home, 'ledger.db'));
  let started: string | undefined;
  let exited: string | undefined;
  try {
    for await (const { event } of store.readStream(streamName(runId))) {
      if (event.type === 'AgentStarted') started = eventTime(event);
      if (event.type === 'AgentExited') exited = eventTime(event);
    }
  } finally {
    await store.close();
  }
  const agentMs = started && exited ? Date.parse(exited) - Date.parse(started) : Infinity;
  return figure(agentMs, 90_000, 30_000);
}

/** The exact duration strace gives a child that exits at once (`sh -c "exit 3"`). */
async function straceShortChild(): Promise<Figure | null> {
  if (!straceWorks()) return null;
  const exits: ProcessExit[] = [];
  const starts: ProcessStart[] = [];
  const agent = await launchAgent({
    file: 'bash', args: ['-c', 'sh -c "exit 3"; exit 0'], cwd: os.tmpdir(), env: process.env, budgetMs: 30_000, onOutput: () => {},
    tracer: 'strace', monitor: { onStart: (p) => void starts.push(p), onExit: (p) => void exits.push(p) },
  });
  await agent.exited;
  const child = starts.find((s) => s.argv.join(' ') === 'sh -c exit 3');
  const exit = child && exits.find((e) => e.pid === child.pid);
  return figure(exit ? exit.durationMs : Infinity, 0, 10);
}

export async function timingsBench(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-timings-'));
  try {
    const household = await packWork(refHousehold, path.join(dir, 'household'), 2_000);
    const arith = await packWork(refArith, path.join(dir, 'arith'), 1_000);
    const judge = await packWork(refJudge, path.join(dir, 'judge'), 1_000);
    const figures: Record<string, Figure | null> = {
      process_start_time_error: await processStartTime(),
      budget_kill_term_ignoring_tree: await budgetKill(),
      interrupt_stop: await interruptStop(),
      model_server_readiness_timeout: await readinessTimeout(mkdtempSync(path.join(dir, 'ckpt-'))),
      humaneval_loop_timeout: await humanevalTimeout(),
      strace_short_child_duration: await straceShortChild(),
      ref_household_materialize: household.materialize,
      ref_household_evaluate: household.evaluate,
      ref_household_reference_agent: await referenceAgentRun(path.join(dir, 'home')),
      ref_arith_materialize: arith.materialize,
      ref_arith_evaluate: arith.evaluate,
      ref_arith_reference_script: await referenceScript(refArith),
      ref_judge_materialize: judge.materialize,
      ref_judge_evaluate: judge.evaluate,
      ref_judge_reference_script: await referenceScript(refJudge),
    };
    for (const [name, f] of Object.entries(figures)) {
      console.error(f ? `${name}: ${f.ms} ms (limit/reference ${f.referenceMs} ms, goal ≤ ${f.goalMs} ms) ${f.pass ? 'ok' : 'MISSED'}` : `${name}: skipped (strace cannot trace here)`);
    }
    const measured = Object.values(figures).filter((f): f is Figure => f !== null);
    console.log(JSON.stringify({ bench: 'timings', figures, pass: measured.every((f) => f.pass) }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
