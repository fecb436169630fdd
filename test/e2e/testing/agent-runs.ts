import { lstatSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from '@jest/globals';
import { runA2rl, type CliResult } from '../a2rl-cli.js';

/** What the end-to-end agent specs read back from a run: its events as `a2rl events --json` prints them. */
export interface Ev {
  type: string;
  seq: number;
  data: Record<string, unknown>;
}

/** `a2rl` against one A2RL_HOME. */
export function a2rlAt(home: () => string): (args: string[], env?: Record<string, string>) => Promise<CliResult> {
  return (args, env = {}) => runA2rl(args, { env: { ...process.env, A2RL_HOME: home(), ...env } });
}

export async function runEvents(a2rl: ReturnType<typeof a2rlAt>, runId: string): Promise<Ev[]> {
  return (await a2rl(['events', runId, '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
}

export const ofType = (evs: Ev[], type: string) => evs.filter((e) => e.type === type);

/** Every file under `dir` that contains `needle` (the ledger database, the artifact store, a bundle). */
export function filesContaining(dir: string, needle: string): string[] {
  const hits: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = path.join(d, name);
      const st = lstatSync(p); // links (run_meta.json) are not followed
      if (st.isDirectory()) walk(p);
      else if (st.isFile() && readFileSync(p).includes(needle)) hits.push(path.relative(dir, p));
    }
  };
  walk(dir);
  return hits;
}

type A2rl = (args: string[]) => Promise<CliResult>;

/** The run verifies, exports, and its bundle verifies offline (a reviewer's empty folder, only PATH). */
export async function expectVerifiedAndBundled(a2rl: A2rl, runId: string, home: string): Promise<void> {
  const verify = await a2rl(['verify', runId]);
  expect(verify.stderr + verify.stdout).toMatch(/OK/);
  expect(verify.code).toBe(0);
  const bundle = path.join(home, 'bundle.tar.gz');
  expect((await a2rl(['export', runId, '-o', bundle])).code).toBe(0);
  const offline = await runA2rl(['verify-bundle', bundle, '--trust-embedded-key'], { env: { PATH: process.env.PATH }, cwd: mkdtempSync(path.join(home, 'reviewer-')) });
  expect(offline.code).toBe(0);
}

/** Each archived checkpoint regraded twice scores what was recorded. */
export async function expectRegradesToRecorded(a2rl: A2rl, runId: string): Promise<void> {
  const regrade = await a2rl(['regrade', runId, '--repeat', '2', '--json']);
  expect(regrade.code).toBe(0);
  const result = JSON.parse(regrade.stdout.trim().split('\n').at(-1)!) as { submissions: { recorded: number; scores: number[] }[] };
  expect(result.submissions.length).toBeGreaterThanOrEqual(1);
  for (const s of result.submissions) expect(s.scores).toEqual([s.recorded, s.recorded]);
}
