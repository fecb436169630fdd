import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent, EventData, EventType } from '../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { analyzeRun } from './analyze.js';
import type { BlobReader } from '../blob-reader.js';
import { sha } from '../../test/testing/helpers.js';

const RUN = 'r-1';
const WS = '/ws/r-1';
const BASE_FILES = { 'manifest.json': '{"format":"tiny"}', 'weights.json': '{"w":[0,0]}' };

/** A run written event by event, one second apart, with an in-memory blob store for file contents and output. */
class Fixture {
  readonly events: A2rlEvent[] = [];
  readonly blobs = new Map<string, Buffer>();
  private seconds = 0;
  private pids = 100;
  private subs = 0;

  add<T extends EventType>(type: T, data: EventData<T>, dt = 1): number {
    const seq = this.events.length;
    this.seconds += dt;
    this.events.push(buildEvent(type, RUN, seq, new Date(Date.UTC(2026, 0, 1, 0, 0, 0) + this.seconds * 1000), data));
    return seq;
  }

  /** The time the next event added `dt` seconds on will carry: the observers' observedAt in these fixtures. */
  nextAt(dt = 1): string {
    return new Date(Date.UTC(2026, 0, 1, 0, 0, 0) + (this.seconds + dt) * 1000).toISOString();
  }

  blob(text: string): { sha256: string; size: number; key: string } {
    const sha256 = sha(text);
    this.blobs.set(sha256, Buffer.from(text));
    return { sha256, size: Buffer.byteLength(text), key: `sha256/${sha256.slice(0, 2)}/${sha256}` };
  }

  /** RunScheduled, WorkspacePrepared (with the base model's files), baseline, AgentStarted. */
  start(opts: { baseline?: number | null; budget?: number } = {}): this {
    this.add('RunScheduled', { task: 'ref-x', agent: 'a', driver: 'none', baseModel: 'tiny', budgetSeconds: opts.budget ?? 100, seed: 0, mode: 'free' }, 0);
    const dataManifest = [
      { path: 'data/train.jsonl', sha256: sha('data'), size: 4 },
      ...Object.entries(BASE_FILES).map(([p, text]) => ({ path: `models/tiny/${p}`, sha256: sha(text), size: text.length })),
    ];
    this.add('WorkspacePrepared', { workspace: WS, sandbox: 'bwrap', mounts: [], dataManifest });
    if (opts.baseline !== null) this.add('BaselineEvaluated', { score: opts.baseline ?? 10, cached: false });
    this.add('AgentStarted', { command: 'agent' });
    return this;
  }

  code(path: string, text: string): number {
    const { sha256, size, key } = this.blob(text);
    return this.add('FileChanged', { path: `code/${path}`, op: 'create', sha256, size, key, observedAt: this.nextAt() });
  }

  /**
   * A training process over `code/<script>` (started by `accelerate launch`, so it is training
   * whatever the script is called); `during` runs between its start and its exit. `kind: 'other'`
   * runs the script from a shell command string instead, which is not a training launch itself.
   */
  train(script: string, opts: { out?: string; exitCode?: number; during?: () => void; kind?: 'training' | 'other' } = {}): number {
    const pid = this.pids++;
    const path = `${WS}/code/${script}`;
    const argv = opts.kind === 'other' ? ['bash', '-c', `python ${path}`] : ['accelerate', 'launch', path, ...(opts.out ? ['--out', `${WS}/${opts.out}`] : [])];
    const start = this.add('ProcessStarted', { pid, ppid: 1, argv, cwd: WS, observedAt: this.nextAt() });
    opts.during?.();
    this.add('ProcessExited', { pid, exitCode: opts.exitCode ?? 0, durationMs: 2500, observedAt: this.nextAt(3) }, 3);
    return start;
  }

  rollouts(batches: number, successRate: number): void {
    for (let i = 0; i < batches; i++) this.add('RolloutBatchRecorded', { env: 'household/v1', episodes: 10, steps: 50, successRate, meanReturn: successRate, observedAt: this.nextAt() });
  }

