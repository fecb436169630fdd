import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent, EventData, EventType } from '../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { analyzeRun, failureClassOf } from './analyze.js';
import { memoryBlobs, sampleRun } from './testing/run-fixture.js';
import { at } from '../../test/testing/helpers.js';

// Outcomes that say nothing about the agent (set-up failed, cancelled) and the failure class of a
// run in progress: derived from recorded causes; runs recorded without them read as before.

const RUN = 'oc-1';

function events(...specs: Array<[EventType, EventData<EventType>]>): A2rlEvent[] {
  const head: Array<[EventType, EventData<EventType>]> = [
    ['RunScheduled', { task: 'ref-arith', agent: 'reference', baseModel: 'arith-base', budgetSeconds: 60, seed: 0, mode: 'free' }],
  ];
  return [...head, ...specs].map(([type, data], seq) => buildEvent(type, RUN, seq, at(seq), data));
}

const RUNNING: Array<[EventType, EventData<EventType>]> = [
  ['WorkspacePrepared', { workspace: '/w', sandbox: 'none', mounts: [], dataManifest: [] }],
  ['BaselineEvaluated', { score: 10, cached: false }],
  ['AgentStarted', { command: 'run.sh' }],
];
const analyze = (list: A2rlEvent[]) => analyzeRun(list, memoryBlobs([]));

describe('run analysis: outcomes', () => {
  it('a set-up failure recorded with its cause is state setup_failed, class infra_setup', async () => {
    const a = await analyze(events(['RunInterrupted', { reason: 'setup failed before the agent started: no dataset', cause: 'setup_failed' }]));
    expect([a.state, a.failure]).toEqual(['setup_failed', { class: 'infra_setup', rule: 'setup_failed', evidence: [1] }]);
    // The cause decides, not the wording.
    const worded = await analyze(events(['RunInterrupted', { reason: 'the dataset is missing', cause: 'setup_failed' }]));
    expect([worded.state, worded.failure.class]).toEqual(['setup_failed', 'infra_setup']);
  });

  it('an older set-up failure (no cause) keeps its state interrupted and its class', async () => {
    const a = await analyze(events(['RunInterrupted', { reason: 'setup failed before the agent started: no dataset' }]));
    expect([a.state, a.failure]).toEqual(['interrupted', { class: 'infra_setup', rule: 'setup_failed', evidence: [1] }]);
  });

  it('a harness gone is interrupted, class infra_error', async () => {
    const a = await analyze(events(...RUNNING, ['RunInterrupted', { reason: 'the harness (pid 7) exited while the run was open', cause: 'harness_gone' }]));
    expect([a.state, a.failure.class, a.failure.rule]).toEqual(['interrupted', 'infra_error', 'run_interrupted']);
  });

  it.each(['operator', 'campaign'] as const)('a run whose agent the %s stopped is cancelled, whatever it scored', async (who) => {
    const a = await analyze(events(
      ...RUNNING,
      ['SubmissionReceived', { submissionId: 's1', modelPath: 'output/ck', manifest: [] }],
      ['SubmissionGraded', { submissionId: 's1', score: 40, improvement: 30 }],
      ['AgentExited', { exitCode: 143, reason: 'killed', stoppedBy: who }],
      ['RunCompleted', { best: 40, submissions: 1 }],
    ));
    expect([a.state, a.failure]).toEqual(['cancelled', { class: 'cancelled', rule: `stopped_by_${who}`, evidence: [6] }]);
  });

  it('an agent stopped at a limit, or killed without a stopper (older runs), is judged as before', async () => {
    for (const stop of [{ stoppedBy: 'limit' as const }, {}]) {
      const a = await analyze(events(...RUNNING, ['AgentExited', { exitCode: 143, reason: 'killed', ...stop }], ['RunCompleted', { submissions: 0 }]));
      expect([a.state, a.failure.class, a.failure.rule]).toEqual(['completed', 'infra_error', 'agent_killed_by_harness']);
    }
  });
});

describe('failureClassOf', () => {
  it('is null until the run has ended, then the analysis verdict', async () => {
    const { events: all } = sampleRun(RUN);
    const open = await analyze(all.slice(0, 7)); // training done, nothing graded yet: provisionally no_improvement
    expect([open.state, open.failure.class, failureClassOf(open)]).toEqual(['running', 'no_improvement', null]);
    const improving = await analyze(all.slice(0, -2)); // graded above the baseline, agent still running
    expect([improving.state, improving.failure.class, failureClassOf(improving)]).toEqual(['running', 'success', null]);
    const ended = await analyze(all);
    expect([ended.state, failureClassOf(ended)]).toEqual(['completed', 'success']);
    expect(failureClassOf({ state: null, failure: ended.failure })).toBeNull();
    expect(failureClassOf({ state: 'scheduled', failure: ended.failure })).toBeNull();
    expect(failureClassOf({ state: 'cancelled', failure: { class: 'cancelled', rule: 'r', evidence: [] } })).toBe('cancelled');
  });
});
