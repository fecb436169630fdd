import { describe, expect, it } from '@jest/globals';
import type { FailureClass } from '../../projections/run-analysis/analysis.types.js';
import { analysisFixture } from '../../projections/run-analysis/testing/run-fixture.js';
import { csvField, formatNumber, resultsCsv } from './results-csv.js';

const run = (runId: string, best: number | null, extra: { cls?: FailureClass; driver?: string } = {}) =>
  analysisFixture({
    runId,
    driver: extra.driver ?? 'none',
    baseline: 10,
    best,
    improvement: best === null ? null : best - 10,
    failure: { class: extra.cls ?? (best !== null && best > 10 ? 'success' : 'no_improvement'), rule: 'r', evidence: [] },
  });

describe('resultsCsv', () => {
  it('writes exactly the paper columns, one row per run ordered by timestamp then run id, RFC 4180 quoted', () => {
    const early = { ...run('z-run', 40, { driver: 'gpt "x", v2' }), scheduledAt: '2026-01-01T00:00:00.000Z', workspace: '/ws/z', durationS: 12.34567 };
    const late = { ...run('a-run', null, { cls: 'timeout_no_submission' }), scheduledAt: '2026-01-02T00:00:00.000Z', workspace: null };
    const tie = { ...run('b-run', 40), scheduledAt: '2026-01-01T00:00:00.000Z' };
    const lines = resultsCsv([late, early, tie]).split('\r\n');
    expect(lines[0]).toBe('run_id,timestamp,task,agent,driver_model,base_model,baseline,best_score,improvement,submissions,duration_s,success,workspace');
    expect(lines[1]).toBe('b-run,2026-01-01T00:00:00.000Z,ref-arith,reference,none,arith-base,10,40,30,0,20,true,');
    expect(lines[2]).toBe('z-run,2026-01-01T00:00:00.000Z,ref-arith,reference,"gpt ""x"", v2",arith-base,10,40,30,0,12.3457,true,/ws/z');
    expect(lines[3]).toBe('a-run,2026-01-02T00:00:00.000Z,ref-arith,reference,none,arith-base,10,,,0,20,false,');
    expect(lines[4]).toBe('');
    expect(lines).toHaveLength(5);
  });

  it('formats numbers with at most 4 decimals, no trailing zeros and no negative zero', () => {
    expect([null, 40, 12.34567, 0.1 + 0.2, -0.00001, 1e-7].map(formatNumber)).toEqual(['', '40', '12.3457', '0.3', '0', '0']);
  });

  it('quotes fields with commas, quotes and line breaks only', () => {
    expect(csvField('plain')).toBe('plain');
    expect(csvField('a\nb')).toBe('"a\nb"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
  });
});
