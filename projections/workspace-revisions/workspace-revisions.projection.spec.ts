import { describe, expect, it } from '@jest/globals';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { buildEvent } from '../../modules/ledger/events/envelope.js';
import { workspaceRevisionsProjection as projection } from './workspace-revisions.projection.js';
import { at } from '../../test/testing/helpers.js';

const RUN = 'r-1';
const sha = (c: string) => c.repeat(64);

describe('workspace-revisions projection', () => {
  it('keys file-changing events by run and seq and ignores the rest', () => {
    const changed = buildEvent('FileChanged', RUN, 7, at(7), { path: 'code/a.py', op: 'create', sha256: sha('a'), size: 3, observedAt: at(7) });
    expect(projection.keyOf(changed)).toBe('r-1/7');
    expect(projection.keyOf(buildEvent('SubmissionGraded', RUN, 8, at(8), { submissionId: 'sub-1', score: 50, improvement: 1 }))).toBeNull();
    expect(projection.keyOf(buildEvent('AgentStarted', RUN, 2, at(2), { command: 'x' }))).toBeNull();
  });

  it('records a FileChanged as one revision with its content, and a delete without one', () => {
    const modify = buildEvent('FileChanged', RUN, 7, at(7), {
      path: 'code/a.py', op: 'modify', sha256: sha('b'), size: 9, previousSha256: sha('a'), key: 'k', observedAt: at(7),
    });
    expect(projection.evolve(undefined, modify)).toEqual({
      id: 'r-1/7', runId: RUN, lastSeq: 7, occurredAt: at(7), eventType: 'FileChanged', replaces: null,
      revisions: `[{"op":"modify","path":"code/a.py","sha256":"${sha('b')}","size":9}]`,
    });
    const del = buildEvent('FileChanged', RUN, 8, at(8), { path: 'code/a.py', op: 'delete', previousSha256: sha('b'), observedAt: at(8) });
    expect(JSON.parse(projection.evolve(undefined, del).revisions)).toEqual([{ path: 'code/a.py', op: 'delete', sha256: null, size: null }]);
  });

  it('records the provided data and base model of WorkspacePrepared', () => {
    const prepared = buildEvent('WorkspacePrepared', RUN, 1, at(1), {
      workspace: '/w', sandbox: 'none', mounts: [],
      dataManifest: [{ path: 'data/train.jsonl', sha256: sha('c'), size: 10 }, { path: 'models/base/w.bin', sha256: sha('d'), size: 20 }],
    });
    const row = projection.evolve(undefined, prepared);
    expect(row.replaces).toBeNull();
    expect(JSON.parse(row.revisions)).toEqual([
      { path: 'data/train.jsonl', op: 'provided', sha256: sha('c'), size: 10 },
      { path: 'models/base/w.bin', op: 'provided', sha256: sha('d'), size: 20 },
    ]);
  });

  it('records a submission as replacing its checkpoint directory with the archived files', () => {
    const received = (modelPath: string) =>
      buildEvent('SubmissionReceived', RUN, 9, at(9), { submissionId: 'sub-1', modelPath, manifest: [{ path: 'sub/w.json', sha256: sha('e'), size: 5 }] });
    const row = projection.evolve(undefined, received('output/ckpt-1'));
    expect(row.replaces).toBe('output/ckpt-1');
    expect(JSON.parse(row.revisions)).toEqual([{ path: 'output/ckpt-1/sub/w.json', op: 'archived', sha256: sha('e'), size: 5 }]);
    const root = projection.evolve(undefined, received('.'));
    expect(root.replaces).toBe('');
    expect(JSON.parse(root.revisions)[0].path).toBe('sub/w.json');
  });

  it('is deterministic: the same event gives the same row, whatever the previous row', () => {
    const e = buildEvent('FileChanged', RUN, 3, at(3), { path: 'x', op: 'create', sha256: sha('f'), size: 1, observedAt: at(3) });
    const first = projection.evolve(undefined, e);
    expect(projection.evolve(first, e)).toEqual(first);
  });

  it('writes revisions as canonical JSON, whatever the paths hold, and as canonicalJson does for a malformed stored event', () => {
    const paths = ['a "quoted" \\ path', 'ünïcødé/文件.py', 'tab\tnew\nline', '\u2028\u007f\u0000', 'emoji 😀', 'lone \ud800 surrogate'];
    for (const [seq, path] of paths.entries()) {
      const row = projection.evolve(undefined, buildEvent('FileChanged', RUN, seq, at(seq), { path, op: 'create', sha256: sha('a'), size: seq * 1_000_003, observedAt: at(seq) }));
      expect(row.revisions).toBe(canonicalJson(JSON.parse(row.revisions)));
    }
    // Every value of a FileChanged as the generic walk writes it: each op, hashes and sizes at their edges.
    const cases: Array<[string, string | undefined, number | undefined]> = [['create', sha('0'), 0], ['modify', sha('9'), -0], ['modify', sha('a'), 1e21], ['delete', undefined, undefined], ['create', undefined, 7]];
    for (const [seq, [op, sha256, size]] of cases.entries()) {
      const data = { path: `p"${seq}\\`, op, sha256, size, observedAt: at(seq) } as Extract<A2rlEvent, { type: 'FileChanged' }>['data'];
      const removed = op === 'delete';
      const expected = canonicalJson([{ op, path: data.path, sha256: removed ? null : sha256 ?? null, size: removed ? null : size ?? null }]);
      expect(projection.evolve(undefined, buildEvent('FileChanged', RUN, seq, at(seq), data)).revisions).toBe(expected);
    }
    // Read back from storage, a payload is not validated again: a size stored as text, a manifest entry without a size.
    const oddSize = { type: 'FileChanged', runId: RUN, seq: 2, occurredAt: at(2), data: { path: 'code/x', op: 'modify', sha256: sha('b'), size: '12' } } as unknown as A2rlEvent;
    expect(projection.evolve(undefined, oddSize).revisions).toBe(`[{"op":"modify","path":"code/x","sha256":"${sha('b')}","size":"12"}]`);
    const stored = { type: 'WorkspacePrepared', runId: RUN, seq: 1, data: { dataManifest: [{ path: 'data/x', sha256: sha('c') }] } } as unknown as A2rlEvent;
    expect(projection.evolve(undefined, stored).revisions).toBe(`[{"op":"provided","path":"data/x","sha256":"${sha('c')}"}]`);
  });
});
