import type { A2rlEvent } from '../../modules/ledger/events/catalog.js';
import { canonicalJson } from '../../modules/ledger/events/canonical-json.js';
import { defineProjection } from '../projection.js';
import { WorkspaceRevisionRow, type PathRevision } from './workspace-revision.entity.js';

/**
 * The workspace-revision index behind `a2rl replay`: every file state change of a run's workspace
 * as one row per event. Which files the workspace holds after a seq is then a range read of the
 * run's rows (index on run_id, seq) folded in memory — linear in the file-changing events up to
 * that seq, not in all events, and with no per-path snapshot to keep consistent.
 *
 * Sources: FileChanged (the watched tree: code/ and anything else the agent writes outside data/,
 * models/ and output/), WorkspacePrepared.dataManifest (data/ and models/<base>/, given to the agent)
 * and SubmissionReceived (the checkpoint directory as archived: output/ is not watched, so a
 * submission is the only record of what the agent wrote there).
 */
export const workspaceRevisionsProjection = defineProjection<WorkspaceRevisionRow>({
  name: 'workspace-revisions',
  version: 1,
  entity: WorkspaceRevisionRow,
  keyOf: (event) => (REVISION_EVENTS.has(event.type) ? revisionKey(event.runId, event.seq) : null),
  evolve(_row, event) {
    // FileChanged, nearly every row of a rebuild, is written straight to its JSON: no revision
    // objects to build and collect (same text as revisionsJson of its one revision).
    const found = event.type === 'FileChanged' ? null : revisionsOf(event)!;
    return {
      id: revisionKey(event.runId, event.seq),
      runId: event.runId,
      lastSeq: event.seq,
      occurredAt: event.occurredAt,
      eventType: event.type,
      replaces: found ? found.replaces : null,
      revisions: found ? revisionsJson(found.revisions) : fileChangedJson(event as Extract<A2rlEvent, { type: 'FileChanged' }>),
    };
  },
});

export function revisionKey(runId: string, seq: number): string {
  return `${runId}/${seq}`;
}

/** The event types whose revisionsOf is not null: keyOf need not build the revisions to know. */
const REVISION_EVENTS = new Set<string>(['FileChanged', 'WorkspacePrepared', 'SubmissionReceived']);

/**
 * canonicalJson(revisions), written out for the one shape it takes: keys in canonical order, each
 * value by JSON.stringify as canonicalize does. A rebuild writes one per file-changing event, and
 * the generic walk (sorting every object's keys) was most of this projection's cost. A value of
 * another type (an event stored malformed) goes to canonicalJson, which decides as it always did.
 */
function revisionsJson(revisions: PathRevision[]): string {
  let out = '[';
  for (let i = 0; i < revisions.length; i++) {
    const { op, path, sha256, size } = revisions[i];
    const plain = typeof op === 'string' && typeof path === 'string' && (sha256 === null || typeof sha256 === 'string') && (size === null || Number.isFinite(size));
    if (!plain) return canonicalJson(revisions);
    out += `${i ? ',' : ''}{"op":${JSON.stringify(op)},"path":${JSON.stringify(path)},"sha256":${JSON.stringify(sha256)},"size":${JSON.stringify(size)}}`;
  }
  return `${out}]`;
}

/** revisionsJson(revisionsOf(event).revisions) of a FileChanged, written out. */
function fileChangedJson(event: Extract<A2rlEvent, { type: 'FileChanged' }>): string {
  const { path, op, sha256, size } = fileRevision(event.data);
  if (typeof op !== 'string' || typeof path !== 'string' || (sha256 !== null && typeof sha256 !== 'string') || (size !== null && !Number.isFinite(size))) {
    return revisionsJson([{ path, op, sha256, size }]);
  }
  // A finite number or null reads the same as its JSON.
  return `[{"op":${JSON.stringify(op)},"path":${JSON.stringify(path)},"sha256":${sha256 === null ? 'null' : JSON.stringify(sha256)},"size":${size}}]`;
}

/** The one revision a FileChanged records: a deleted file has no hash or size. */
function fileRevision(data: Extract<A2rlEvent, { type: 'FileChanged' }>['data']): PathRevision {
  const { path, op, sha256, size } = data;
  const removed = op === 'delete';
  return { path, op, sha256: removed ? null : sha256 ?? null, size: removed ? null : size ?? null };
}

/** The file revisions an event records, or null when it changes no workspace file. */
export function revisionsOf(event: A2rlEvent): { replaces: string | null; revisions: PathRevision[] } | null {
  switch (event.type) {
    case 'FileChanged':
      return { replaces: null, revisions: [fileRevision(event.data)] };
    case 'WorkspacePrepared':
      return {
        replaces: null,
        revisions: event.data.dataManifest.map((f) => ({ path: f.path, op: 'provided', sha256: f.sha256, size: f.size })),
      };
    case 'SubmissionReceived': {
      // modelPath is workspace-relative ('.' for the root); manifest paths are relative to it.
      const dir = event.data.modelPath === '.' ? '' : event.data.modelPath;
      return {
        replaces: dir,
        revisions: event.data.manifest.map((f) => ({ path: dir ? `${dir}/${f.path}` : f.path, op: 'archived', sha256: f.sha256, size: f.size })),
      };
    }
    default:
      return null;
  }
}
