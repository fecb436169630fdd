import { describe, expect, it } from '@jest/globals';
import { EVENT_TYPES, type EventType } from './events/catalog.js';
import { ACCESS_EVENT_TYPES, CAMPAIGN_EVENT_TYPES } from './events/ids.js';
import { decider } from '../../test/testing/given.js';
import {
  decide,
  evolve,
  foldRunLifecycle,
  hasEnded,
  IllegalTransitionError,
  isUnfinished,
  RUN_STATES,
  initialRunState,
  runGuard,
  type RunCommand,
  type RunLifecycleState,
  type RunPhase,
} from './run-lifecycle.js';

const T = '2026-01-01T00:00:01.000Z';
const SHA = 'a'.repeat(64);

// One valid payload per event type: the decider judges types and submission ids, not payload details.
const c = {
  scheduled: (): RunCommand => ({ type: 'RunScheduled', data: { task: 't', agent: 'reference', baseModel: 'm', budgetSeconds: 60, seed: 0, mode: 'free' } }),
  prepared: (): RunCommand => ({ type: 'WorkspacePrepared', data: { workspace: '/w', sandbox: 'none', mounts: [], dataManifest: [] } }),
  baseline: (): RunCommand => ({ type: 'BaselineEvaluated', data: { score: 10, cached: false } }),
  started: (): RunCommand => ({ type: 'AgentStarted', data: { command: 'run.sh', pid: 42 } }),
  fileChanged: (): RunCommand => ({ type: 'FileChanged', data: { path: 'code/train.py', op: 'create', sha256: SHA, size: 3, observedAt: T } }),
  processStarted: (): RunCommand => ({ type: 'ProcessStarted', data: { pid: 43, ppid: 42, argv: ['python3', 'code/train.py'], cwd: '/w', observedAt: T } }),
  processExited: (): RunCommand => ({ type: 'ProcessExited', data: { pid: 43, exitCode: 0, durationMs: 5, observedAt: T } }),
  output: (): RunCommand => ({ type: 'AgentOutput', data: { stream: 'stdout', chunk: { sha256: SHA, size: 1, key: `sha256/aa/${SHA}` }, observedAt: T } }),
  rollouts: (): RunCommand => ({ type: 'RolloutBatchRecorded', data: { env: 'e', episodes: 1, steps: 2, successRate: 1, meanReturn: 1, observedAt: T } }),
  gap: (): RunCommand => ({ type: 'ObservationGap', data: { observer: 'files', reason: 'buffer full', count: 3, observedAt: T } }),
  received: (id: string): RunCommand => ({ type: 'SubmissionReceived', data: { submissionId: id, modelPath: 'output/ck', manifest: [] } }),
  graded: (id: string): RunCommand => ({ type: 'SubmissionGraded', data: { submissionId: id, score: 40, improvement: 30 } }),
  rejected: (id: string): RunCommand => ({ type: 'SubmissionRejected', data: { submissionId: id, reasonClass: 'invalid_path', message: 'no such dir' } }),
  exited: (reason: 'completed' | 'crashed' = 'completed'): RunCommand => ({ type: 'AgentExited', data: { exitCode: 0, reason } }),
  completed: (submissions = 0): RunCommand => ({ type: 'RunCompleted', data: { submissions } }),
  interrupted: (): RunCommand => ({ type: 'RunInterrupted', data: { reason: 'the harness exited while the run was open' } }),
  resumed: (): RunCommand => ({ type: 'RunResumed', data: {} }),
  head: (): RunCommand => ({ type: 'TreeHeadSigned', data: { treeSize: 3, rootHash: SHA, signature: 'sig', keyId: 'k' } }),
};

