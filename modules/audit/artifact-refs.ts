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
 * read from a field named `sha256`, but for LlmCallRecorded's `pieces` (REFS_BESIDES_SHA256): the
 * fast check of the record (record-scan.ts) relies on that to skip parsing an event all of whose
 * `sha256` fields it has seen. Not every `sha256` field names a blob: a model-call body's pieces
 * record the hash of the body they rebuild, a chunked home file the hash of its list of pieces, an
 * executed file its hash when its content was not kept; an event with such a hash is parsed, which
 * errs on the safe side, but for a ProcessStarted that stores no content (no `key`) and whose other
 * hashes are executed files' unkept ones seen before (ArtifactRefs.unkept): most shell commands.
 *
 * Hashes that name no blob at all: FileChanged.previousSha256 (the content an earlier event
 * referenced, or one the baseline never stored), IntegrityDifference's expected and actual,
 * TreeHeadSigned.rootHash and TokenCreated.sha256 (the access stream's token hashes).
 */
export const REF_TYPES: ReadonlySet<A2rlEvent['type']> = new Set<A2rlEvent['type']>([
  'WorkspacePrepared', 'FileChanged', 'TransientFileRecorded', 'ProcessStarted', 'SubmissionReceived', 'AgentOutput', 'SubmissionGraded', 'RolloutBatchRecorded',
  'LlmCallRecorded', 'AgentHomeArchived',
]);

/** Types that name blobs outside `sha256` fields (LlmCallRecorded's `pieces`): the fast check parses them wherever they are. */
export const REFS_BESIDES_SHA256: ReadonlySet<A2rlEvent['type']> = new Set<A2rlEvent['type']>(['LlmCallRecorded']);

type Blob = EventData<'AgentOutput'>['chunk'];
type ExecutedFile = NonNullable<EventData<'ProcessStarted'>['exe']>;
type BodyPieces = NonNullable<EventData<'LlmCallRecorded'>['requestPieces']>;

/** artifactRefs folded one event at a time: one entry per distinct sha256, never the events. */
export class ArtifactRefs {
  private readonly refs = new Map<string, ArtifactRef>();
  /** Hashes of executed files recorded without their content (not kept): no blob to check. */
  readonly unkept = new Set<string>();

  add(e: A2rlEvent): void {
    const seq = e.seq;
    switch (e.type) {
      case 'WorkspacePrepared':
        for (const f of e.data.dataManifest) this.use({ sha256: f.sha256, size: f.size, seq, role: `workspace file ${f.path}` });
        break;
      case 'FileChanged':
        if (e.data.sha256) this.use({ sha256: e.data.sha256, size: e.data.size, key: e.data.key, seq, role: `content of ${e.data.path}` });
        break;
      case 'TransientFileRecorded':
        // Content only where it could be read and stored (a key); otherwise the fact has none.
        if (e.data.sha256 && e.data.key) this.use({ sha256: e.data.sha256, size: e.data.size, key: e.data.key, seq, role: `content of transient file ${e.data.path}` });
        break;
      case 'ProcessStarted':
        if (e.data.exe) this.executed(e.data.exe, seq, `executable ${e.data.exe.path} of process ${e.data.pid}`);
        if (e.data.script) this.executed(e.data.script, seq, `script ${e.data.script.path} of process ${e.data.pid}`);
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
      case 'LlmCallRecorded':
        this.modelCall(e.data, seq);
        break;
      case 'AgentHomeArchived':
        for (const f of e.data.files) this.use({ sha256: f.sha256, size: f.size, seq, role: `agent home file ${f.path}` });
        // A chunked file's own sha256 hashes its list of pieces (agent-home.ts chunkListHash): only the pieces are blobs.
        for (const f of e.data.chunked ?? []) {
          for (const [i, c] of f.chunks.entries()) this.use({ sha256: c.sha256, size: c.size, seq, role: `piece ${i + 1} of agent home file ${f.path}` });
        }
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

  /** How many blobs are known (list() has them in the order they were met). */
  get size(): number {
    return this.refs.size;
  }

  private use(ref: ArtifactRef): void {
    if (!this.refs.has(ref.sha256)) this.refs.set(ref.sha256, ref);
  }

  /** An executed file's content is a blob where it was kept (a key); a large system file is hashed only. */
  private executed(f: ExecutedFile, seq: number, role: string): void {
    if (!f.sha256) return;
    if (f.key) this.use({ sha256: f.sha256, size: f.size, key: f.key, seq, role });
    else this.unkept.add(f.sha256);
  }

  /** A model call's bodies: whole blobs, or pieces (the manifest and the pieces its own segments name; the parent call's are its parent's). */
  private modelCall(d: EventData<'LlmCallRecorded'>, seq: number): void {
    const call = `model call ${d.callId}`;
    if (d.request) this.use({ ...blob(d.request), seq, role: `request body of ${call}` });
    if (d.response) this.use({ ...blob(d.response), seq, role: `response body of ${call}` });
    const pieces = (body: BodyPieces | undefined, which: string) => {
      if (!body) return;
      this.use({ ...blob(body.manifest), seq, role: `${which} body manifest of ${call}` });
      for (const piece of body.pieces) this.use({ sha256: piece, seq, role: `${which} body piece of ${call}` });
    };
    pieces(d.requestPieces, 'request');
    pieces(d.responsePieces, 'response');
  }

  /** Adds the refs of a later part of the same run (read in parallel, joined in seq order): the first reference wins. */
  merge(refs: readonly ArtifactRef[]): void {
    for (const ref of refs) this.use(ref);
  }
}

const blob = (ref: Blob) => ({ sha256: ref.sha256, size: ref.size, key: ref.key });
