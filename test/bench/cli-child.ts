import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The built CLI run as a user runs it, in a child process under an A2RL_HOME: its time, its peak
// RSS (the whole process, its worker threads included) and when each `verify` stage began.
// Shared by the audit and query benches.

const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/cli.js');
const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

/** Records the process's peak RSS (KiB) into $A2RL_BENCH_RSS_FILE when it exits. */
const RSS_HOOK = `data:text/javascript,${encodeURIComponent("import { writeFileSync } from 'node:fs'; process.on('exit', () => writeFileSync(process.env.A2RL_BENCH_RSS_FILE, String(process.resourceUsage().maxRSS)));")}`;

export interface CliRun {
  seconds: number;
  peakRssMb: number;
  stdout: string;
  /** Seconds from the start at which each stage was first reported. */
  stages: Record<string, number>;
}

/** Runs the built CLI in a child process under `home`; times it and reads its peak RSS. */
export async function runCli(home: string, args: string[]): Promise<CliRun> {
  const rssFile = path.join(home, `rss-${args.join('-')}`);
  const started = performance.now();
  const child = spawn(process.execPath, ['--import', RSS_HOOK, CLI, ...args], {
    env: { ...process.env, A2RL_HOME: home, A2RL_BENCH_RSS_FILE: rssFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const stages: Record<string, number> = {};
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    for (const m of d.toString().matchAll(/^verify \S+: (\w+) /gm)) stages[m[1]] ??= round((performance.now() - started) / 1000);
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  const seconds = round((performance.now() - started) / 1000);
  if (code !== 0) throw new Error(`a2rl ${args.join(' ')} exited ${code}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`);
  return { seconds, peakRssMb: round(Number(readFileSync(rssFile, 'utf8')) / 1024, 1), stdout, stages };
}

/** "events from 1.2 s, chain from 3.4 s, …": when each stage began. */
export function stagesOf(run: CliRun): string {
  return Object.entries(run.stages).map(([stage, at]) => `${stage} from ${at} s`).join(', ');
}