const ANY: Record<EventType, () => RunCommand> = {
  RunScheduled: c.scheduled,
  WorkspacePrepared: c.prepared,
  WorkspaceIntegrityChecked: () => ({ type: 'WorkspaceIntegrityChecked', data: { phase: 'end', ok: true, full: true, checked: 2, differences: [], observedAt: T } }),
  BaselineEvaluated: c.baseline,
  AgentStarted: c.started,
  FileChanged: c.fileChanged,
  ProcessStarted: c.processStarted,
  ProcessExited: c.processExited,
  AgentOutput: c.output,
  RolloutBatchRecorded: c.rollouts,
  ObservationGap: c.gap,
  TransientFileRecorded: () => ({ type: 'TransientFileRecorded', data: { path: 'code/x.sh', note: 'gone before it could be read', observedAt: T } }),
  SubmissionReceived: () => c.received('sub-9'),
  SubmissionGraded: () => c.graded('sub-9'),
  SubmissionRejected: () => c.rejected('sub-9'),
  AgentExited: c.exited,
  SecretRedacted: () => ({ type: 'SecretRedacted', data: { where: 'event', eventType: 'ProcessStarted', field: 'argv[2]', kind: 'run-token', count: 1, observedAt: T } }),
  RunCompleted: c.completed,
  RunInterrupted: c.interrupted,
  RunResumed: c.resumed,
  TreeHeadSigned: c.head,
  EgressConnection: () => ({ type: 'EgressConnection', data: { host: 'pypi.org', port: 443, method: 'CONNECT', allowed: false, reason: 'not on the allowlist', bytesOut: 0, bytesIn: 0, observedAt: T } }),
  LimitReached: () => ({ type: 'LimitReached', data: { limit: 'diskBytes', value: 5, max: 4, action: 'stopped the agent', observedAt: T } }),
  LlmCallRecorded: () => ({
    type: 'LlmCallRecorded',
    data: {
      callId: 'llm-1', provider: 'anthropic', api: 'messages', modelRequested: 'claude-x', modelAnswered: 'claude-x', stream: true, status: 200, outcome: 'ok',
      stopReason: 'end_turn', usage: { inputTokens: 10, outputTokens: 2, cacheReadTokens: null, cacheWriteTokens: null }, costUsd: null, priceTable: 'test',
      latencyMs: 5, ttftMs: 1, messages: 1, toolResults: [], outputText: 'hi', toolCalls: [], request: { sha256: 'a'.repeat(64), size: 1, key: `sha256/aa/${'a'.repeat(64)}` }, startedAt: T, observedAt: T,
    },
  }),
  AgentHomeArchived: () => ({ type: 'AgentHomeArchived', data: { files: [], skipped: 0, observedAt: T } }),
  GradingRepeated: () => ({ type: 'GradingRepeated', data: { subject: 'baseline', series: 's-1', repeat: 1, of: 2, score: 10 } }),
  // Campaign streams' events: refused in a run stream whatever its phase.
  CampaignScheduled: () => ({
    type: 'CampaignScheduled',
    data: { matrix: { tasks: ['t'], agents: ['reference'], drivers: [], seeds: 1 }, cells: [{ cell: 0, task: 't', agent: 'reference', seed: 0, gpus: 0 }], budgetSeconds: 60, retries: 1, queue: 'local' },
  }),
  RunRequested: () => ({ type: 'RunRequested', data: { cell: 0, attempt: 1 } }),
  RunAssigned: () => ({ type: 'RunAssigned', data: { cell: 0, attempt: 1, runId: 'r-1', worker: { id: 'h-1-abcd', host: 'h', pid: 1, gpus: [] }, gpus: [] } }),
  RunFinished: () => ({ type: 'RunFinished', data: { cell: 0, attempt: 1, runId: 'r-1', outcome: 'completed', best: 40, baseline: 10 } }),
  RunRetried: () => ({ type: 'RunRetried', data: { cell: 0, attempt: 2, reason: 'worker lost' } }),
  CampaignCompleted: () => ({ type: 'CampaignCompleted', data: { completed: 1, failed: 0 } }),
  CampaignCancelled: () => ({ type: 'CampaignCancelled', data: { reason: 'operator' } }),
  // The access stream's events: refused in a run stream whatever its phase.
  TokenCreated: () => ({ type: 'TokenCreated', data: { tokenId: 'abcd1234', name: 'ci', role: 'viewer', sha256: SHA, expiresAt: null } }),
  TokenRevoked: () => ({ type: 'TokenRevoked', data: { tokenId: 'abcd1234' } }),
  AccessRecorded: () => ({ type: 'AccessRecorded', data: { actor: { kind: 'token', id: 'abcd1234', name: 'ci', role: 'operator' }, action: 'export', target: { runId: 'r-1' }, outcome: 'ok' } }),
};
const CAMPAIGN = EVENT_TYPES.filter((t) => CAMPAIGN_EVENT_TYPES.has(t));
const ACCESS = EVENT_TYPES.filter((t) => ACCESS_EVENT_TYPES.has(t));
const INSTRUMENTATION = ['FileChanged', 'ProcessStarted', 'ProcessExited', 'AgentOutput', 'RolloutBatchRecorded', 'ObservationGap'] as const;

