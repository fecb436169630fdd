import { describe, expect, it } from '@jest/globals';
import { buildEvent } from '../ledger/events/envelope.js';
import { renderTimeline } from './format.js';
import { timelineOf } from './timeline.js';
import { at } from '../../test/testing/helpers.js';

const RUN = 'r-1';
const WS = '/home/u/.a2rl/workspaces/r-1';

const events = [
  buildEvent('RunScheduled', RUN, 0, at(0), { task: 'ref-arith', agent: 'reference', baseModel: 'tiny', budgetSeconds: 60, seed: 7, mode: 'free' }),
  buildEvent('WorkspacePrepared', RUN, 1, at(1), { workspace: `${WS}/`, sandbox: 'bwrap', mounts: [], dataManifest: [{ path: 'data/a', sha256: 'a'.repeat(64), size: 2048 }] }),
  buildEvent('ProcessStarted', RUN, 2, at(2), { pid: 12, ppid: 1, argv: ['node', `${WS}/code/train.mjs`, '--out', `${WS}/output/x`, ...Array(40).fill('--flag')], cwd: WS, observedAt: at(2) }),
  buildEvent('FileChanged', RUN, 3, at(3), { path: 'code/train.mjs', op: 'modify', sha256: 'b'.repeat(64), size: 10, observedAt: at(3) }),
  buildEvent('SubmissionGraded', RUN, 4, at(4), { submissionId: 'sub-2', score: 83.5, improvement: -1.25 }),
  buildEvent('SubmissionGraded', RUN, 5, at(5), { submissionId: 'sub-3', score: 83.5, improvement: 2, details: { duplicateOf: 'sub-2' } }),
  buildEvent('ProcessExited', RUN, 6, at(6), { pid: 12, signal: 'SIGKILL', durationMs: 1500, observedAt: at(6) }),
  buildEvent('RunCompleted', RUN, 7, at(7), { submissions: 3, best: 83.5 }),
];

describe('timelineOf', () => {
  const entries = timelineOf(events);

  it('gives one entry per event, in order, with seq, time and type', () => {
    expect(entries.map((e) => [e.seq, e.occurredAt, e.type])).toEqual(events.map((e) => [e.seq, e.occurredAt, e.type]));
  });

  it('summarises each event type on one line', () => {
    expect(entries.map((e) => e.summary)).toEqual([
      'ref-arith by reference, base tiny, budget 60s, seed 7, mode free',
      'sandbox bwrap, 1 files provided (2.0 KiB)',
      expect.stringMatching(/^pid 12 training: node code\/train\.mjs --out output\/x --flag --flag .*…$/),
      'modify code/train.mjs (10 B)',
      'sub-2 score 83.5 (−1.25)',
      'sub-3 score 83.5 (+2), same content as sub-2',
      'pid 12 signal SIGKILL after 1.50 s',
      '3 submissions, best 83.5',
    ]);
    expect(entries[2].summary).toHaveLength(100);
  });

  it('renders an aligned table with a header', () => {
    const lines = renderTimeline(entries).trimEnd().split('\n');
    expect(lines).toHaveLength(events.length + 1);
    expect(lines[0]).toMatch(/^SEQ {2}TIME {22}TYPE {15}SUMMARY$/);
    expect(lines[4]).toBe(`3    ${at(3)}  FileChanged        modify code/train.mjs (10 B)`);
  });

  it('shows a file change as its size change, from the sizes the ledger recorded (no blobs are read)', () => {
    const file = (seq: number, path: string, op: 'create' | 'modify' | 'delete', size?: number) =>
      buildEvent('FileChanged', RUN, seq, at(seq), { path, op, ...(size === undefined ? {} : { sha256: String(seq).repeat(64).slice(0, 64), size }), observedAt: at(seq) });
    const summaries = timelineOf([
      buildEvent('WorkspacePrepared', RUN, 0, at(0), { workspace: WS, sandbox: 'none', mounts: [], dataManifest: [{ path: 'data/a', sha256: 'a'.repeat(64), size: 2048 }] }),
      file(1, 'code/a.py', 'create', 10),
      file(2, 'code/a.py', 'modify', 3000),
      file(3, 'code/a.py', 'modify', 100),
      file(4, 'code/a.py', 'delete'),
      file(5, 'data/a', 'modify', 2048),
      file(6, 'code/gone.py', 'delete'),
    ]).map((e) => e.summary);
    expect(summaries.slice(1)).toEqual([
      'create code/a.py (10 B)',
      'modify code/a.py (2.9 KiB, +2.9 KiB)',
      'modify code/a.py (100 B, −2.8 KiB)',
      'delete code/a.py (−100 B)',
      'modify data/a (2.0 KiB, +0 B)',
      'delete code/gone.py',
    ]);
  });
});
