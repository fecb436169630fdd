import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// `npm run bench -- cli`: how fast the `a2rl` commands an operator types most start and answer. The
// demo's runs (`a2rl demo`, the reference agent on the three reference tasks) are made under a fresh
// A2RL_HOME on the embedded default (SQLite, files); then each command is run as a user runs it (the
// bin, `node src/bin/a2rl.js`, no npx) once to warm the disk cache and the read models, and five
// more times: its median wall time is the figure. Goal (issue 31): each ≤ 0.5 s, or ≤ `--version`
// + 0.3 s where --version alone is slower than 0.2 s (a busy machine). One line per command, then a
// JSON line. A2RL_BENCH_CLI_HOME=<dir> reuses the runs already there (or makes them there once).

const BIN = fileURLToPath(new URL('../../../src/bin/a2rl.js', import.meta.url));
const RUNS = 5;
const DEMO_BUDGET = '20s';

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Median wall time of `a2rl <args>` in ms (after one warm-up run); throws when it fails. */
function time(args: string[], env: NodeJS.ProcessEnv): number {
  const samples: number[] = [];
  for (let i = 0; i <= RUNS; i++) {
    const started = process.hrtime.bigint();
    const r = spawnSync(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 64 * 1024 * 1024 });
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    if (r.status !== 0) throw new Error(`a2rl ${args.join(' ')} exited ${r.status}: ${r.stderr.toString().trim().split('\n').pop()}`);
    if (i > 0) samples.push(ms);
  }
  return Math.round(median(samples));
}

export async function cliBench(): Promise<void> {
  const kept = process.env.A2RL_BENCH_CLI_HOME;
  const home = kept ? path.resolve(kept) : mkdtempSync(path.join(os.tmpdir(), 'a2rl-bench-cli-'));
  const env = { ...process.env, A2RL_HOME: home };
  try {
    let runs = JSON.parse(`[${execFileSync(process.execPath, [BIN, 'runs', '--json'], { env, encoding: 'utf8' }).trim().split('\n').filter(Boolean).join(',')}]`) as { runId: string; task: string }[];
    if (!runs.length) {
      process.stderr.write(`making the demo's runs in ${home} (a2rl demo --budget ${DEMO_BUDGET})…\n`);
      execFileSync(process.execPath, [BIN, 'demo', '--budget', DEMO_BUDGET], { env, stdio: ['ignore', 'ignore', 'inherit'] });
      runs = JSON.parse(`[${execFileSync(process.execPath, [BIN, 'runs', '--json'], { env, encoding: 'utf8' }).trim().split('\n').filter(Boolean).join(',')}]`);
    }
    const run = (runs.find((r) => r.task === 'ref-arith') ?? runs[0]).runId;
    const commands: Record<string, string[]> = {
      version: ['--version'],
      help: ['--help'],
      runs: ['runs'],
      events: ['events', run],
      report: ['report', run],
      scoreboard: ['scoreboard'],
      logs: ['logs', run],
      transcript: ['transcript', run],
    };
    const ms: Record<string, number> = {};
    for (const [name, args] of Object.entries(commands)) {
      ms[name] = time(args, env);
      console.log(`${`a2rl ${args.join(' ')}`.padEnd(60)} ${String(ms[name]).padStart(6)} ms (median of ${RUNS})`);
    }
    const goalMs = Math.max(500, ms.version + 300);
    const goaled = ['help', 'runs', 'events', 'report', 'scoreboard'];
    const failing = goaled.filter((name) => ms[name] > goalMs);
    console.log(`goal: help, runs, events, report, scoreboard ≤ ${goalMs} ms: ${failing.length ? `over: ${failing.join(', ')}` : 'met'}`);
    console.log(JSON.stringify({ bench: 'cli', runs: runs.length, samples: RUNS, ms, goalMs, pass: failing.length === 0, load1: Number(os.loadavg()[0].toFixed(2)) }));
  } finally {
    if (!kept) rmSync(home, { recursive: true, force: true });
  }
}
