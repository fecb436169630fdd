import { describe, expect, it } from '@jest/globals';
import type { A2rlEvent, EventData } from '../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { changePhrase, describeModified, workspaceIntegrity } from './integrity.js';
import { at } from '../../test/testing/helpers.js';

const RUN = 'run-integrity';
const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
type Check = EventData<'WorkspaceIntegrityChecked'>;

function run(...checks: Partial<Check>[]): A2rlEvent[] {
  return [
    buildEvent('RunScheduled', RUN, 0, at(0), { task: 't', agent: 'a', baseModel: 'm', budgetSeconds: 60, seed: 0, mode: 'free' }),
    ...checks.map((c, i) => buildEvent('WorkspaceIntegrityChecked', RUN, i + 1, at(i + 1), { phase: 'grading', ok: true, full: false, checked: 3, differences: [], observedAt: at(i + 1), ...c })),
  ];
}

describe('workspaceIntegrity', () => {
  it('is null for a run that recorded no check (runs from before the checks)', () => {
    expect(workspaceIntegrity(run())).toBeNull();
  });

  it('is ok when every check is, and says whether the end-of-run check was recorded', () => {
    expect(workspaceIntegrity(run({ submissionId: 's1' }))).toEqual({
      ok: true,
      endChecked: false,
      checks: [{ seq: 1, phase: 'grading', submissionId: 's1', full: false, ok: true, checked: 3, differences: 0 }],
      modified: [],
      unlisted: 0,
      evidence: [1],
    });
    expect(workspaceIntegrity(run({ submissionId: 's1' }, { phase: 'end', full: true }))).toMatchObject({ ok: true, endChecked: true, evidence: [1, 2] });
    // A sandboxed agent's end check is stat-compared (full: false): still the end-of-run check.
    expect(workspaceIntegrity(run({ submissionId: 's1' }, { phase: 'end', full: false }))).toMatchObject({ ok: true, endChecked: true, checks: [{ full: false }, { phase: 'end', full: false }] });
  });

  it('keeps every modified path with its latest finding and the checks that listed it, sorted by path', () => {
    const integrity = workspaceIntegrity(
      run(
        { submissionId: 's1' },
        { submissionId: 's2', ok: false, differences: [{ path: 'data/train.jsonl', expected: A, actual: B }] },
        {
          phase: 'end',
          full: true,
          ok: false,
          differences: [
            { path: 'data/extra', expected: null, actual: B },
            { path: 'data/train.jsonl', expected: A, actual: null, found: 'symlink' },
            { path: 'models/m/w.bin', expected: A, actual: null },
          ],
          moreDifferences: 7,
        },
      ),
    )!;
    expect(integrity.ok).toBe(false);
    expect(integrity.checks.map((c) => [c.seq, c.ok, c.differences])).toEqual([[1, true, 0], [2, false, 1], [3, false, 10]]);
    expect(integrity.unlisted).toBe(7);
    expect(integrity.modified.map((m) => [describeModified(m), m.evidence])).toEqual([
      ['data/extra (added)', [3]],
      ['data/train.jsonl (symlink instead of a file)', [2, 3]],
      ['models/m/w.bin (missing)', [3]],
    ]);
  });

  it('counts a check that lists a difference as failed even when it says ok', () => {
    const integrity = workspaceIntegrity(run({ ok: true, differences: [{ path: 'data/x', expected: A, actual: B }] }))!;
    expect(integrity.ok).toBe(false);
    expect(workspaceIntegrity(run({ ok: true, moreDifferences: 2 }))!.ok).toBe(false);
  });

  it('words each kind of change', () => {
    expect(changePhrase({ change: 'changed', found: null })).toBe('changed');
    expect(changePhrase({ change: 'added', found: 'other' })).toBe('added other');
    expect(changePhrase({ change: 'replaced', found: 'unreadable' })).toBe('unreadable');
    expect(changePhrase({ change: 'replaced', found: 'directory' })).toBe('directory instead of a file');
  });
});