// The decider on the in-memory store (test/testing/given.ts): histories are recorded, read back and folded.
const lifecycle = decider<RunLifecycleState, RunCommand>({ stream: 'run', id: 'r-1', initial: initialRunState, evolve, decide });

/** Records `commands` the way the recorder does: each must be decided as itself, then is appended and folded. */
async function given(...commands: RunCommand[]): Promise<RunLifecycleState> {
  let state = initialRunState;
  for (let i = 0; i < commands.length; i++) state = await lifecycle.given(...commands.slice(0, i)).when(commands[i]).then([commands[i]]);
  return state;
}

/** The refusal decide gives `command` after `history` (which must itself be accepted); fails when it is accepted. */
async function refused(history: RunCommand[], command: RunCommand): Promise<IllegalTransitionError> {
  await given(...history);
  return lifecycle.given(...history).when(command).thenRefuses(IllegalTransitionError);
}

const SCHEDULED = [c.scheduled()];
const interruptedBy = (cause: 'setup_failed' | 'harness_gone'): RunCommand => ({ type: 'RunInterrupted', data: { reason: 'why', cause } });
const PREPARED = [...SCHEDULED, c.prepared()];
const READY = [...PREPARED, c.baseline()];
const RUNNING = [...READY, c.started()];
const EXITED = [...RUNNING, c.exited()];
const COMPLETED = [...EXITED, c.completed()];
const INTERRUPTED = [...RUNNING, c.interrupted()];

