import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/** How one path changed: its new content (sha256 and size), or null for both when it was removed. */
export interface PathRevision {
  path: string;
  /** `create`/`modify`/`delete` as FileChanged recorded it; `provided` for data and base-model files
   *  of WorkspacePrepared; `archived` for checkpoint files of SubmissionReceived. */
  op: 'create' | 'modify' | 'delete' | 'provided' | 'archived';
  sha256: string | null;
  size: number | null;
}

/**
 * One row per event that changed the run's workspace files (FileChanged, WorkspacePrepared,
 * SubmissionReceived), keyed `<runId>/<seq>`. The workspace after seq S is the fold, in seq order,
 * of the run's rows with seq <= S: one indexed range read, see modules/replay/workspace-state.ts.
 */
@Entity({ name: 'workspace_revisions' })
@Index('ix_workspace_revisions_run_seq', ['runId', 'lastSeq'])
export class WorkspaceRevisionRow {
  @PrimaryColumn({ type: 'varchar', length: 160 })
  id: string;

  @Column({ name: 'run_id', type: 'varchar', length: 128 })
  runId: string;

  /** The event's seq (the runner's `lastSeq`: each row is written by exactly one event). */
  @Column({ name: 'seq', type: 'integer' })
  lastSeq: number;

  @Column({ name: 'occurred_at', type: 'varchar', length: 40 })
  occurredAt: string;

  @Column({ name: 'event_type', type: 'varchar', length: 32 })
  eventType: string;

  /** A submitted checkpoint directory ('' for the workspace root): everything under it is replaced
   *  by `revisions`, since the archive saw exactly those files there. Null for other events. */
  @Column({ type: 'text', nullable: true })
  replaces: string | null;

  /** Canonical JSON of PathRevision[], in the event's order. */
  @Column({ type: 'text' })
  revisions: string;
}
