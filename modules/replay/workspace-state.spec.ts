import { describe, expect, it } from '@jest/globals';
import { applyRevisions, type RevisionRecord, type WorkspaceState } from './workspace-state.js';

const sha = (c: string) => c.repeat(64);
const put = (path: string, c: string) => ({ path, op: 'create' as const, sha256: sha(c), size: 1 });

function fold(records: RevisionRecord[]): Record<string, string | null> {
  const state: WorkspaceState = new Map();
  for (const r of records) applyRevisions(state, r);
  return Object.fromEntries([...state.values()].map((f) => [f.path, f.sha256]));
}

describe('applyRevisions', () => {
  it('keeps the latest revision per path and drops deleted paths', () => {
    expect(fold([
      { seq: 1, replaces: null, revisions: [put('a', '1'), put('b', '2')] },
      { seq: 2, replaces: null, revisions: [put('a', '3')] },
      { seq: 3, replaces: null, revisions: [{ path: 'b', op: 'delete', sha256: null, size: null }] },
    ])).toEqual({ a: sha('3') });
  });

  it('replaces everything under a submitted directory but not under a sibling sharing its prefix', () => {
    expect(fold([
      { seq: 1, replaces: 'out/ck', revisions: [put('out/ck/w', '1'), put('out/ck/old', '2')] },
      { seq: 2, replaces: 'out/ck2', revisions: [put('out/ck2/w', '3')] },
      { seq: 3, replaces: 'out/ck', revisions: [put('out/ck/w', '4')] },
    ])).toEqual({ 'out/ck/w': sha('4'), 'out/ck2/w': sha('3') });
  });

  it("replaces the whole workspace for a submission of the root ('')", () => {
    expect(fold([
      { seq: 1, replaces: null, revisions: [put('code/a', '1')] },
      { seq: 2, replaces: '', revisions: [put('w', '2')] },
    ])).toEqual({ w: sha('2') });
  });

  it('remembers the seq that wrote each file', () => {
    const state: WorkspaceState = new Map();
    applyRevisions(state, { seq: 4, replaces: null, revisions: [put('a', '1')] });
    expect(state.get('a')).toEqual({ path: 'a', sha256: sha('1'), size: 1, seq: 4 });
  });
});