describe('run lifecycle: legal paths', () => {
  it('accepts a full run: facts, a grading that finishes after the agent exited, the observers\' final flush, completion and the sealing head', () => {
    const steps: Array<[RunCommand, RunPhase, string | null]> = [
      [c.scheduled(), 'scheduled', 'scheduled'],
      [c.prepared(), 'prepared', 'running'],
      [c.baseline(), 'ready', 'running'],
      [c.fileChanged(), 'ready', 'running'], // the watcher starts before the launch
      [c.started(), 'agent-running', 'running'],
      ...INSTRUMENTATION.map((t): [RunCommand, RunPhase, string] => [ANY[t](), 'agent-running', 'running']),
      [c.received('sub-1'), 'agent-running', 'running'],
      [c.graded('sub-1'), 'agent-running', 'running'],
      [c.rejected('sub-2'), 'agent-running', 'running'], // refused outright (bad path): no SubmissionReceived
      [c.received('sub-3'), 'agent-running', 'running'],
      [c.head(), 'agent-running', 'running'],
      [c.exited(), 'agent-exited', 'running'],
      [c.graded('sub-3'), 'agent-exited', 'running'], // the grading in flight finishes
      [c.fileChanged(), 'agent-exited', 'running'], // flushed after the exit
      [c.completed(3), 'completed', 'completed'],
      [c.head(), 'completed', 'completed'],
    ];
    let state = initialRunState;
    for (const [command, phase, status] of steps) {
      expect(decide(state, command)).toEqual([command]);
      state = evolve(state, command);
      expect([command.type, state.phase, state.status]).toEqual([command.type, phase, status]);
    }
    expect(state.pending.size).toBe(0);
    expect([...state.resolved].sort()).toEqual(['sub-1', 'sub-2', 'sub-3']);
  });

  it('closes a run whose setup failed before the agent started as interrupted, then seals it', async () => {
    for (const setup of [SCHEDULED, PREPARED, READY]) {
      const state = await given(...setup, c.interrupted(), c.head());
      expect(state).toMatchObject({ phase: 'interrupted', status: 'interrupted', agentStarted: false });
    }
  });

  it('records a launch that failed as a crashed agent without AgentStarted, then completes', async () => {
    expect(await given(...READY, c.exited('crashed'), c.completed(), c.head())).toMatchObject({ phase: 'completed', agentStarted: false });
  });

  it('recovers a run left open by a dead harness: RunInterrupted from any open phase, then the sealing head', async () => {
    for (const open of [RUNNING, [...RUNNING, c.received('sub-1')], EXITED]) {
      const state = await given(...open, c.fileChanged(), c.interrupted(), c.head());
      expect(state).toMatchObject({ phase: 'interrupted', status: 'interrupted' });
    }
  });

  it('resumes a run whose harness was lost while its agent ran: back where the baseline was graded, its agent started again, then closed the usual way', async () => {
    const state = await given(...RUNNING, c.received('sub-1'), c.interrupted(), c.head(), c.resumed());
    expect(state).toMatchObject({ phase: 'ready', status: 'running', interruptedIn: null, agentStarted: false });
    expect([...state.pending]).toEqual(['sub-1']); // a grading the loss cut short still needs its outcome
    expect(await given(...RUNNING, c.received('sub-1'), c.interrupted(), c.resumed(), c.graded('sub-1'), c.started(), c.received('sub-2'), c.graded('sub-2'), c.exited(), c.completed(2))).toMatchObject({ phase: 'completed' });
    expect(await given(...READY, c.interrupted(), c.resumed(), c.started())).toMatchObject({ phase: 'agent-running' });
  });

  it('refuses to resume a run that failed at set-up, was interrupted before its baseline, or whose agent had already exited', async () => {
    expect((await refused([...SCHEDULED, interruptedBy('setup_failed')], c.resumed())).reason).toBe('its set-up failed before the agent started: start a new run');
    expect((await refused([...SCHEDULED, c.interrupted()], c.resumed())).reason).toBe('it was interrupted before its baseline was graded: start a new run');
    expect((await refused([...EXITED, c.interrupted()], c.resumed())).reason).toBe('its agent had already exited when the harness was lost: the run is recorded as it ended');
  });
});

