import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import { SqliteEventStore } from '../../infra/eventstore/sqlite-event-store.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { streamName } from '../../modules/ledger/events/ids.js';
import type { FailureClass, RunAnalysis } from './analysis.types.js';
import { analyzeRun } from './analyze.js';
import { artifactBlobReader } from '../blob-reader.js';

// Each faulty agent (and the reference agent) runs once through the built `a2rl` binary; its events
// are then read back from the ledger on that A2RL_HOME and analysed with the artifact store's blobs.

const exec = promisify(execFile);
const bin = path.resolve('src/bin/a2rl.js');
let home: string;

async function runAgent(args: string[]): Promise<string> {
  const r = await exec(process.execPath, [bin, 'run', '--json', ...args], { env: { ...process.env, A2RL_HOME: home }, maxBuffer: 64 * 1024 * 1024 });
  return (JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
}

async function analyze(runId: string): Promise<RunAnalysis> {
  const store = await SqliteEventStore.open(path.join(home, 'ledger.db'));
  const artifacts = await FsArtifactStore.open(path.join(home, 'artifacts'));
  try {
    const events: A2rlEvent[] = [];
    for await (const r of store.readStream(streamName(runId))) events.push(r.event);
    return await analyzeRun(events, artifactBlobReader(artifacts));
  } finally {
    await store.close();
    await artifacts.close();
  }
}

beforeAll(() => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-analysis-'));
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('each faulty agent lands in its failure class; the reference agent succeeds', () => {
  const cases: [string, FailureClass, string[]][] = [
    ['faulty-crash', 'code_error_runtime', ['--task', 'ref-arith', '--budget', '30s']],
    ['faulty-copy-base', 'copy_model_fallback', ['--task', 'ref-judge', '--budget', '30s']],
    ['faulty-idle', 'timeout_no_submission', ['--task', 'ref-arith', '--budget', '3s', '--grace', '1s']],
    ['faulty-garbage', 'invalid_checkpoint', ['--task', 'ref-household', '--budget', '30s']],
    ['faulty-diverge', 'training_diverged', ['--task', 'ref-arith', '--budget', '30s']],
    ['reference', 'success', ['--task', 'ref-arith', '--budget', '60s']],
  ];

  it.each(cases)('%s → %s', async (agent, expected, args) => {
    const a = await analyze(await runAgent(['--agent', agent, ...args]));
    expect(a.failure.class).toBe(expected);
    expect(a.failure.evidence.length).toBeGreaterThan(0);
    expect(a.state).toBe('completed');
  }, 120_000);

  it('reference on the interactive task: SFT first, then online RL through /env rollouts', async () => {
    const a = await analyze(await runAgent(['--agent', 'reference', '--task', 'ref-household', '--budget', '90s']));
    expect(a.failure.class).toBe('success');
    expect(a.submissions.map((s) => s.route.executed)).toEqual(['sft', 'online_rl_other', 'online_rl_other']);
    expect(a.route.best).toBe('online_rl_other');
    expect(a.metrics.rollout_episodes).toBeGreaterThan(0);
  }, 180_000);
});
