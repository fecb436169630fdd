import type { A2rlEvent, EventData } from '../ledger/events/catalog.js';

export interface ArtifactRef {
  sha256: string;
  size?: number;
  /** The key the event names, when it names one. */
  key?: string;
  /** First event referencing it, and what it is there. */
  seq: number;
  role: string;
}

/** Every blob the run's events reference, once per sha256 (the first reference wins). */
export function artifactRefs(events: readonly A2rlEvent[]): ArtifactRef[] {
  const refs = new ArtifactRefs();
  for (const e of events) refs.add(e);
  return refs.list();
}

/**
 * The types whose events may reference a blob (the cases of ArtifactRefs.add). Every reference is
 * read from a field named `sha256`: the fast check of the record (record-scan.ts) relies on that to
 * skip parsing an event all of whose `sha256` fields it has seen.
 */
export const REF_TYPES: ReadonlySet<A2rlEvent['type']> = new Set<A2rlEvent['type']>(['WorkspacePrepared', 'FileChanged', 'SubmissionReceived', 'AgentOutput', 'SubmissionGraded', 'RolloutBatchRecorded']);

/** artifactRefs folded one event at a time: one entry per distinct sha256, never the events. */
export class ArtifactRefs {
  private readonly refs = new Map<string, ArtifactRef>();

  add(e: A2rlEvent): void {
    const seq = e.seq;
    switch (e.type) {
      case 'WorkspacePrepared':
        for (const f of e.data.dataManifest) this.use({ sha256: f.sha256, size: f.size, seq, role: `workspace file ${f.path}` });
        break;
      case 'FileChanged':
        if (e.data.sha256) this.use({ sha256: e.data.sha256, size: e.data.size, key: e.data.key, seq, role: `content of ${e.data.path}` });
        break;
      case 'SubmissionReceived':
        for (const f of e.data.manifest) this.use({ sha256: f.sha256, size: f.size, seq, role: `checkpoint file ${f.path} of submission ${e.data.submissionId}` });
        if (e.data.checkpoint) this.use({ ...blob(e.data.checkpoint), seq, role: `checkpoint manifest of submission ${e.data.submissionId}` });
        break;
      case 'AgentOutput':
        if (this.refs.has(e.data.chunk.sha256)) break; // most of a long run: seen already
        this.use({ ...blob(e.data.chunk), seq, role: `agent ${e.data.stream} chunk` });
        break;
      case 'SubmissionGraded':
        if (e.data.items) this.use({ ...blob(e.data.items), seq, role: `graded items of submission ${e.data.submissionId}` });
        break;
      case 'RolloutBatchRecorded':
        if (e.data.trajectories) this.use({ ...blob(e.data.trajectories), seq, role: `trajectories of ${e.data.env}` });
        break;
      default:
        break;
    }
  }

  /** Whether a reference to this sha256 is known already. */
  has(sha256: string): boolean {
    return this.refs.has(sha256);
  }

  list(): ArtifactRef[] {
    return [...this.refs.values()];
  }

  private use(ref: ArtifactRef): void {
    if (!this.refs.has(ref.sha256)) this.refs.set(ref.sha256, ref);
  }

  /** Adds the refs of a later part of the same run (read in parallel, joined in seq order): the first reference wins. */
  merge(refs: readonly ArtifactRef[]): void {
    for (const ref of refs) this.use(ref);
  }
}

const blob = (ref: EventData<'AgentOutput'>['chunk']) => ({ sha256: ref.sha256, size: ref.size, key: ref.key });
