import type { A2rlEvent, EventData } from '../../modules/ledger/events/catalog.js';
import type { Evidence } from './analysis.types.js';
import { integrityOk } from '../derived-facts.js';

// What a run's WorkspaceIntegrityChecked facts say about its read-only world (data/ and models/),
// folded for the report and for `a2rl verify` / `verify-bundle`, which must agree. Pure: no clock.
// Not part of the stored run analysis: both readers derive it from the events when asked.

type Difference = EventData<'WorkspaceIntegrityChecked'>['differences'][number];

/** How a path differs: content changed, file gone, file added, or something else in a file's place. */
export type IntegrityChange = 'changed' | 'missing' | 'added' | 'replaced';

export interface ModifiedPath {
  path: string;
  change: IntegrityChange;
  expected: string | null;
  actual: string | null;
  /** What stands at the path when it is not a readable regular file (symlink, directory, other, unreadable). */
  found: string | null;
  /** The checks that listed it. */
  evidence: Evidence;
}

export interface IntegrityCheckSummary {
  seq: number;
  phase: 'grading' | 'end' | 'resume';
  submissionId: string | null;
  /** Every file re-hashed (true), or stat-compared with a baseline (false). */
  full: boolean;
  ok: boolean;
  checked: number;
  /** Differences listed plus those only counted. */
  differences: number;
}

export interface WorkspaceIntegrity {
  /** No check found a difference. */
  ok: boolean;
  /** Whether the end-of-run check was recorded (stat-compared for a sandboxed agent, `full` otherwise). */
  endChecked: boolean;
  checks: IntegrityCheckSummary[];
  /** Every path a check listed, with the latest check's finding, sorted by path. */
  modified: ModifiedPath[];
  /** Differences the checks counted but did not list (the most one check left out). */
  unlisted: number;
  evidence: Evidence;
}

export function changeOf(d: Pick<Difference, 'expected' | 'actual' | 'found'>): IntegrityChange {
  if (d.expected === null) return 'added';
  if (d.found) return 'replaced';
  return d.actual === null ? 'missing' : 'changed';
}

/** How a path differs, in words: `changed`, `missing`, `added`, `added symlink`, `symlink instead of a file`, `unreadable`. */
export function changePhrase(m: Pick<ModifiedPath, 'change' | 'found'>): string {
  if (m.change === 'replaced') return m.found === 'unreadable' ? 'unreadable' : `${m.found} instead of a file`;
  if (m.change === 'added' && m.found) return `added ${m.found}`;
  return m.change;
}

/** One path as a short phrase: `data/x (changed)`, `data/y (symlink instead of a file)`. */
export function describeModified(m: Pick<ModifiedPath, 'path' | 'change' | 'found'>): string {
  return `${m.path} (${changePhrase(m)})`;
}

/** The run's integrity checks folded, or null when none was recorded (runs before the checks existed). */
export function workspaceIntegrity(events: readonly A2rlEvent[]): WorkspaceIntegrity | null {
  const checks: IntegrityCheckSummary[] = [];
  const byPath = new Map<string, ModifiedPath>();
  let unlisted = 0;
  for (const e of events) {
    if (e.type !== 'WorkspaceIntegrityChecked') continue;
    const d = e.data;
    const more = d.moreDifferences ?? 0;
    // A check that lists or counts a difference failed, whatever its `ok` says.
    checks.push({ seq: e.seq, phase: d.phase, submissionId: d.submissionId ?? null, full: d.full, ok: integrityOk(d) && d.differences.length === 0 && more === 0, checked: d.checked, differences: d.differences.length + more });
    unlisted = Math.max(unlisted, more);
    for (const diff of d.differences) {
      const seen = byPath.get(diff.path)?.evidence ?? [];
      byPath.set(diff.path, { path: diff.path, change: changeOf(diff), expected: diff.expected, actual: diff.actual, found: diff.found ?? null, evidence: [...seen, e.seq] });
    }
  }
  if (!checks.length) return null;
  return {
    ok: checks.every((c) => c.ok),
    endChecked: checks.some((c) => c.phase === 'end'),
    checks,
    modified: [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)),
    unlisted,
    evidence: checks.map((c) => c.seq),
  };
}
