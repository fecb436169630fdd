import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent, EventData } from '../modules/ledger/events/catalog.js';
import { buildEvent } from '../modules/ledger/events/envelope.js';
import { costOf, priceTable } from '../modules/llm-gateway/prices.js';
import { callCostUsd, improvementsOf, integrityOk, limitAction } from './derived-facts.js';
import { llmCall } from './transcript/testing/llm-call.js';

const T = '2026-01-01T00:00:00.000Z';
const run = (...items: Array<[A2rlEvent['type'], object]>) => items.map(([type, data], seq) => buildEvent(type, 'r1', seq, T, data as never));

describe('values derived from facts: the recorded value where an old event has one, else computed', () => {
  it('improvement: score minus the baseline in force when graded (an operator may set it again); null without one', () => {
    const events = run(
      ['SubmissionGraded', { submissionId: 'sub-0', score: 10 }],
      ['BaselineEvaluated', { score: 20, cached: false }],
      ['SubmissionGraded', { submissionId: 'sub-1', score: 55 }],
      ['BaselineEvaluated', { score: 30, cached: false }],
      ['SubmissionGraded', { submissionId: 'sub-2', score: 40 }],
      ['SubmissionGraded', { submissionId: 'sub-3', score: 40, improvement: 99 }], // as an old run recorded it
    );
    expect([...improvementsOf(events)]).toEqual([[0, null], [2, 35], [4, 10], [5, 99]]);
  });

  it('integrity: ok as recorded, else no difference listed or counted', () => {
    const check = { phase: 'end', full: true, checked: 3, differences: [], observedAt: T } as EventData<'WorkspaceIntegrityChecked'>;
    const diff = { path: 'data/a', expected: 'a'.repeat(64), actual: null };
    expect([integrityOk(check), integrityOk({ ...check, differences: [diff] }), integrityOk({ ...check, moreDifferences: 2 }), integrityOk({ ...check, ok: false })]).toEqual([true, false, false, false]);
  });

  it('cost: priced from usage with the table the call names; 0 when not billed; null when unpriced or another table', () => {
    const table = priceTable();
    const call = llmCall({ priceTable: table.version, modelAnswered: 'claude-sonnet-4-5-20250929' });
    const { costUsd: _recorded, ...unrecorded } = call;
    expect(callCostUsd(unrecorded, table)).toBe(costOf('claude-sonnet-4-5-20250929', call.usage, table));
    expect(callCostUsd(unrecorded, table)).toBeGreaterThan(0);
    expect(callCostUsd({ ...unrecorded, api: 'count_tokens' }, table)).toBe(0);
    expect(callCostUsd({ ...unrecorded, modelAnswered: null, modelRequested: 'no-such-model' }, table)).toBeNull();
    expect(callCostUsd({ ...unrecorded, priceTable: 'some-other-table' }, table)).toBeNull();
    expect(callCostUsd({ ...unrecorded, costUsd: 0.5 }, table)).toBe(0.5); // an old event's recorded cost stands
    expect(callCostUsd({ ...unrecorded, costUsd: null }, table)).toBeNull();
  });

  it('limit action: as recorded, else the action the limit always has', () => {
    const limit = (name: string, scope?: string) => ({ limit: name, value: 2, max: 1, ...(scope ? { scope } : {}), observedAt: T });
    expect(limitAction(limit('outputBytesPerStream', 'stderr'))).toBe('stopped archiving stderr; later bytes are counted, not stored');
    expect(limitAction(limit('checkpointBytes', 'sub-1'))).toBe('refused the submission');
    expect(limitAction({ ...limit('diskBytes'), action: 'stopped the agent' })).toBe('stopped the agent');
  });
});
