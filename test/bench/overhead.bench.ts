import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { installedAgentPython } from '../../modules/agents/agent-python-env.js';
import { straceFlags } from '../../modules/instrumentation/process-tracer.js';
import { ptraceTracerBinary } from '../../modules/instrumentation/ptrace-tracer.js';
import { withRunApp } from '../../src/commands/cli-support.js';

// `npm run bench -- overhead [--wheels N] [--calls N] [--files N] [--checkpoint-mb N] [--rounds N] [--keep]`: the
// whole-run overhead of a2rl on a realistic agent (test/bench/overhead-agent.sh): pip installs local
// wheels, a small torch training loop on CPU with a data loader, shell tool calls (git, grep,
// python -c), a few thousand files, a large checkpoint, a submission. It runs once bare (a temp
// directory, no sandbox, no tracing, no record; the checkpoint copied with `cp` instead of submitted)
// and once as an a2rl run (task ref-arith; sandboxed, traced and recorded into an embedded SQLite
// ledger and filesystem artifacts under a temp A2RL_HOME). Between them, the bare agent under the
// tracer a run uses (a2rl-trace where it builds, else strace with a2rl's flags) without the exec hold
// (every exec, clone and fork stopped and logged; no capture of what runs, no sandbox, no record):
// the share of the overhead that is tracing itself. The three alternate for --rounds (default
// 2: bare, traced, a2rl, then traced, a2rl, bare, so no side alone pays cold caches) and each phase's
// fastest time counts. Printed: each phase's wall time both ways and their ratio, the agent's work overall (every
// phase but the submission) and the whole run (set-up and teardown included) against the bare agent;
// per phase, the CPU seconds the harness (all its threads) and the tracer spent during it in the a2rl run,
// sampled every 200 ms: what competes with the agent for the cores.

const AGENT = 'overhead-agent.sh';
const PHASES = ['wheels', 'pip', 'train', 'shell', 'files', 'checkpoint'] as const;
const HEREDOC = 'A2RL_BENCH_AGENT_EOF';

interface Options {
  wheels: number;
  calls: number;
  files: number;
  checkpointMb: number;
  rounds: number;
  keep: boolean;
}

type Marks = Record<string, { start: number; end: number }>;

function parseOptions(argv: string[]): Options {
  const o: Options = { wheels: 20, calls: 500, files: 3000, checkpointMb: 1024, rounds: 2, keep: false };
  const keys: Record<string, keyof Omit<Options, 'keep'>> = { '--wheels': 'wheels', '--calls': 'calls', '--files': 'files', '--checkpoint-mb': 'checkpointMb', '--rounds': 'rounds' };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--keep') o.keep = true;
    else if (keys[argv[i]] && /^\d+$/.test(argv[i + 1] ?? '')) o[keys[argv[i]]] = Number(argv[++i]);
    else throw new Error(`overhead bench: bad option "${argv[i]}" (--wheels N --calls N --files N --checkpoint-mb N --rounds N --keep)`);
  }
  if (o.rounds < 1) throw new Error('overhead bench: --rounds must be at least 1');
  return o;
}

const agentArgs = (o: Options, python: string, finish: 'submit' | 'copy') => [python, o.wheels, o.calls, o.files, o.checkpointMb, finish].map(String);

function readMarks(workspace: string): Marks {
  const file = path.join(workspace, 'output', 'overhead-phases.jsonl');
  if (!existsSync(file)) return {};
  const marks: Marks = {};
  for (const line of readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
    const m = JSON.parse(line) as { phase: string; start: number; end: number };
    marks[m.phase] = { start: m.start, end: m.end };
  }
  return marks;
}

/**
 * The command that traces `agent` as a run would, without the exec hold (which waits for a2rl's reader)
 * and with the trace thrown away: a2rl-trace with a control at EOF, or strace with a2rl's flags less
 * the injected SIGSTOP.
 */
function tracingOnly(agent: string[]): string[] {
  const ptrace = ptraceTracerBinary();
  if (ptrace) return [ptrace, '-o', '/dev/null', '-c', '/dev/null', '--', ...agent];
  const flags = straceFlags(undefined);
  const hold = flags.findIndex((f) => f.startsWith('inject='));
  return ['strace', ...(hold < 0 ? flags : [...flags.slice(0, hold - 1), ...flags.slice(hold + 1)]), '-o', '/dev/null', '--', ...agent];
}

/**
 * The agent in a temp directory with nothing of a2rl around it (the reference), or with `traced` under
 * strace as a2rl runs it (its flags, the trace thrown away).
 */