  /** A submission of `files` (relative path → content) at output/<name>, graded `score` or rejected. */
  submit(outcome: number | 'invalid_checkpoint' | 'evaluator_error' | 'budget_exhausted', opts: { files?: Record<string, string>; name?: string } = {}): number {
    const id = `sub-${++this.subs}`;
    const files = opts.files ?? { 'manifest.json': `{"n":${this.subs}}`, 'weights.json': `{"w":[${this.subs}]}` };
    const manifest = Object.entries(files).map(([path, text]) => ({ path, sha256: sha(text), size: text.length }));
    const seq = this.add('SubmissionReceived', { submissionId: id, modelPath: `output/${opts.name ?? id}`, manifest, checkpoint: this.blob(JSON.stringify(manifest)) });
    if (typeof outcome === 'number') this.add('SubmissionGraded', { submissionId: id, score: outcome, improvement: outcome - 10 });
    else this.add('SubmissionRejected', { submissionId: id, reasonClass: outcome, message: outcome });
    return seq;
  }

  stderr(text: string): number {
    return this.add('AgentOutput', { stream: 'stderr', chunk: this.blob(text), observedAt: this.nextAt() });
  }

  end(reason: 'completed' | 'timeout' | 'crashed' | 'killed' = 'completed', best?: number): this {
    this.add('AgentExited', { reason, ...(reason === 'crashed' ? { exitCode: 1 } : {}) });
    this.add('RunCompleted', { submissions: this.subs, ...(best !== undefined ? { best } : {}) }, 0);
    return this;
  }

  reader(): BlobReader {
    return { read: async (h) => this.blobs.get(h) ?? null };
  }

  analyze() {
    return analyzeRun(this.events, this.reader());
  }
}

const SFT = 'from trl import SFTTrainer\ntrainer = SFTTrainer(model, train_dataset=demos)\ntrainer.train()\n';
const GRPO = 'from trl import GRPOTrainer, GRPOConfig\nconfig = GRPOConfig(num_generations=8)\ntrainer = GRPOTrainer(model, reward_funcs=[exact_match])\n';
const PPO = 'from trl import PPOTrainer\n# PPO with a value head and clip ratio 0.2\n';
const DPO = 'from trl import DPOTrainer\n# train on preference pairs: chosen vs rejected\n';
const REINFORCE = '// REINFORCE: policy gradient on episodes collected through /env/step\nasync function rollout(policy) {}\n';
const PLAIN = 'import json\nprint("hello")\n';

