// Hand-made run fixtures for the report, scoreboard and query specs: a small, consistent run (events,
// the RunAnalysis derived from them, and the file blobs), plus a terse RunAnalysis factory.
import type { A2rlEvent, EventData, EventType } from '../../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../../modules/ledger/events/envelope.js';
import type { RunAnalysis } from '../analysis.types.js';
import type { BlobReader } from '../../blob-reader.js';

import { sha } from '../../../test/testing/helpers.js';

export { sha };

export const TRAIN_V1 = 'import lib\nlr = 0.1\nepochs = 3\ntrain(lr, epochs)\n';
export const TRAIN_V2 = 'import lib\nlr = 0.01\nepochs = 3\ntrain(lr, epochs)\nprint("<done> & ok")\n';
const CKPT = ['a', 'b'].map((x) => sha(`checkpoint ${x}`));

export function memoryBlobs(contents: string[]): BlobReader & { reads: number } {
  const map = new Map(contents.map((c) => [sha(c), Buffer.from(c)]));
  const reader = {
    reads: 0,
    async read(sha256: string) {
      reader.reads++;
      return map.get(sha256) ?? null;
    },
  };
  return reader;
}

/** A RunAnalysis with neutral defaults; override what a test is about. */
export function analysisFixture(overrides: Partial<RunAnalysis> = {}): RunAnalysis {
  return {
    runId: 'run-x',
    task: 'ref-arith',
    agent: 'reference',
    driver: 'none',
    declaredDriver: 'none',
    driverMismatch: false,
    baseModel: 'arith-base',
    budgetSeconds: 60,
    mode: 'free',
    state: 'completed',
    scheduledAt: '2026-01-01T00:00:00.000Z',
    baseline: 10,
    baselineCached: false,
    best: null,
    improvement: null,
    durationS: 20,
    exitReason: 'completed',
    sandbox: 'none',
    workspace: null,
    submissions: [],
    metrics: {
      valid_submission_rate: null,
      first_valid_idx: null,
      first_valid_delay: null,
      score_trajectory: [],
      time_to_first_improvement: null,
      time_to_best: null,
      monotonic_ratio: null,
      copy_model_count: 0,
      time_used_ratio: null,
      last_submit_gap: null,
      training_launches: 0,
      total_training_time: 0,
      rollout_episodes: 0,
      code_revisions_between_submissions: [],
    },
    failure: { class: 'timeout_no_submission', rule: 'no submission', evidence: [] },
    route: { best: 'none', declared: 'none', evidence: [] },
    llm: null,
    eventCount: 0,
    lastSeq: -1,
    pendingSubmissions: 0,
    ...overrides,
  };
}

/**
 * One run: SFT then a GRPO revision of code/train.py, two graded submissions (40 then 55 over a
 * baseline of 10), one rollout batch. Times are seconds after AgentStarted (seq 3, t = 1 s).
 */
