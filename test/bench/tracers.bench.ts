// `npm run bench -- tracers [--execs N] [--calls N] [--scripts N] [--rounds N]`: ways to see every exec
// of the agent with its argv, measured side by side on the same workloads (docs/runs.md, "Process
// tracing: alternatives measured"):
// - bare: nothing watches;
// - strace: a2rl's strace flags without the exec hold, output thrown away (ptrace's own cost);
// - strace-pidns: the same with strace's --pidns-translation, which a2rl used until the tracer's worker
//   mapped namespace pids itself (process-tracer-pids.ts);
// - a2rl-strace: a2rl's tracer on strace as a run used it (StraceTracer: strace, SIGSTOP at every
//   exec, the worker's capture of the image and script, the resume), sandbox and record left out;
// - a2rl-trace: a2rl's own tracer as a run uses it now (native/a2rl-trace.c: each exec held in its
//   ptrace stop until the worker has captured it), sandbox and record left out;
// - ptrace-hold, seccomp-notify, cnproc: prototypes in C (test/bench/tracers/*.c, built here with gcc):
//   a minimal ptrace tracer holding each exec at PTRACE_EVENT_EXEC, seccomp user notification on
//   execve/execveat, the kernel's proc connector;
// - bpftrace: eBPF (Debian's bpftrace), execve's argv and exits of the workload's cgroup, printed;
// - audit: the kernel's audit (Debian's auditd), an execve rule for the workload's uid.
// Workloads: `execs` (N × /bin/true from a bash loop), `shell` (the overhead bench's shell calls: git
// status, grep, python3 -c), `scripts` (#! scripts deleted by their parent right after starting them),
// `pidns` (/bin/true in a loop inside bwrap's pid namespace).
// Printed: per way and workload the best wall time of the rounds, its ratio to bare, the cost per exec
// over bare, and what the way saw (execs, argv read, programs and scripts read, forks, exit statuses);
// a way that cannot run here says why. One JSON line at the end.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { StraceTracer, straceFlags, straceWorks } from '../../modules/instrumentation/process-tracer.js';
import { ptraceTracerBinary, ptraceTracerProblem } from '../../modules/instrumentation/ptrace-tracer.js';

interface Options {
  execs: number;
  calls: number;
  scripts: number;
  rounds: number;
}

/** What a way saw of one workload run (the prototypes' JSON; the a2rl tracer's facts). */
interface Seen {
  execs?: number;
  argv_ok?: number;
  argv_missed?: number;
  file_ok?: number;
  file_missed?: number;
  script_ok?: number;
  script_missed?: number;
  forks?: number;
  exits?: number;
  exit_status?: number;
  at_exec?: number;
  gaps?: number;
}

interface Result {
  seconds: number;
  seen?: Seen;
  /** The workload failed under this way (e.g. bwrap's pid namespace as an unprivileged uid). */
  error?: string;
}

type Way = (workload: string, dir: string) => Promise<Result>;

const WORKLOADS = ['execs', 'shell', 'scripts', 'pidns'] as const;
type Workload = (typeof WORKLOADS)[number];
const BENCH_UID = 64_123;
const CGROUP = '/sys/fs/cgroup/unified/a2rl-bench-tracers';

function parseOptions(argv: string[]): Options {
  const o: Options = { execs: 1000, calls: 300, scripts: 100, rounds: 3 };
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '') as keyof Options;
    if (key in o && /^\d+$/.test(argv[i + 1] ?? '')) o[key] = Number(argv[++i]);
    else throw new Error(`tracers bench: bad option "${argv[i]}" (--execs N --calls N --scripts N --rounds N)`);
  }
  return o;
}

/** The bash source of each workload, run in a fresh directory. */
function script(w: Workload, o: Options): string {
  if (w === 'execs') return `for ((i = 0; i < ${o.execs}; i++)); do /bin/true; done`;
  if (w === 'shell')
    return [
      'mkdir -p code/pkg && for m in 0 1 2 3 4 5 6 7 8 9; do for k in 0 1 2 3 4 5 6 7 8 9; do echo "def f$k(x): return x + $m"; done > code/pkg/mod$m.py; done',
      'git init -q code',
      `for ((i = 0; i < ${o.calls}; i++)); do case $((i % 3)) in 0) git -C code status --short > /dev/null ;; 1) grep -rl "def f7" code/pkg > /dev/null ;; 2) python3 -c "print($i)" > /dev/null ;; esac; done`,
    ].join('\n');
  if (w === 'pidns') return `bwrap --unshare-pid --dev-bind / / --proc /proc -- bash -c 'for ((i = 0; i < ${o.scripts}; i++)); do /bin/true; done'`;
  return `for ((i = 0; i < ${o.scripts}; i++)); do printf '#!/bin/sh\\nexit 0\\n' > s$i.sh; chmod +x s$i.sh; ./s$i.sh 2>/dev/null & rm -f s$i.sh; wait; done`;
}