describe('failure taxonomy: one class per run, with the rule and the events behind it', () => {
  it('success: the best score beats the baseline', async () => {
    const f = new Fixture().start();
    f.code('train.py', SFT);
    f.train('train.py', { out: 'output/sub-1' });
    const sub = f.submit(40);
    const a = await f.end().analyze();
    expect(a.failure).toEqual({ class: 'success', rule: 'best_above_baseline', evidence: [2, sub, sub + 1] });
    expect(a).toMatchObject({ baseline: 10, best: 40, improvement: 30, state: 'completed', exitReason: 'completed' });
  });

  it('success: on a tie the best submission is the first submitted, though graded last (the run-scores fold)', async () => {
    const f = new Fixture().start();
    const manifest = [{ path: 'w.json', sha256: sha('w'), size: 1 }];
    const first = f.add('SubmissionReceived', { submissionId: 'a', modelPath: 'output/a', manifest });
    f.add('SubmissionReceived', { submissionId: 'b', modelPath: 'output/b', manifest });
    f.add('SubmissionGraded', { submissionId: 'b', score: 60 });
    const graded = f.add('SubmissionGraded', { submissionId: 'a', score: 60 });
    const a = await f.end().analyze();
    expect(a).toMatchObject({ best: 60, submissions: [{ submissionId: 'a' }, { submissionId: 'b' }] });
    expect(a.failure.evidence).toEqual([2, first, graded]);
    expect(a.metrics.time_to_best).toBe(a.submissions[0].atS);
  });

  it('timeout_no_submission: stopped at the budget without submitting', async () => {
    const a = await new Fixture().start().end('timeout').analyze();
    expect(a.failure).toMatchObject({ class: 'timeout_no_submission', rule: 'no_submission_before_timeout' });
  });

  it('timeout_no_submission: the only submission came after the deadline', async () => {
    const f = new Fixture().start();
    f.submit('budget_exhausted');
    expect((await f.end().analyze()).failure).toMatchObject({ class: 'timeout_no_submission', rule: 'submitted_after_deadline' });
  });

  it('copy_model_fallback: the best score was reached by a copy of the base model', async () => {
    const f = new Fixture().start();
    const sub = f.submit(10, { files: BASE_FILES, name: 'copy-of-base' });
    const a = await f.end().analyze();
    expect(a.failure).toEqual({ class: 'copy_model_fallback', rule: 'best_is_copy_of_base', evidence: [2, sub, sub + 1] });
    expect(a.route.best).toBe('copy_model');
  });

  it('code_error_runtime: the last training process exited non-zero and nothing valid followed', async () => {
    const f = new Fixture().start();
    f.code('train.py', SFT);
    const start = f.train('train.py', { exitCode: 1 });
    const a = await f.end('crashed').analyze();
    expect(a.failure).toEqual({ class: 'code_error_runtime', rule: 'training_exited_nonzero', evidence: [start, start + 1] });
  });

  it('code_error_runtime: an uncaught error with a stack frame in code/ on stderr (the process itself unseen)', async () => {
    const f = new Fixture().start();
    f.code('train_sft.mjs', 'model.fit(rows)');
    const out = f.stderr(`file://${WS}/code/train_sft.mjs:5\nmodel.fit(rows);\n      ^\n\nTypeError: Cannot read properties of undefined (reading 'fit')\n    at file://${WS}/code/train_sft.mjs:5:7\n`);
    expect((await f.end('crashed').analyze()).failure).toEqual({ class: 'code_error_runtime', rule: 'uncaught_error_in_code', evidence: [out] });
  });

  it('code_error_runtime: a Python traceback through a code/ file', async () => {
    const f = new Fixture().start();
    f.stderr('Traceback (most recent call last):\n  File "code/train.py", line 3, in <module>\n    main()\nKeyError: \'labels\'\n');
    expect((await f.end('completed').analyze()).failure.class).toBe('code_error_runtime');
  });

  it('a runtime error the agent recovered from (a later training ran cleanly) is not the class', async () => {
    const f = new Fixture().start();
    f.code('train.py', SFT);
    f.train('train.py', { exitCode: 1 });
    f.train('train.py', { out: 'output/sub-1' });
    f.submit(5);
    expect((await f.end().analyze()).failure.class).toBe('training_diverged');
  });

  it('invalid_checkpoint: nothing submitted could be loaded', async () => {
    const f = new Fixture().start();
    const sub = f.submit('invalid_checkpoint');
    expect((await f.end().analyze()).failure).toEqual({ class: 'invalid_checkpoint', rule: 'no_valid_submission_refused', evidence: [sub, sub + 1] });
  });

  it('rollout_logic_wrong: rollouts were recorded and not one episode succeeded', async () => {
    const f = new Fixture().start();
    f.code('rl.mjs', REINFORCE);
    f.train('rl.mjs', { out: 'output/sub-1', during: () => f.rollouts(3, 0) });
    f.submit(4);
    const a = await f.end().analyze();
    expect(a.failure).toMatchObject({ class: 'rollout_logic_wrong', rule: 'all_rollouts_failed' });
    expect(a.failure.evidence).toHaveLength(3);
  });

  it('training_diverged: training ran and every valid submission is below the baseline', async () => {
    const f = new Fixture().start();
    f.code('train.py', SFT);
    const start = f.train('train.py', { out: 'output/sub-1' });
    const sub = f.submit(2);
    expect((await f.end().analyze()).failure).toEqual({ class: 'training_diverged', rule: 'valid_below_baseline_after_training', evidence: [2, start, sub, sub + 1] });
  });

  it('no_improvement: a trained model that only matches the baseline', async () => {
    const f = new Fixture().start();
    f.code('train.py', SFT);
    f.train('train.py', { out: 'output/sub-1' });
    f.submit(10);
    expect((await f.end().analyze()).failure).toMatchObject({ class: 'no_improvement', rule: 'best_not_above_baseline' });
  });

  it('no_improvement: the agent finished without submitting anything', async () => {
    expect((await new Fixture().start().end('completed').analyze()).failure).toMatchObject({ class: 'no_improvement', rule: 'no_submission' });
  });

  it('agent_crash: the agent crashed with no code error on record', async () => {
    const f = new Fixture().start();
    f.stderr('Segmentation fault (core dumped)\n');
    expect((await f.end('crashed').analyze()).failure).toMatchObject({ class: 'agent_crash', rule: 'agent_exited_crashed' });
  });

  it('infra_error: the harness died (RunInterrupted)', async () => {
    const f = new Fixture().start();
    const seq = f.add('RunInterrupted', { reason: 'harness exited' });
    expect((await f.analyze()).failure).toEqual({ class: 'infra_error', rule: 'run_interrupted', evidence: [seq] });
  });

  it('infra_error: an evaluator fault wins over any agent-side class', async () => {
    const f = new Fixture().start();
    f.code('train.py', SFT);
    f.train('train.py', { exitCode: 1 });
    const sub = f.submit('evaluator_error');
    expect((await f.end().analyze()).failure).toEqual({ class: 'infra_error', rule: 'evaluator_fault', evidence: [sub, sub + 1] });
  });

  it('infra_error: the run ended without a baseline', async () => {
    const f = new Fixture().start({ baseline: null });
    f.submit(50);
    const a = await f.end().analyze();
    expect(a.failure).toMatchObject({ class: 'infra_error', rule: 'missing_baseline' });
    expect(a.improvement).toBeNull();
  });

  it('success wins over an evaluator fault on another submission', async () => {
    const f = new Fixture().start();
    f.submit('evaluator_error');
    f.submit(30);
    expect((await f.end().analyze()).failure.class).toBe('success');
  });
});