describe('run lifecycle: refused transitions', () => {
  it.each(EVENT_TYPES.filter((t) => t !== 'RunScheduled' && !CAMPAIGN_EVENT_TYPES.has(t) && !ACCESS_EVENT_TYPES.has(t)))('refuses %s before RunScheduled', async (type) => {
    const error = await refused([], ANY[type]());
    expect(error.message).toBe(`cannot record ${type} in run phase "unscheduled": RunScheduled must be the first event of a run`);
  });

  it('refuses a second RunScheduled', async () => {
    expect((await refused(RUNNING, c.scheduled())).message).toMatch(/RunScheduled in run phase "agent-running": the run is already scheduled/);
  });

  it('refuses a second WorkspacePrepared', async () => {
    expect((await refused(PREPARED, c.prepared())).message).toMatch(/WorkspacePrepared in run phase "prepared": the workspace is already prepared/);
  });

  it('refuses BaselineEvaluated before WorkspacePrepared', async () => {
    expect((await refused(SCHEDULED, c.baseline())).message).toMatch(/BaselineEvaluated in run phase "scheduled": .*WorkspacePrepared first/);
  });

  it('refuses a second BaselineEvaluated', async () => {
    expect((await refused(READY, c.baseline())).message).toMatch(/BaselineEvaluated in run phase "ready": the baseline is already evaluated/);
  });

  it('refuses AgentStarted before WorkspacePrepared', async () => {
    expect((await refused(SCHEDULED, c.started())).message).toMatch(/AgentStarted in run phase "scheduled": the agent starts only after WorkspacePrepared and BaselineEvaluated/);
  });

  it('refuses AgentStarted before BaselineEvaluated', async () => {
    expect((await refused(PREPARED, c.started())).message).toMatch(/AgentStarted in run phase "prepared": the agent starts only after BaselineEvaluated/);
  });

  it('refuses a second AgentStarted', async () => {
    expect((await refused(RUNNING, c.started())).message).toMatch(/AgentStarted in run phase "agent-running": the agent has already started/);
  });

  it('refuses AgentStarted after the agent exited', async () => {
    expect((await refused(EXITED, c.started())).message).toMatch(/AgentStarted in run phase "agent-exited": the agent has already started/);
    expect((await refused([...READY, c.exited('crashed')], c.started())).message).toMatch(/the agent has already exited \(its launch failed\)/);
  });

  it.each(INSTRUMENTATION)('refuses %s before the workspace is prepared', async (type) => {
    expect((await refused(SCHEDULED, ANY[type]())).message).toMatch(new RegExp(`${type} in run phase "scheduled": instrumentation starts once the workspace is prepared`));
  });

  it.each(INSTRUMENTATION)('refuses %s after RunCompleted', async (type) => {
    expect((await refused(COMPLETED, ANY[type]())).message).toMatch(new RegExp(`${type} in run phase "completed": the run is closed \\(RunCompleted was recorded\\); only TreeHeadSigned may follow`));
  });

  it.each(INSTRUMENTATION)('refuses %s after RunInterrupted', async (type) => {
    expect((await refused(INTERRUPTED, ANY[type]())).message).toMatch(new RegExp(`${type} in run phase "interrupted": the run is closed \\(RunInterrupted was recorded\\)`));
  });

  it('refuses a submission before the baseline is evaluated (the grading API is not open)', async () => {
    expect((await refused(PREPARED, c.received('sub-1'))).message).toMatch(/SubmissionReceived in run phase "prepared": submissions open once the baseline is evaluated; sub-1 came before/);
  });

  it('refuses a new submission after AgentExited', async () => {
    expect((await refused(EXITED, c.received('sub-1'))).message).toMatch(/SubmissionReceived in run phase "agent-exited": the agent has exited: no new submission \(sub-1\) is accepted/);
  });

  it('refuses the outright rejection of a new submission after AgentExited', async () => {
    expect((await refused(EXITED, c.rejected('sub-1'))).message).toMatch(/SubmissionRejected in run phase "agent-exited": the agent has exited: no new submission \(sub-1\)/);
  });

  it.each([
    ['SubmissionReceived', () => c.received('sub-2')],
    ['SubmissionGraded', () => c.graded('sub-1')],
    ['SubmissionRejected', () => c.rejected('sub-1')],
  ])('refuses %s after RunCompleted', async (type, command) => {
    const history = [...RUNNING, c.received('sub-1'), c.graded('sub-1'), c.exited(), c.completed(1)];
    expect((await refused(history, command())).message).toMatch(new RegExp(`${type} in run phase "completed": the run is closed`));
  });

  it.each([
    ['SubmissionReceived', () => c.received('sub-2')],
    ['SubmissionGraded', () => c.graded('sub-1')],
    ['SubmissionRejected', () => c.rejected('sub-1')],
  ])('refuses %s after RunInterrupted, even for a grading that was in flight', async (type, command) => {
    expect((await refused([...RUNNING, c.received('sub-1'), c.interrupted()], command())).message).toMatch(new RegExp(`${type} in run phase "interrupted": the run is closed`));
  });

  it('refuses grading a submission id that was never received', async () => {
    expect((await refused([...RUNNING, c.received('sub-1')], c.graded('sub-7'))).message).toMatch(/SubmissionGraded in run phase "agent-running": submission sub-7 was never received \(SubmissionReceived first\)/);
  });

  it('refuses a second grade for a submission', async () => {
    expect((await refused([...RUNNING, c.received('sub-1'), c.graded('sub-1')], c.graded('sub-1'))).message).toMatch(/submission sub-1 already has an outcome/);
  });

  it('refuses rejecting a submission that was already graded', async () => {
    expect((await refused([...RUNNING, c.received('sub-1'), c.graded('sub-1')], c.rejected('sub-1'))).message).toMatch(/SubmissionRejected .*submission sub-1 already has an outcome/);
  });

  it('refuses receiving a submission id twice', async () => {
    expect((await refused([...RUNNING, c.received('sub-1')], c.received('sub-1'))).message).toMatch(/submission id sub-1 was already used/);
    expect((await refused([...RUNNING, c.rejected('sub-2')], c.received('sub-2'))).message).toMatch(/submission id sub-2 was already used/);
  });

  it('refuses a second AgentExited', async () => {
    expect((await refused(EXITED, c.exited())).message).toMatch(/AgentExited in run phase "agent-exited": the agent has already exited/);
  });

  it('refuses AgentExited before any agent could be launched', async () => {
    expect((await refused(PREPARED, c.exited('crashed'))).message).toMatch(/AgentExited in run phase "prepared": no agent was launched yet \(a failure before the launch is RunInterrupted\)/);
  });

  it('refuses RunCompleted before AgentExited when the agent started', async () => {
    expect((await refused(RUNNING, c.completed())).message).toMatch(/RunCompleted in run phase "agent-running": the agent is still running \(AgentExited first\)/);
  });

  it('refuses RunCompleted for a run whose agent never ran', async () => {
    expect((await refused(READY, c.completed())).message).toMatch(/RunCompleted in run phase "ready": no agent ran to completion/);
  });

  it('refuses RunCompleted while gradings are in flight', async () => {
    const history = [...RUNNING, c.received('sub-1'), c.received('sub-2'), c.exited()];
    expect((await refused(history, c.completed(2))).message).toMatch(/RunCompleted in run phase "agent-exited": submission\(s\) sub-1, sub-2 are still being graded/);
  });

  it('refuses a second RunCompleted', async () => {
    expect((await refused(COMPLETED, c.completed())).message).toMatch(/RunCompleted in run phase "completed": the run is closed \(RunCompleted was recorded\)/);
  });

  it('refuses RunInterrupted after RunCompleted', async () => {
    expect((await refused(COMPLETED, c.interrupted())).message).toMatch(/RunInterrupted in run phase "completed": the run is closed/);
  });

  it('refuses a second RunInterrupted', async () => {
    expect((await refused(INTERRUPTED, c.interrupted())).message).toMatch(/RunInterrupted in run phase "interrupted": the run is closed \(RunInterrupted was recorded\)/);
  });

  it.each(['WorkspacePrepared', 'BaselineEvaluated', 'AgentStarted', 'AgentExited'] as const)('refuses %s after the run is closed', async (type) => {
    expect((await refused(COMPLETED, ANY[type]())).message).toMatch(/only TreeHeadSigned may follow/);
    expect((await refused(INTERRUPTED, ANY[type]())).message).toMatch(/only TreeHeadSigned may follow/);
  });

  it('refuses RunResumed on an open run', async () => {
    expect((await refused(RUNNING, c.resumed())).message).toMatch(/RunResumed in run phase "agent-running": only an interrupted run can be resumed/);
  });

  it('accepts repeated gradings of the baseline before the agent starts and of graded submissions after the run closed', async () => {
    const again = (subject: 'baseline' | 'submission', submissionId?: string): RunCommand => ({ type: 'GradingRepeated', data: { subject, ...(submissionId ? { submissionId } : {}), series: 's-1', repeat: 1, of: 3, score: 12 } });
    expect((await given(...READY, again('baseline'), again('baseline'), c.started())).phase).toBe('agent-running');
    const closed = [...RUNNING, c.received('sub-1'), c.graded('sub-1'), c.exited(), c.completed(1), c.head()];
    expect(await given(...closed, again('submission', 'sub-1'), c.head())).toMatchObject({ phase: 'completed', status: 'completed' });
    expect((await refused(RUNNING, again('baseline'))).message).toMatch(/GradingRepeated in run phase "agent-running": the baseline is graded again only between BaselineEvaluated and the agent's start/);
    expect((await refused(closed, again('submission', 'sub-2'))).message).toMatch(/submission sub-2 has no recorded outcome to grade again/);
    expect((await refused([...RUNNING, c.received('sub-1'), c.graded('sub-1')], again('submission', 'sub-1'))).message).toMatch(/graded again only after the run closed \(submission sub-1\)/);
  });

  it('refuses RunResumed on a completed run', async () => {
    expect((await refused(COMPLETED, c.resumed())).message).toMatch(/RunResumed in run phase "completed": a completed run cannot be resumed/);
  });

  it.each(CAMPAIGN)('refuses %s in a run stream, whatever the phase: campaign events belong to a campaign stream', async (type) => {
    for (const history of [[], SCHEDULED, READY, RUNNING, EXITED, COMPLETED, INTERRUPTED]) {
      const error = await refused(history, ANY[type]());
      expect(error.reason).toBe('campaign events belong to a campaign stream');
      expect(error.eventType).toBe(type);
    }
  });

  it('names the refused event and phase on the error for callers', async () => {
    const error = await refused(RUNNING, c.started());
    expect(error).toMatchObject({ name: 'IllegalTransitionError', phase: 'agent-running', eventType: 'AgentStarted', reason: expect.stringContaining('already started') });
  });
});

describe('run lifecycle: evolve and the recorder guard', () => {
  it('never throws while folding a ledger that broke the rules, and keeps the status of the last lifecycle event', async () => {
    const odd = [c.fileChanged(), c.started(), c.completed(), c.received('sub-1'), c.graded('sub-9'), c.scheduled()];
    const state = foldRunLifecycle(odd);
    expect(state.status).toBe('scheduled');
    expect(state.phase).toBe('completed'); // a stray RunScheduled does not reopen a closed run
  });

  it('returns the same state object for events that change nothing, and never mutates its input', async () => {
    const running = await given(...RUNNING);
    expect(evolve(running, c.fileChanged())).toBe(running);
    expect(evolve(running, c.head())).toBe(running);
    const withSub = evolve(running, c.received('sub-1'));
    expect(running.pending.size).toBe(0);
    expect(withSub.pending.has('sub-1')).toBe(true);
  });

  it('guards queued events in order: the second of two AgentStarted queued back to back is refused, and leaves the state as it was', async () => {
    const guard = runGuard();
    for (const command of READY) guard(command.type, command.data);
    guard('AgentStarted', c.started().data);
    const before = guard.state;
    expect(() => guard('AgentStarted', c.started().data)).toThrow(IllegalTransitionError);
    expect(guard.state).toBe(before);
    expect(guard.state.phase).toBe('agent-running');
  });

  it.each(ACCESS)('refuses %s in a run stream, whatever the phase: access events belong to the access stream', async (type) => {
    for (const history of [[], SCHEDULED, RUNNING, COMPLETED]) {
      const error = await refused(history, ANY[type]());
      expect(error.reason).toBe('access events belong to the access stream');
      expect(error.eventType).toBe(type);
    }
  });

  it.each(CAMPAIGN)('folds a stray %s as nothing: same state object, status kept', async (type) => {
    for (const history of [[], RUNNING, COMPLETED]) {
      const state = foldRunLifecycle(history);
      expect(evolve(state, ANY[type]())).toBe(state);
    }
    expect(foldRunLifecycle([...RUNNING, ANY[type](), c.exited()])).toMatchObject({ phase: 'agent-exited', status: 'running' });
  });

  it('guard refuses a campaign event and leaves the state as it was', async () => {
    const guard = runGuard(foldRunLifecycle(RUNNING));
    const before = guard.state;
    expect(() => guard('RunFinished', ANY.RunFinished().data)).toThrow(/campaign events belong to a campaign stream/);
    expect(guard.state).toBe(before);
  });

  it('guards a run that already has events from the fold of those events', async () => {
    const guard = runGuard(foldRunLifecycle(INTERRUPTED));
    expect(() => guard('FileChanged', c.fileChanged().data)).toThrow(/run phase "interrupted"/);
    guard('TreeHeadSigned', c.head().data);
  });
});

describe('run lifecycle: outcomes from recorded causes', () => {
  const killedBy = (stoppedBy: 'operator' | 'campaign' | 'limit'): RunCommand => ({ type: 'AgentExited', data: { exitCode: 143, reason: 'killed', stoppedBy } });
  const setupFailedOldWording: RunCommand = { type: 'RunInterrupted', data: { reason: 'setup failed before the agent started: no dataset' } };

  it('shows a run whose set-up failed as setup_failed, from the recorded cause only (older runs read as before)', async () => {
    for (const setup of [SCHEDULED, PREPARED, READY]) {
      expect(await given(...setup, interruptedBy('setup_failed'), c.head())).toMatchObject({ phase: 'interrupted', status: 'setup_failed' });
      expect((await given(...setup, setupFailedOldWording, c.head())).status).toBe('interrupted');
    }
    expect((await given(...RUNNING, interruptedBy('harness_gone'))).status).toBe('interrupted');
  });

  it.each(['operator', 'campaign'] as const)('shows a run whose agent the %s stopped as cancelled from AgentExited on, and keeps it at RunCompleted', async (who) => {
    const statuses = [...RUNNING, killedBy(who), c.completed(), c.head()].map((_, i, all) => foldRunLifecycle(all.slice(0, i + 1)).status);
    expect(statuses.slice(-4)).toEqual(['running', 'cancelled', 'cancelled', 'cancelled']);
    expect(await given(...RUNNING, killedBy(who), c.completed())).toMatchObject({ phase: 'completed' });
  });

  it('keeps a run stopped at a limit, or killed without a stopper (older runs), completed', async () => {
    expect((await given(...RUNNING, killedBy('limit'), c.completed())).status).toBe('completed');
    const killed: RunCommand = { type: 'AgentExited', data: { exitCode: 143, reason: 'killed' } };
    expect((await given(...RUNNING, killed, c.completed())).status).toBe('completed');
  });

  it('lets a later lifecycle event move a cancelled run on, and a stray stop not reopen an ended one', async () => {
    expect((await given(...RUNNING, killedBy('operator'), interruptedBy('harness_gone'))).status).toBe('interrupted');
    expect(foldRunLifecycle([...RUNNING, killedBy('operator'), c.interrupted(), c.resumed()]).status).toBe('running');
    expect(foldRunLifecycle([...COMPLETED, killedBy('operator')]).status).toBe('completed');
    expect(foldRunLifecycle([...SCHEDULED, interruptedBy('setup_failed'), killedBy('campaign')]).status).toBe('setup_failed');
  });

  it('says which states have ended and which the scoreboard leaves out by default', async () => {
    expect(RUN_STATES.filter(hasEnded)).toEqual(['completed', 'interrupted', 'setup_failed', 'cancelled']);
    expect(RUN_STATES.filter(isUnfinished)).toEqual(['setup_failed', 'cancelled']);
    expect(hasEnded(null)).toBe(false);
  });
});