function run(file: string, args: string[], dir: string, env: NodeJS.ProcessEnv = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd: dir, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: dir, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
    child.once('error', reject);
    child.once('exit', (code, signal) => (code === 0 ? resolve(0) : reject(new Error(`${file} exited with ${code ?? signal}`))));
  });
}

async function timed(f: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await f();
  return (performance.now() - t0) / 1000;
}

const bare: Way = async (src, dir) => ({ seconds: await timed(() => run('bash', ['-c', src], dir)) });

/** a2rl's strace flags less the exec hold (as the overhead bench's "strace alone"). */
const straceOnly: Way = async (src, dir) => {
  const flags = straceFlags(undefined);
  const hold = flags.findIndex((f) => f.startsWith('inject='));
  const noHold = [...flags.slice(0, hold - 1), ...flags.slice(hold + 1)];
  return { seconds: await timed(() => run('strace', [...noHold, '-o', '/dev/null', '--', 'bash', '-c', src], dir)) };
};

/** The same with --pidns-translation: what strace's own translation out of bwrap's pid namespace costs (it scans /proc). */
const stracePidns: Way = async (src, dir) => {
  const flags = ['--pidns-translation', ...straceFlags(undefined)];
  const hold = flags.findIndex((f) => f.startsWith('inject='));
  const noHold = [...flags.slice(0, hold - 1), ...flags.slice(hold + 1)];
  return { seconds: await timed(() => run('strace', [...noHold, '-o', '/dev/null', '--', 'bash', '-c', src], dir)) };
};

/** a2rl's tracer (StraceTracer) as agent-process.ts uses it, the facts counted instead of recorded. */
const a2rlTracer = (kind: 'strace' | 'ptrace'): Way => async (src, dir) => {
  const seen: Required<Pick<Seen, 'execs' | 'at_exec' | 'file_ok' | 'script_ok' | 'script_missed' | 'exits' | 'exit_status' | 'gaps'>> = {
    execs: 0,
    at_exec: 0,
    file_ok: 0,
    script_ok: 0,
    script_missed: 0,
    exits: 0,
    exit_status: 0,
    gaps: 0,
  };
  const seconds = await timed(async () => {
    const tracer = new StraceTracer(kind === 'ptrace' ? ptraceTracerBinary()! : 'strace', {
      onStart: (p) => {
        seen.execs++;
        if (p.capture === 'at-exec') seen.at_exec++;
        if (p.exe?.sha256) seen.file_ok++;
        if (p.script?.sha256) seen.script_ok++;
        else if (p.script) seen.script_missed++;
      },
      onExit: (p) => {
        seen.exits++;
        if (p.exitCode !== undefined || p.signal !== undefined) seen.exit_status++;
      },
      onGap: () => seen.gaps++,
    }, kind);
    await tracer.ready;
    const w = tracer.wrap('/bin/bash', ['-c', src]);
    const child = spawn(w.file, w.args, { cwd: dir, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: dir }, stdio: ['ignore', 'ignore', 'inherit'] });
    if (child.pid !== undefined) tracer.start(child.pid, dir);
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    await tracer.finish(3000);
    if (code !== 0) throw new Error(`a2rl-${kind}: the workload exited with ${code}`);
  });
  return { seconds, seen };
};

/** A prototype in C: its counts come back as a JSON line in a file. */
function prototype(binary: string): Way {
  return async (src, dir) => {
    const out = path.join(dir, '..', `${path.basename(dir)}.counts`);
    const seconds = await timed(() => run(binary, ['bash', '-c', src], dir, { A2RL_TRACER_OUT: out }));
    const line = readFileSync(out, 'utf8').trim().split('\n').pop()!;
    rmSync(out, { force: true });
    const { way: _way, seconds: _own, root_status: _status, ...seen } = JSON.parse(line) as Seen & { way: string; seconds: number; root_status: number };
    return { seconds, seen };
  };
}