describe('routes: declared (what the code says) apart from executed (what ran)', () => {
  async function routeOf(script: string, text: string, opts: { rollouts?: boolean } = {}) {
    const f = new Fixture().start();
    f.code(script, text);
    f.train(script, { out: 'output/sub-1', during: opts.rollouts ? () => f.rollouts(2, 0.5) : undefined });
    f.submit(20);
    const a = await f.end().analyze();
    return a.submissions[0].route;
  }

  it('sft: a supervised trainer', async () => {
    expect(await routeOf('train.py', SFT)).toMatchObject({ declared: 'sft', executed: 'sft' });
  });

  it('grpo: GRPOTrainer generates in-process, so it executed as GRPO without /env rollouts', async () => {
    expect(await routeOf('train_grpo.py', GRPO)).toMatchObject({ declared: 'grpo', executed: 'grpo' });
  });

  it('ppo: PPOTrainer with a value head', async () => {
    expect(await routeOf('ppo.py', PPO)).toMatchObject({ declared: 'ppo', executed: 'ppo' });
  });

  it('dpo: preference pairs', async () => {
    expect(await routeOf('dpo.py', DPO)).toMatchObject({ declared: 'dpo', executed: 'dpo' });
  });

  it('online_rl_other: REINFORCE with rollouts recorded while training ran', async () => {
    const route = await routeOf('rl.mjs', REINFORCE, { rollouts: true });
    expect(route).toMatchObject({ declared: 'online_rl_other', executed: 'online_rl_other' });
  });

  it('rollouts count only while a producing process ran: not before it started or after it exited', async () => {
    const f = new Fixture().start();
    f.code('rl.mjs', REINFORCE);
    f.rollouts(2, 0.5); // before any training started
    f.train('rl.mjs', { out: 'output/sub-1' });
    f.rollouts(2, 0.5); // after it exited
    f.submit(20);
    expect((await f.end().analyze()).submissions[0].route).toMatchObject({ declared: 'online_rl_other', executed: 'sft' });

    // Two producers, the rollouts inside the later one's window only.
    const g = new Fixture().start();
    g.code('rl.mjs', REINFORCE);
    g.train('rl.mjs', { out: 'output/sub-1' });
    g.train('rl.mjs', { out: 'output/sub-1', during: () => g.rollouts(1, 0.5) });
    g.submit(20);
    const route = (await g.end().analyze()).submissions[0].route;
    expect(route).toMatchObject({ executed: 'online_rl_other' });
    expect(route.evidence).toEqual(expect.arrayContaining([g.events.find((e) => e.type === 'RolloutBatchRecorded')!.seq]));
  });

  it('declared online RL that never rolled out executed as sft', async () => {
    expect(await routeOf('rl.mjs', REINFORCE)).toMatchObject({ declared: 'online_rl_other', executed: 'sft' });
  });

  it('none: no training process before the submission', async () => {
    const f = new Fixture().start();
    f.code('notes.py', PLAIN);
    f.submit(20);
    const a = await f.end().analyze();
    expect(a.submissions[0].route).toMatchObject({ declared: 'none', executed: 'none' });
    expect(a.route).toMatchObject({ best: 'none', declared: 'none' });
  });

  it('copy_model: the submission is the base model', async () => {
    const f = new Fixture().start();
    f.code('train.py', SFT);
    f.submit(10, { files: BASE_FILES });
    expect((await f.end().analyze()).submissions[0].route).toMatchObject({ declared: 'sft', executed: 'copy_model' });
  });

  it('sft then online RL: each submission is traced to the process that wrote it, the run route is the best one\'s', async () => {
    const f = new Fixture().start();
    f.code('train_sft.py', SFT);
    f.train('train_sft.py', { out: 'output/sft-1' });
    f.submit(30, { name: 'sft-1' });
    f.code('train_rl.mjs', REINFORCE);
    f.train('train_rl.mjs', { out: 'output/rl-1', during: () => f.rollouts(2, 0.6) });
    f.submit(60, { name: 'rl-1' });
    const a = await f.end().analyze();
    expect(a.submissions.map((s) => s.route.executed)).toEqual(['sft', 'online_rl_other']);
    expect(a.submissions.map((s) => s.route.declared)).toEqual(['sft', 'online_rl_other']);
    expect(a.route).toMatchObject({ best: 'online_rl_other', declared: 'online_rl_other' });
  });

  it('rollouts made outside the producing training process (e.g. an evaluation) do not make it online RL', async () => {
    const f = new Fixture().start();
    f.code('train_sft.py', SFT);
    f.train('train_sft.py', { out: 'output/sft-1' });
    f.rollouts(2, 0.5);
    f.submit(30, { name: 'sft-1' });
    expect((await f.end().analyze()).submissions[0].route.executed).toBe('sft');
  });

  it('without a graded submission the run route comes from all training that ran', async () => {
    const f = new Fixture().start();
    f.code('train.py', SFT);
    f.train('train.py', { exitCode: 1 });
    expect((await f.end('crashed').analyze()).route).toMatchObject({ best: 'sft', declared: 'sft' });
  });
});

