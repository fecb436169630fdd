import { describe, expect, it } from '@jest/globals';
import { sampleRun } from '../../projections/run-analysis/testing/run-fixture.js';
import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';
import { buildEvent } from '../ledger/events/envelope.js';
import { eventId } from '../ledger/events/ids.js';
import { buildReport } from './report-model.js';
import { renderReport } from './render.js';

// The report follows `causedBy` links (docs/event-catalog.md#causation) where events carry them,
// and says nothing of them where they do not (reports of older runs keep their bytes).

const RUN = 'fx-run-1';
const cause = (seq: number, evidence: object = {}) => ({ causedBy: { event: eventId(RUN, seq), seq, ...evidence } });

/** The sample run with its first grading naming its submission and its first process the model call (seq 3) that started it. */
function withCauses() {
  const base = sampleRun(RUN);
  const events = base.events.map((e) => {
    const data = e.data as Record<string, unknown>;
    if (e.type === 'SubmissionGraded' && e.data.submissionId === 'sub-1') return rebuilt(e, { ...data, ...cause(7, { submissionId: 'sub-1' }) });
    if (e.type === 'ProcessStarted' && e.data.pid === 100) return rebuilt(e, { ...data, ...cause(3, { toolCallId: 'toolu_1', command: 'python code/train.py --sft' }) });
    return e;
  });
  return { ...base, events };
}

const rebuilt = (e: A2rlEvent, data: Record<string, unknown>) => buildEvent(e.type, e.runId, e.seq, e.occurredAt, data as EventData<typeof e.type>);

describe('the report follows causes', () => {
  it('names the submission a grading graded and the model call that started a process, citing both events', async () => {
    const run = withCauses();
    const report = await buildReport(run);
    expect(report.submissions[0].outcome).toEqual({ seq: 8, type: 'SubmissionGraded', causedBy: { seq: 7, submissionId: 'sub-1' } });
    expect(report.submissions[0].processes[0].startedBy).toEqual({ seq: 3, toolCallId: 'toolu_1', command: 'python code/train.py --sft' });
    expect(report.submissions[1].outcome).toBeUndefined();
    const md = await renderReport(run, 'md');
    expect(md).toContain('Graded submission sub-1 (seq 7)');
    expect(md).toMatch(/pid 100 was started by the model call at seq 3 \(tool call toolu\\?_1: `python code\/train.py --sft`\) \[seq 3, 5\]/); // md escapes the underscore
  });

  it('adds nothing where no event names a cause', async () => {
    const report = await buildReport(sampleRun(RUN));
    expect(report.submissions.map((s) => 'outcome' in s)).toEqual([false, false]);
    expect(report.submissions.flatMap((s) => s.processes).some((p) => 'startedBy' in p)).toBe(false);
    expect(await renderReport(sampleRun(RUN), 'md')).not.toMatch(/Graded submission|was started by the model call/);
  });
});