export function sampleRun(runId = 'fx-run-1'): { analysis: RunAnalysis; events: A2rlEvent[]; blobs: BlobReader & { reads: number } } {
  const t = (s: number) => new Date(Date.UTC(2026, 0, 1) + s * 1000).toISOString();
  const specs: Array<[number, EventType, EventData<EventType>]> = [
    [0, 'RunScheduled', { task: 'ref-arith', agent: 'reference', driver: 'none', baseModel: 'arith-base', budgetSeconds: 60, seed: 0, mode: 'free' }],
    [0.1, 'WorkspacePrepared', { workspace: `/ws/${runId}`, sandbox: 'none', mounts: [], dataManifest: [] }],
    [0.5, 'BaselineEvaluated', { score: 10, cached: false }],
    [1, 'AgentStarted', { command: 'reference' }],
    [2, 'FileChanged', { path: 'code/train.py', op: 'create', sha256: sha(TRAIN_V1), size: TRAIN_V1.length, observedAt: t(2) }],
    [3, 'ProcessStarted', { pid: 100, ppid: 1, argv: ['python', 'code/train.py', '--sft'], cwd: `/ws/${runId}`, observedAt: t(3) }],
    [7, 'ProcessExited', { pid: 100, exitCode: 0, durationMs: 4000, observedAt: t(7) }],
    [8, 'SubmissionReceived', { submissionId: 'sub-1', modelPath: 'output/ck1', manifest: [], checkpoint: { sha256: CKPT[0], size: 10, key: `sha256/${CKPT[0].slice(0, 2)}/${CKPT[0]}` } }],
    [8.5, 'SubmissionGraded', { submissionId: 'sub-1', score: 40, improvement: 30 }],
    [10, 'FileChanged', { path: 'code/train.py', op: 'modify', sha256: sha(TRAIN_V2), previousSha256: sha(TRAIN_V1), size: TRAIN_V2.length, observedAt: t(10) }],
    [11, 'ProcessStarted', { pid: 101, ppid: 1, argv: ['python', 'code/train.py', '--grpo'], cwd: `/ws/${runId}`, observedAt: t(11) }],
    [12, 'RolloutBatchRecorded', { env: 'fx/v1', episodes: 10, steps: 50, successRate: 0.5, meanReturn: 0.5, observedAt: t(12) }],
    [16, 'ProcessExited', { pid: 101, exitCode: 0, durationMs: 5000, observedAt: t(16) }],
    [17, 'SubmissionReceived', { submissionId: 'sub-2', modelPath: 'output/ck2', manifest: [], checkpoint: { sha256: CKPT[1], size: 10, key: `sha256/${CKPT[1].slice(0, 2)}/${CKPT[1]}` } }],
    [17.5, 'SubmissionGraded', { submissionId: 'sub-2', score: 55, improvement: 45 }],
    [20, 'AgentExited', { exitCode: 0, reason: 'completed' }],
    [20.1, 'RunCompleted', { best: 55, submissions: 2 }],
  ];
  const events = specs.map(([s, type, data], seq) => buildEvent(type, runId, seq, t(s), data));
  const analysis = analysisFixture({
    workspace: `/ws/${runId}`,
    runId,
    scheduledAt: t(0),
    best: 55,
    improvement: 45,
    durationS: 19,
    submissions: [
      {
        index: 1, submissionId: 'sub-1', seq: 7, atS: 7, modelPath: 'output/ck1', checkpointSha256: CKPT[0], status: 'graded', score: 40,
        rejectedReason: null, valid: true, isCopyOfBase: false, duplicateOf: null,
        codeChanges: [{ path: 'code/train.py', op: 'create', linesAdded: 4, linesRemoved: 0, sha256: sha(TRAIN_V1), previousSha256: null, seq: 4 }],
        processes: [{ pid: 100, argv: ['python', 'code/train.py', '--sft'], kind: 'training', startSeq: 5, exitSeq: 6, exitCode: 0, signal: null, durationS: 4 }],
        rollouts: { episodes: 0, steps: 0, successRate: 0, batches: 0 },
        route: { declared: 'sft', executed: 'sft', evidence: [4, 5] },
        evidence: [7, 8],
      },
      {
        index: 2, submissionId: 'sub-2', seq: 13, atS: 16, modelPath: 'output/ck2', checkpointSha256: CKPT[1], status: 'graded', score: 55,
        rejectedReason: null, valid: true, isCopyOfBase: false, duplicateOf: null,
        codeChanges: [{ path: 'code/train.py', op: 'modify', linesAdded: 2, linesRemoved: 1, sha256: sha(TRAIN_V2), previousSha256: sha(TRAIN_V1), seq: 9 }],
        processes: [{ pid: 101, argv: ['python', 'code/train.py', '--grpo'], kind: 'training', startSeq: 10, exitSeq: 12, exitCode: 0, signal: null, durationS: 5 }],
        rollouts: { episodes: 10, steps: 50, successRate: 0.5, batches: 1 },
        route: { declared: 'grpo', executed: 'grpo', evidence: [9, 10, 11] },
        evidence: [13, 14],
      },
    ],
    metrics: {
      valid_submission_rate: 1,
      first_valid_idx: 1,
      first_valid_delay: 7,
      score_trajectory: [40, 55],
      time_to_first_improvement: 7,
      time_to_best: 16,
      monotonic_ratio: 1,
      copy_model_count: 0,
      time_used_ratio: 0.3167,
      last_submit_gap: 3,
      training_launches: 2,
      total_training_time: 9,
      rollout_episodes: 10,
      code_revisions_between_submissions: [1, 1],
    },
    failure: { class: 'success', rule: 'best > baseline', evidence: [2, 14] },
    route: { best: 'grpo', declared: 'grpo', evidence: [9, 10, 11] },
    eventCount: events.length,
    lastSeq: events.length - 1,
  });
  return { analysis, events, blobs: memoryBlobs([TRAIN_V1, TRAIN_V2]) };
}