describe('copy detection by content hash', () => {
  it('a copy at another path still counts', async () => {
    const f = new Fixture().start();
    f.submit(10, { files: BASE_FILES, name: 'somewhere/else/deep' });
    const a = await f.end().analyze();
    expect(a.submissions[0].isCopyOfBase).toBe(true);
    expect(a.metrics.copy_model_count).toBe(1);
  });

  it('a different file with the same names does not', async () => {
    const f = new Fixture().start();
    f.submit(10, { files: { 'manifest.json': BASE_FILES['manifest.json'], 'weights.json': '{"w":[1,2]}' } });
    const a = await f.end().analyze();
    expect(a.submissions[0].isCopyOfBase).toBe(false);
    expect(a.metrics.copy_model_count).toBe(0);
  });

  it('a subset of the base files is not a copy', async () => {
    const f = new Fixture().start();
    f.submit(10, { files: { 'weights.json': BASE_FILES['weights.json'] } });
    expect((await f.end().analyze()).submissions[0].isCopyOfBase).toBe(false);
  });
});

describe('code changes: line counts from the one line diff (line-diff.ts) of the recorded contents', () => {
  it('diffs each change\'s content before and after it; a side that cannot be read counts nothing', async () => {
    const f = new Fixture().start();
    const V1 = 'a\nb\nc\n';
    const V2 = 'a\nB\nc\nd\n';
    f.code('a.py', V1);
    f.submit(20);
    f.add('FileChanged', { path: 'code/a.py', op: 'modify', ...f.blob(V2), previousSha256: sha(V1), observedAt: f.nextAt() });
    f.add('FileChanged', { path: 'code/a.py', op: 'delete', previousSha256: sha(V2), observedAt: f.nextAt() });
    const lost = sha('never archived\n'); // recorded, but not in the artifact store
    f.add('FileChanged', { path: 'code/lost.py', op: 'create', sha256: lost, size: 15, observedAt: f.nextAt() });
    f.add('FileChanged', { path: 'code/lost.py', op: 'modify', ...f.blob('x\n'), previousSha256: lost, observedAt: f.nextAt() });
    f.add('FileChanged', { path: 'code/big.py', op: 'create', ...f.blob('y\n'.repeat(200 * 1024)), observedAt: f.nextAt() });
    f.submit(30);
    const a = await f.end().analyze();
    const counts = a.submissions.map((s) => s.codeChanges.map((c) => [c.path, c.op, c.linesAdded, c.linesRemoved]));
    expect(counts).toEqual([
      [['code/a.py', 'create', 3, 0]],
      [
        ['code/a.py', 'modify', 2, 1],
        ['code/a.py', 'delete', 0, 4],
        ['code/lost.py', 'create', 0, 0],
        ['code/lost.py', 'modify', 0, 0],
        ['code/big.py', 'create', 0, 0], // 400 KiB: over MAX_DIFF_BYTES, never read
      ],
    ]);
  });
});