/** eBPF through bpftrace: execve's argv and exits (with status) of the workload's cgroup, printed. */
function bpftraceWay(): Way {
  return async (src, dir) => {
    mkdirSync(CGROUP, { recursive: true });
    const out = path.join(dir, '..', `${path.basename(dir)}.bpf`);
    const prog = [
      `tracepoint:syscalls:sys_enter_execve /cgroup == cgroupid("${CGROUP}")/ { printf("E %d ", pid); join(args->argv); }`,
      `tracepoint:syscalls:sys_exit_execve /cgroup == cgroupid("${CGROUP}") && args->ret == 0/ { printf("K %d\\n", pid); }`,
      `tracepoint:sched:sched_process_exit /cgroup == cgroupid("${CGROUP}") && pid == tid/ { printf("X %d %d\\n", pid, curtask->exit_code >> 8); }`,
    ].join('\n');
    const tracer = spawn('bpftrace', ['-o', out, '-e', prog], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise((r) => tracer.once('exit', r));
    let err = '';
    tracer.stderr!.on('data', (c) => (err += c));
    let seconds: number;
    try {
      await waitFor(() => tracer.exitCode === null && existsSync(out) && readFileSync(out, 'utf8').includes('Attaching'), 30_000, () => `bpftrace did not attach: ${err.trim()}`);
      seconds = await timed(() => run('sh', ['-c', `echo $$ > ${CGROUP}/cgroup.procs && exec bash -c "$0"`, src], dir));
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      tracer.kill('SIGINT');
      const killer = setTimeout(() => tracer.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(killer);
    }
    const lines = readFileSync(out, 'utf8').split('\n');
    rmSync(out, { force: true });
    const count = (p: string) => lines.filter((l) => l.startsWith(p)).length;
    return { seconds, seen: { execs: count('K '), argv_ok: count('E '), exits: count('X '), exit_status: count('X ') } };
  };
}

/** The kernel's audit, read by auditd: an execve/execveat rule for the workload's uid. */
function auditWay(): Way {
  return async (src, dir) => {
    const log = '/var/log/audit/audit.log';
    const before = existsSync(log) ? readFileSync(log).length : 0;
    const daemon = spawn('auditd', ['-n'], { stdio: 'ignore' });
    const exited = new Promise((r) => daemon.once('exit', r));
    try {
      await waitFor(() => /^pid [1-9]/m.test(spawnSync('auditctl', ['-s'], { encoding: 'utf8' }).stdout), 10_000, () => 'auditd did not register');
      const rule = ['always,exit', '-F', 'arch=b64', '-S', 'execve,execveat', '-F', `uid=${BENCH_UID}`, '-k', 'a2rl-bench'];
      execFileSync('auditctl', ['-a', ...rule], { stdio: 'ignore' });
      execFileSync('auditctl', ['-e', '1'], { stdio: 'ignore' });
      let seconds: number;
      try {
        seconds = await timed(() => run('setpriv', [`--reuid=${BENCH_UID}`, `--regid=${BENCH_UID}`, '--clear-groups', 'bash', '-c', src], dir));
      } finally {
        execFileSync('auditctl', ['-d', ...rule], { stdio: 'ignore' });
        execFileSync('auditctl', ['-e', '0'], { stdio: 'ignore' });
      }
      await new Promise((r) => setTimeout(r, 500));
      const text = existsSync(log) ? readFileSync(log).subarray(before).toString('utf8') : '';
      const syscalls = text.split('\n').filter((l) => l.startsWith('type=SYSCALL') && l.includes('key="a2rl-bench"'));
      return { seconds, seen: { execs: syscalls.filter((l) => l.includes('success=yes')).length, argv_ok: text.split('\n').filter((l) => l.startsWith('type=EXECVE')).length } };
    } finally {
      daemon.kill('SIGTERM');
      const killer = setTimeout(() => daemon.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(killer);
    }
  };
}

async function waitFor(cond: () => boolean, ms: number, why: () => string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(why());
    await new Promise((r) => setTimeout(r, 50));
  }
}

const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

/** Builds the C prototypes into `dir`; null (with the reason) where gcc or a prototype cannot. */
function buildPrototypes(dir: string): Record<string, string> | string {
  if (!has('gcc')) return 'gcc not installed';
  const sources = [fileURLToPath(new URL('../../../test/bench/tracers/', import.meta.url)), path.resolve('test/bench/tracers')].find((d) => existsSync(path.join(d, 'common.h')));
  if (!sources) return 'test/bench/tracers/ not found';
  const built: Record<string, string> = {};
  for (const name of ['ptrace-hold', 'seccomp-notify', 'cnproc']) {
    const out = path.join(dir, name);
    execFileSync('gcc', ['-O2', '-Wall', '-o', out, path.join(sources, `${name}.c`)], { stdio: 'inherit' });
    built[name] = out;
  }
  return built;
}

/** Whether `way` runs here, tried once on a tiny workload; the error's first line if not. */
async function probe(way: Way, work: string): Promise<string | undefined> {
  const dir = mkdtempSync(path.join(work, 'probe-'));
  chownSync(dir, BENCH_UID, BENCH_UID);
  try {
    await way('/bin/true; /bin/true', dir);
    return undefined;
  } catch (err) {
    return (err as Error).message.split('\n')[0];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (n: number, d = 3) => Number(n.toFixed(d));

export async function tracersBench(): Promise<void> {
  const o = parseOptions(process.argv.slice(3));
  const loadStart = os.loadavg()[0];
  const work = mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-tracers-'));
  chownSync(work, BENCH_UID, BENCH_UID);
  const ways: Record<string, Way> = { bare };
  const unavailable: Record<string, string> = {};
  if (straceWorks()) Object.assign(ways, { strace: straceOnly, 'strace-pidns': stracePidns, 'a2rl-strace': a2rlTracer('strace') });
  else unavailable.strace = unavailable['a2rl-strace'] = 'strace does not work here';
  if (ptraceTracerBinary()) ways['a2rl-trace'] = a2rlTracer('ptrace');
  else unavailable['a2rl-trace'] = ptraceTracerProblem() ?? 'a2rl-trace does not work here';
  const built = buildPrototypes(work);
  if (typeof built === 'string') for (const n of ['ptrace-hold', 'seccomp-notify', 'cnproc']) unavailable[n] = built;
  else for (const [n, bin] of Object.entries(built)) ways[n] = prototype(bin);
  if (!has('bpftrace')) unavailable.bpftrace = 'bpftrace not installed (Debian package bpftrace)';
  else ways.bpftrace = bpftraceWay();
  if (!has('auditd') || !has('auditctl')) unavailable.audit = 'auditd not installed (Debian package auditd)';
  else ways.audit = auditWay();
  for (const [name, way] of Object.entries(ways)) {
    if (name === 'bare') continue;
    const why = await probe(way, work);
    if (why) {
      unavailable[name] = why;
      delete ways[name];
    }
  }
  for (const [n, why] of Object.entries(unavailable)) console.log(`${n}: unavailable here: ${why}`);
  console.log(`ways: ${Object.keys(ways).join(', ')}; ${o.execs} execs, ${o.calls} shell calls, ${o.scripts} scripts; ${o.rounds} rounds`);
  const best: Record<string, Record<string, Result>> = {};
  try {
    for (let r = 1; r <= o.rounds; r++) {
      for (const w of WORKLOADS) {
        for (const [name, way] of Object.entries(ways)) {
          const dir = mkdtempSync(path.join(work, `${w}-${name}-`));
          chownSync(dir, BENCH_UID, BENCH_UID);
          process.stdout.write(`${w}/${name} `);
          const res = await way(script(w, o), dir).catch((err: Error): Result => ({ seconds: Infinity, error: err.message.split('\n')[0] }));
          rmSync(dir, { recursive: true, force: true });
          best[w] ??= {};
          if (!best[w][name] || res.seconds < best[w][name].seconds) best[w][name] = res;
        }
      }
      console.log(`round ${r} done (load ${os.loadavg()[0].toFixed(2)})`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
    rmSync(CGROUP, { recursive: true, force: true });
  }
  const execsOf: Record<Workload, number> = { execs: o.execs, shell: o.calls, scripts: o.scripts, pidns: o.scripts };
  const table: Record<string, Record<string, unknown>> = {};
  for (const w of WORKLOADS) {
    const base = best[w].bare.seconds;
    table[w] = {};
    console.log(`${w}: bare ${base.toFixed(3)} s`);
    for (const [name, r] of Object.entries(best[w])) {
      if (name === 'bare') continue;
      if (r.error) {
        table[w][name] = { error: r.error };
        console.log(`  ${name.padEnd(15)} failed: ${r.error}`);
        continue;
      }
      const perExecMs = ((r.seconds - base) * 1000) / execsOf[w];
      table[w][name] = { s: round(r.seconds), ratio: round(r.seconds / base), ms_per_exec: round(perExecMs, 3), ...(r.seen ? { seen: r.seen } : {}) };
      console.log(`  ${name.padEnd(15)} ${r.seconds.toFixed(3)} s  ${(r.seconds / base).toFixed(2)}×  ${perExecMs.toFixed(3)} ms/exec over bare  ${r.seen ? JSON.stringify(r.seen) : ''}`);
    }
    table[w].bare = { s: round(base) };
  }
  console.log(
    JSON.stringify({
      bench: 'tracers',
      scale: o,
      workloads: table,
      unavailable,
      load_1m_start: round(loadStart, 2),
      load_1m_end: round(os.loadavg()[0], 2),
      cores: os.availableParallelism(),
    }),
  );
}