async function runBare(o: Options, python: string, script: string, traced = false): Promise<{ marks: Marks; wallS: number; dir: string }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `a2rl-bench-overhead-${traced ? 'traced' : 'bare'}-`));
  mkdirSync(path.join(dir, 'output'));
  const started = Date.now();
  const agent = ['bash', script, ...agentArgs(o, python, 'copy')];
  const [file, ...args] = traced ? tracingOnly(agent) : agent;
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(file, args, { cwd: dir, env: { PATH: `${path.dirname(python)}:/usr/bin:/bin`, HOME: dir }, stdio: ['ignore', 'inherit', 'inherit'] });
    child.once('error', reject);
    child.once('exit', resolve);
  });
  if (code !== 0) throw new Error(`overhead bench: the ${traced ? 'traced' : 'bare'} agent exited with ${code}`);
  return { marks: readMarks(dir), wallS: (Date.now() - started) / 1000, dir };
}

/**
 * Writes out every dirty page before a side starts: the checkpoint phase fsyncs 1 GB, and a side that
 * followed another's run (its checkpoint and, for a2rl, the staged copy still being written back)
 * paid for those pages too (fastest bare checkpoint phase 3.09 s against 1.52 s traced, same run).
 */
function flushDirtyPages(): void {
  spawnSync('sync', { stdio: 'ignore' });
}

/** The agent script: next to this file in the source tree (the bench itself runs from dist/). */
function agentScript(): string {
  const candidates = [fileURLToPath(new URL(`../../../test/bench/${AGENT}`, import.meta.url)), path.resolve('test/bench', AGENT)];
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`overhead bench: ${AGENT} not found (looked in ${candidates.join(', ')})`);
  return found;
}

const seconds = (m: { start: number; end: number } | undefined) => (m ? m.end - m.start : null);
const round = (n: number, digits = 2) => Number(n.toFixed(digits));
const ratio = (a: number | null, b: number | null) => (a === null || b === null || b <= 0 ? null : round(a / b, 3));

/** Each phase's fastest time over the rounds (a phase a round did not reach is left out of that round). */
function fastest(rounds: Marks[]): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  for (const p of [...PHASES, 'submit']) {
    const times = rounds.map((m) => seconds(m[p])).filter((t): t is number => t !== null);
    out[p] = times.length ? Math.min(...times) : null;
  }
  return out;
}

/** CPU seconds so far of the harness (this process, all its threads) and of the strace tracing the agent, at epoch second `t`. */
interface CpuSample {
  t: number;
  harness: number;
  tracer: number;
}

const CLK_TCK = 100;