describe('process metrics', () => {
  it('no submissions: rates and times are null, counts are zero', async () => {
    const a = await new Fixture().start().end('timeout').analyze();
    expect(a.metrics).toEqual({
      valid_submission_rate: null, first_valid_idx: null, first_valid_delay: null, score_trajectory: [],
      time_to_first_improvement: null, time_to_best: null, monotonic_ratio: null, copy_model_count: 0,
      time_used_ratio: 0.01, last_submit_gap: null, training_launches: 0, total_training_time: 0, rollout_episodes: 0,
      code_revisions_between_submissions: [],
    });
    expect(a.submissions).toEqual([]);
  });

  it('one submission: monotonic_ratio is null, times are seconds from AgentStarted', async () => {
    const f = new Fixture().start(); // AgentStarted at t=3
    f.submit(20); // t=4
    const a = await f.end().analyze(); // AgentExited at t=6
    expect(a.metrics).toMatchObject({
      valid_submission_rate: 1, first_valid_idx: 1, first_valid_delay: 1, score_trajectory: [20],
      time_to_first_improvement: 1, time_to_best: 1, monotonic_ratio: null, last_submit_gap: 2, time_used_ratio: 0.03,
    });
    expect(a.durationS).toBe(3);
  });

  it('times come from when things were observed, not from when the ledger appended them', async () => {
    const f = new Fixture().start(); // AgentStarted at t=3
    // The ledger fell 100 s behind: the exit was appended at t=103 but seen at t=8.
    const seenAt = f.nextAt(5);
    f.add('AgentExited', { reason: 'timeout', signal: 'SIGTERM', observedAt: seenAt }, 100);
    f.add('RunCompleted', { submissions: 0 });
    const a = await f.analyze();
    expect(a.durationS).toBe(5);
    expect(a.metrics.time_used_ratio).toBe(0.05);
  });

  it('ties for best: time_to_best is the first submission reaching the maximum', async () => {
    const f = new Fixture().start();
    f.submit(30);
    f.submit(50);
    f.submit(50);
    f.submit(40);
    const a = await f.end().analyze();
    expect(a.metrics.score_trajectory).toEqual([30, 50, 50, 40]);
    expect(a.metrics.time_to_best).toBe(a.submissions[1].atS);
    expect(a.metrics.monotonic_ratio).toBeCloseTo(1 / 3);
    expect(a.route.evidence).toEqual(a.submissions[1].route.evidence);
  });

  it('all invalid: rejections count as 0, no first valid, no best time', async () => {
    const f = new Fixture().start();
    f.submit('invalid_checkpoint');
    f.submit(0);
    const a = await f.end().analyze();
    expect(a.metrics).toMatchObject({
      valid_submission_rate: 0, first_valid_idx: null, first_valid_delay: null, score_trajectory: [0, 0],
      time_to_first_improvement: null, time_to_best: null, monotonic_ratio: 0,
    });
    expect(a.best).toBe(0);
    expect(a.submissions.map((s) => [s.status, s.rejectedReason, s.valid])).toEqual([['rejected', 'invalid_checkpoint', false], ['graded', null, false]]);
  });

  it('first valid and first improvement are 1-based and distinct when an early submission is weak', async () => {
    const f = new Fixture().start();
    f.submit('invalid_checkpoint');
    f.submit(5);
    f.submit(25);
    const a = await f.end().analyze();
    expect(a.metrics).toMatchObject({ first_valid_idx: 2, valid_submission_rate: 0.666667, monotonic_ratio: 1 });
    expect(a.metrics.first_valid_delay).toBe(a.submissions[1].atS);
    expect(a.metrics.time_to_first_improvement).toBe(a.submissions[2].atS);
  });

  it('counts training launches and time, rollout episodes and code revisions between submissions', async () => {
    const f = new Fixture().start();
    f.code('a.py', SFT);
    f.code('b.py', PLAIN);
    f.train('a.py', { out: 'output/sub-1' });
    f.train('a.py', { kind: 'other' });
    f.submit(20);
    f.code('rl.mjs', REINFORCE);
    f.train('rl.mjs', { out: 'output/sub-2', during: () => f.rollouts(2, 0.5) });
    f.add('FileChanged', { path: 'output/x.bin', op: 'create', observedAt: f.nextAt() });
    f.submit(30);
    const a = await f.end().analyze();
    expect(a.metrics).toMatchObject({ training_launches: 2, total_training_time: 5, rollout_episodes: 20, code_revisions_between_submissions: [2, 1] });
    expect(a.submissions[1].rollouts).toEqual({ episodes: 20, steps: 100, successRate: 0.5, batches: 2 });
    expect(a.submissions[0].processes.map((p) => p.kind)).toEqual(['training', 'other']);
    expect(a.submissions[1].codeChanges.map((c) => c.path)).toEqual(['code/rl.mjs']);
  });

  it('caps time_used_ratio at 1', async () => {
    const f = new Fixture().start({ budget: 1 });
    f.add('AgentExited', { reason: 'timeout', signal: 'SIGTERM' }, 5);
    expect((await f.analyze()).metrics.time_used_ratio).toBe(1);
  });

  it('leaves a received but ungraded submission out of the metrics (a live run)', async () => {
    const f = new Fixture().start();
    f.submit(20);
    f.add('SubmissionReceived', { submissionId: 'sub-9', modelPath: 'output/x', manifest: [] });
    const a = await f.analyze();
    expect(a).toMatchObject({ pendingSubmissions: 1, state: 'running' });
    expect(a.metrics.score_trajectory).toEqual([20]);
  });

  it('is deterministic: the same events and blobs give the same analysis', async () => {
    const f = new Fixture().start();
    f.code('rl.mjs', REINFORCE);
    f.train('rl.mjs', { out: 'output/sub-1', during: () => f.rollouts(2, 0.5) });
    f.submit(20);
    f.end();
    expect(JSON.stringify(await analyzeRun([...f.events].reverse(), f.reader()))).toBe(JSON.stringify(await f.analyze()));
  });
});
