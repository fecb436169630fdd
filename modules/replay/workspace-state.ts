import type { DataSource } from 'typeorm';
import type { PathRevision } from '../../projections/workspace-revisions/workspace-revision.entity.js';
import { WorkspaceRevisionRow } from '../../projections/workspace-revisions/workspace-revision.entity.js';

/** A file of the workspace at some point: its content and the seq of the event that wrote it. */
export interface WorkspaceFile {
  path: string;
  /** Null only when the ledger recorded a write without its content (then it cannot be materialised). */
  sha256: string | null;
  size: number | null;
  seq: number;
}

/** The workspace's files by path. */
export type WorkspaceState = Map<string, WorkspaceFile>;

/** What one index row says: the fields the fold needs. */
export interface RevisionRecord {
  seq: number;
  replaces: string | null;
  revisions: PathRevision[];
}

/** Applies one event's revisions to `state` (in place). */
export function applyRevisions(state: WorkspaceState, record: RevisionRecord): void {
  if (record.replaces !== null) {
    const dir = record.replaces;
    for (const path of state.keys()) {
      if (dir === '' || path === dir || path.startsWith(`${dir}/`)) state.delete(path);
    }
  }
  for (const r of record.revisions) {
    if (r.op === 'delete') state.delete(r.path);
    else state.set(r.path, { path: r.path, sha256: r.sha256, size: r.size, seq: record.seq });
  }
}

/**
 * Reads the workspace-revision index (projections/workspace-revisions): one range read of a run's
 * rows in seq order, folded in memory. The caller keeps the index caught up.
 */
export class WorkspaceIndex {
  constructor(private readonly readModels: DataSource) {}

  /** The workspace right after each of `seqs` (one state per seq, in the order given). */
  async statesAt(runId: string, seqs: number[]): Promise<WorkspaceState[]> {
    const order = seqs.map((seq, i) => ({ seq, i })).sort((a, b) => a.seq - b.seq);
    const out: WorkspaceState[] = new Array(seqs.length);
    const state: WorkspaceState = new Map();
    let next = 0;
    const settle = (beforeSeq: number) => {
      for (; next < order.length && order[next].seq < beforeSeq; next++) out[order[next].i] = new Map(state);
    };
    for (const record of await this.records(runId, Math.max(...seqs))) {
      settle(record.seq);
      applyRevisions(state, record);
    }
    settle(Infinity);
    return out;
  }

  async stateAt(runId: string, seq: number): Promise<WorkspaceState> {
    return (await this.statesAt(runId, [seq]))[0];
  }

  private async records(runId: string, upTo: number): Promise<RevisionRecord[]> {
    const raws: Array<{ seq: number | string; replaces: string | null; revisions: string }> = await this.readModels
      .getRepository(WorkspaceRevisionRow)
      .createQueryBuilder('r')
      .select('r.lastSeq', 'seq')
      .addSelect('r.replaces', 'replaces')
      .addSelect('r.revisions', 'revisions')
      .where('r.runId = :runId', { runId })
      .andWhere('r.lastSeq <= :upTo', { upTo })
      .orderBy('r.lastSeq', 'ASC')
      .getRawMany();
    return raws.map((raw) => ({ seq: Number(raw.seq), replaces: raw.replaces, revisions: JSON.parse(raw.revisions) as PathRevision[] }));
  }
}