/** utime + stime of a process in seconds (/proc/<pid>/stat), undefined when it is gone. */
function procCpuS(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/** The tracers of this process's children (TracerPid of each: strace for the traced agent). */
function tracerPids(): number[] {
  const out = new Set<number>();
  let tasks: string[] = [];
  try {
    tasks = readdirSync('/proc/self/task');
  } catch {
    return [];
  }
  for (const task of tasks) {
    let children: string[] = [];
    try {
      children = readFileSync(`/proc/self/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    } catch {
      continue;
    }
    for (const child of children) {
      try {
        const tracer = Number(/^TracerPid:\s+(\d+)/m.exec(readFileSync(`/proc/${child}/status`, 'utf8'))?.[1] ?? 0);
        if (tracer > 0) out.add(tracer);
      } catch {
        // gone
      }
    }
  }
  return [...out];
}

/** Samples the harness's and the tracer's CPU every 200 ms until stopped. */
function sampleCpu(): () => CpuSample[] {
  const samples: CpuSample[] = [];
  const tracerCpu = new Map<number, number>();
  const take = () => {
    const u = process.cpuUsage();
    for (const pid of tracerPids()) {
      const cpu = procCpuS(pid);
      if (cpu !== undefined) tracerCpu.set(pid, cpu);
    }
    samples.push({ t: Date.now() / 1000, harness: (u.user + u.system) / 1e6, tracer: [...tracerCpu.values()].reduce((a, b) => a + b, 0) });
  };
  take();
  const timer = setInterval(take, 200);
  return () => {
    clearInterval(timer);
    take();
    return samples;
  };
}

/** CPU seconds spent between epoch seconds `from` and `to`, by linear interpolation between samples. */
function cpuBetween(samples: CpuSample[], key: 'harness' | 'tracer', from: number, to: number): number | null {
  const at = (t: number): number | null => {
    const i = samples.findIndex((s) => s.t >= t);
    if (i <= 0) return i === 0 ? samples[0][key] : null;
    const [a, b] = [samples[i - 1], samples[i]];
    return a[key] + ((b[key] - a[key]) * (t - a.t)) / Math.max(1e-9, b.t - a.t);
  };
  const [x, y] = [at(from), at(to)];
  return x === null || y === null ? null : Math.max(0, y - x);
}

/** One a2rl run of the agent under a fresh A2RL_HOME: its phase marks and wall time. */
async function runWithA2rl(o: Options, interpreter: string, source: string, budgetS: number): Promise<{ marks: Marks; wallS: number; runId: string; sandbox: string; exit: string; home: string; cpu: CpuSample[] }> {
  const home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-overhead-home-'));
  for (const name of ['A2RL_LEDGER_URL', 'A2RL_ARTIFACTS_URL', 'A2RL_READMODEL_URL', 'A2RL_WORKSPACES_DIR']) delete process.env[name];
  process.env.A2RL_HOME = home;
  const agentCommand = `cat > output/agent.sh <<'${HEREDOC}'\n${source}${source.endsWith('\n') ? '' : '\n'}${HEREDOC}\nexec bash output/agent.sh ${agentArgs(o, interpreter, 'submit').join(' ')}\n`;
  const started = Date.now();
  const stopSampling = sampleCpu();
  let cpu: CpuSample[] = [];
  const summary = await withRunApp((runs, gradingBaseUrl) => runs.run({ task: 'ref-arith', agentCommand, budgetSeconds: budgetS, seed: 0, gradingBaseUrl, warn: (m) => console.error(m) })).finally(() => {
    cpu = stopSampling();
  });
  const wallS = (Date.now() - started) / 1000;
  console.log(`a2rl run ${summary.runId}: sandbox ${summary.sandbox}, exit ${summary.exitReason}, ${wallS.toFixed(1)} s wall (budget ${budgetS} s)`);
  return { marks: readMarks(summary.workspace), wallS, runId: summary.runId, sandbox: summary.sandbox, exit: summary.exitReason, home, cpu };
}

const fmt = (n: number | null) => (n === null ? '-' : n.toFixed(2));

export async function overheadBench(): Promise<void> {
  const o = parseOptions(process.argv.slice(3));
  const python = installedAgentPython(process.env);
  if (!python) throw new Error('overhead bench: the agent Python environment (torch) is not installed: `a2rl agents python install` (npm test\'s pretest installs it)');
  const interpreter = path.join(python, 'bin', 'python');
  const script = agentScript();
  const source = readFileSync(script, 'utf8');
  if (source.split('\n').includes(HEREDOC)) throw new Error(`the agent script must not contain the line ${HEREDOC}`);
  console.log(`scale: ${o.wheels} wheels, ${o.calls} shell calls, ${o.files} files, a ${o.checkpointMb} MB checkpoint; ${o.rounds} rounds; python ${interpreter}`);
  const loadStart = os.loadavg()[0];
  const cleanup: string[] = [];
  const bareRounds: Array<{ marks: Marks; wallS: number }> = [];
  const tracedRounds: Array<{ marks: Marks; wallS: number }> = [];
  const onRounds: Array<Awaited<ReturnType<typeof runWithA2rl>>> = [];
  try {
    // Each round starts with the next side (bare, traced, a2rl; then traced, a2rl, bare; ...): a side
    // that always came first or last got the disk in the same state every time (its checkpoint phase
    // was the fastest of every run here, whichever side it was).
    // The bare agent, untraced or under the tracer alone: its phases, and for the untraced one the cp of the checkpoint.
    const runAgent = async (round: number, traced: boolean) => {
      const run = await runBare(o, interpreter, script, traced);
      cleanup.push(run.dir);
      (traced ? tracedRounds : bareRounds).push(run);
      const cp = traced ? '' : `; cp of the checkpoint ${fmt(seconds(run.marks.submit))} s`;
      console.log(`round ${round} ${traced ? 'traced' : 'bare'}: ${PHASES.map((p) => `${p} ${fmt(seconds(run.marks[p]))} s`).join(', ')}${cp}; ${run.wallS.toFixed(1)} s wall`);
    };
    const sides = {
      bare: (round: number) => runAgent(round, false),
      traced: (round: number) => runAgent(round, true),
      a2rl: async () => {
        // Round 1 runs the bare agent first: its time sizes the budget.
        const on = await runWithA2rl(o, interpreter, source, Math.ceil(3 * bareRounds[0]!.wallS + 120));
        cleanup.push(on.home);
        onRounds.push(on);
        if (on.exit !== 'completed') console.log(`  the agent did not complete (${on.exit}): \`A2RL_HOME=${on.home} a2rl logs ${on.runId}\` (with --keep)`);
      },
    };
    const order = ['bare', 'traced', 'a2rl'] as const;
    for (let round = 1; round <= o.rounds; round++) {
      for (let k = 0; k < order.length; k++) {
        flushDirtyPages();
        await sides[order[(k + round - 1) % order.length]](round);
      }
    }
    const tracer = ptraceTracerBinary() ? 'a2rl-trace' : 'strace';
    const off = fastest(bareRounds.map((r) => r.marks));
    const on = fastest(onRounds.map((r) => r.marks));
    const strace = fastest(tracedRounds.map((r) => r.marks));
    const total = (t: Record<string, number | null>) => (PHASES.every((p) => t[p] !== null) ? PHASES.reduce((n, p) => n + t[p]!, 0) : null);
    const [work, bareWork, tracedWork] = [total(on), total(off), total(strace)];
    const runWallS = Math.min(...onRounds.map((r) => r.wallS));
    const bareWallS = Math.min(...bareRounds.map((r) => r.wallS));
    const s = (t: number | null) => (t === null ? null : round(t));
    // CPU the harness (every thread) and strace spent during each phase of the a2rl round where that phase was fastest: what competes with the agent for the cores.
    const cpuOf = (p: string, key: 'harness' | 'tracer') => {
      const r = onRounds.filter((x) => x.marks[p]).sort((a, b) => seconds(a.marks[p])! - seconds(b.marks[p])!)[0];
      const v = r ? cpuBetween(r.cpu, key, r.marks[p].start, r.marks[p].end) : null;
      return v === null ? null : round(v);
    };
    const perPhase = Object.fromEntries(
      PHASES.map((p) => [
        p,
        { bare_s: s(off[p]), tracer_alone_s: s(strace[p]), a2rl_s: s(on[p]), tracer_alone_ratio: ratio(strace[p], off[p]), ratio: ratio(on[p], off[p]), harness_cpu_s: cpuOf(p, 'harness'), tracer_cpu_s: cpuOf(p, 'tracer') },
      ]),
    );
    console.log(`fastest of ${o.rounds} round${o.rounds === 1 ? '' : 's'}:`);
    for (const p of PHASES) {
      const x = perPhase[p];
      console.log(`  ${p.padEnd(10)} bare ${fmt(off[p])} s   tracer alone ${fmt(strace[p])} s (${x.tracer_alone_ratio ?? '-'}×)   a2rl ${fmt(on[p])} s (${x.ratio ?? '-'}×; CPU: harness ${fmt(x.harness_cpu_s)} s, tracer ${fmt(x.tracer_cpu_s)} s)`);
    }
    console.log(`  submit     cp ${fmt(off.submit)} s   submission answered in ${fmt(on.submit)} s   ${ratio(on.submit, off.submit) ?? '-'}× cp`);
    console.log(`agent's work (every phase but the submission): bare ${fmt(bareWork)} s, ${tracer} alone ${fmt(tracedWork)} s (${ratio(tracedWork, bareWork) ?? '-'}×), a2rl ${fmt(work)} s: ${ratio(work, bareWork) ?? '-'}× (goal ≤ 1.05×); whole run ${runWallS.toFixed(1)} s against the bare agent's ${bareWallS.toFixed(1)} s: ${ratio(runWallS, bareWallS)}×`);
    const loadEnd = os.loadavg()[0];
    console.log(
      JSON.stringify({
        bench: 'overhead',
        scale: { wheels: o.wheels, calls: o.calls, files: o.files, checkpoint_mb: o.checkpointMb, rounds: o.rounds },
        sandbox: onRounds[0].sandbox,
        completed: onRounds.every((r) => r.exit === 'completed'),
        phases: perPhase,
        submit_s: on.submit === null ? null : round(on.submit),
        checkpoint_cp_s: off.submit === null ? null : round(off.submit),
        submit_vs_cp: ratio(on.submit, off.submit),
        work_ratio: ratio(work, bareWork),
        tracer,
        tracer_alone_work_ratio: ratio(tracedWork, bareWork),
        work_goal: 1.05,
        work_pass: (ratio(work, bareWork) ?? Infinity) <= 1.05,
        run_wall_s: round(runWallS, 1),
        bare_wall_s: round(bareWallS, 1),
        run_vs_bare: ratio(runWallS, bareWallS),
        load_1m_start: round(loadStart),
        load_1m_end: round(loadEnd),
        cores: os.availableParallelism(),
      }),
    );
  } finally {
    if (!o.keep) for (const dir of cleanup) rmSync(dir, { recursive: true, force: true });
    else console.log(`kept: ${cleanup.join(', ')}`);
  }
}
