import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { rejection } from '../../test/servers/processes.js';
import { evaluateRefArith, REF_ARITH_FORMAT, refArith } from '../ref-arith/index.js';
import { EvaluatorError, InvalidCheckpointError } from '../task-pack.js';
import { evaluateOffLoop } from './off-loop.js';
import { materializeInTemp } from './spec-helpers.js';

/** Lag of this thread's event loop while `work` runs: the largest delay a 10 ms timer saw, in ms. */
async function loopLag<T>(work: () => Promise<T>): Promise<{ outcome: T; maxLagMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  try {
    const outcome = await work();
    return { outcome, maxLagMs: histogram.max / 1e6 };
  } finally {
    histogram.disable();
  }
}

describe('reference evaluations run off the harness\'s event loop', () => {
  let layout: Awaited<ReturnType<typeof materializeInTemp>>;
  let spinning: string;

  beforeAll(async () => {
    layout = await materializeInTemp(refArith);
    // One cue two million tokens long: every step sentence of the held-out set then loops two
    // million times looking for it (seconds of pure computation; this held the loop 7 s in-process).
    spinning = join(layout.root, 'spinning');
    await mkdir(spinning);
    await writeFile(join(spinning, 'manifest.json'), JSON.stringify({ format: REF_ARITH_FORMAT }));
    await writeFile(join(spinning, 'weights.json'), JSON.stringify({ cues: { ['a '.repeat(2_000_000).trim()]: { op: 'add', confidence: 1 } }, default: { op: 'add' } }));
  });
  afterAll(() => rm(layout.root, { recursive: true, force: true }));

  it('grades an honest checkpoint exactly as the in-thread evaluation does', async () => {
    const offLoop = await refArith.evaluate(layout.paths.modelDir, layout.paths.privateDir);
    expect(offLoop).toEqual(await evaluateRefArith(layout.paths.modelDir, layout.paths.privateDir));
  });

  it('kills a checkpoint that spins the evaluator at its time limit, with an EvaluatorError, while the loop stays responsive', async () => {
    const { outcome, maxLagMs } = await loopLag(() => rejection(evaluateOffLoop('ref-arith', spinning, layout.paths.privateDir, undefined, { timeoutMs: 500, heapMb: 512 })));
    expect(outcome).toBeInstanceOf(EvaluatorError);
    expect(outcome.message).toBe('the ref-arith evaluator did not finish within 0.5 s and was killed');
    // Generous for a busy machine: in-process, this checkpoint held the loop for seconds.
    expect(maxLagMs).toBeLessThan(1_000);
  });

  it('kills it when the grading\'s signal aborts (the grading API\'s evaluator timeout)', async () => {
    const err = await rejection(refArith.evaluate(spinning, layout.paths.privateDir, AbortSignal.timeout(1_000)));
    expect(err).toBeInstanceOf(EvaluatorError);
    expect(err.message).toMatch(/^the ref-arith evaluation was stopped \(cancelled, or past the grading's time limit\); its worker was killed$/);
  });

  it('hands back the agent\'s mistakes as InvalidCheckpointError', async () => {
    const empty = join(layout.root, 'empty');
    await mkdir(empty);
    const err = await rejection(refArith.evaluate(empty, layout.paths.privateDir));
    expect(err).toBeInstanceOf(InvalidCheckpointError);
    expect(err.message).toMatch(/checkpoint has no manifest\.json/);
  });
});
