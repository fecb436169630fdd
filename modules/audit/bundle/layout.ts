import type { A2rlEvent, EventData } from '../../ledger/events/catalog.js';
import { artifactKey } from '../../artifacts/artifact-store.port.js';

/**
 * The audit bundle's layout (docs/audit-bundle.md). Every file but the blobs is canonical JSON or text
 * derived from events.ndjson, so a verifier re-derives each one and compares bytes.
 */
export const BUNDLE_FORMAT = 'a2rl.audit-bundle/3';
/**
 * Bundles exported before they carried every blob the events reference: their manifest holds no
 * whole model-call bodies and no `exec`, `transient` or `home` blobs (ManifestFold), and is checked as such.
 */
export const BUNDLE_FORMAT_V2 = 'a2rl.audit-bundle/2';
/**
 * Bundles exported before the descriptor named its report renderer: still read and verified, but
 * their reports are not re-rendered (their renderer version is unknown).
 */
export const BUNDLE_FORMAT_V1 = 'a2rl.audit-bundle/1';
export const HEADS_FORMAT = 'a2rl.tree-heads/1';

export const EVENTS_FILE = 'events.ndjson';
export const HEADS_FILE = 'heads.json';
export const KEY_FILE = 'public-key.pem';
export const DESCRIPTOR_FILE = 'bundle.json';
export const MANIFEST_FILE = 'artifacts/manifest.json';
export const REPORT_FILES = { md: 'reports/report.md', html: 'reports/report.html', json: 'reports/report.json' } as const;
export const FIXED_FILES = [DESCRIPTOR_FILE, EVENTS_FILE, HEADS_FILE, KEY_FILE, MANIFEST_FILE, ...Object.values(REPORT_FILES)];

export const blobPath = (sha256: string): string => `artifacts/${artifactKey(sha256)}`;

/**
 * What the bundle is; not signed: every field only steers checks (runId, withCheckpoints and level are
 * cross-checked against the events; renderer decides whether the reports are re-rendered, and a
 * bundle whose reports are not is said to be so).
 */
export interface BundleDescriptor {
  format: typeof BUNDLE_FORMAT;
  runId: string;
  /** Whether checkpoint files (SubmissionReceived manifests' files) are included. */
  withCheckpoints: boolean;
  /** The task's level given to the report renderer (the task pack is not in the bundle). */
  level: number | null;
  /** The report renderer that rendered reports/: REPORT_RENDERER (modules/reports/render.ts) of the exporting a2rl. */
  renderer: string;
}

/** A descriptor as read: a format-1 bundle names no renderer (null). */
export type ReadDescriptor = Omit<BundleDescriptor, 'format' | 'renderer'> & { format: BundleFormat; renderer: string | null };

export type BundleFormat = typeof BUNDLE_FORMAT | typeof BUNDLE_FORMAT_V2 | typeof BUNDLE_FORMAT_V1;

/** A renderer version as bundle.json may carry it: printable ASCII, no spaces or quotes, at most 64 characters. */
export const RENDERER_VERSION = /^[A-Za-z0-9._/:+-]{1,64}$/;

/**
 * Why an event references a blob: `data` (WorkspacePrepared.dataManifest), `file` (FileChanged),
 * `output` (AgentOutput.chunk), `trajectories` (RolloutBatchRecorded), `checkpoint-manifest`
 * (SubmissionReceived.checkpoint), `checkpoint` (a file of SubmissionReceived.manifest),
 * `graded-items` (SubmissionGraded.items), `llm-body` (a model call's body: a whole request or
 * response, or a body stored as pieces: LlmCallRecorded.requestPieces/responsePieces, their manifest
 * and the pieces it names), `exec` (the content of a file a process ran, ProcessStarted.exe/script,
 * where it was kept), `transient` (TransientFileRecorded's content, where it was stored) and `home`
 * (AgentHomeArchived: a file of the agent's home, or a piece of a chunked one). Whole model-call
 * bodies, `exec`, `transient` and `home` are carried since format 3.
 */
export type BlobKind = 'data' | 'file' | 'output' | 'trajectories' | 'checkpoint-manifest' | 'checkpoint' | 'graded-items' | 'llm-body' | 'exec' | 'transient' | 'home';

export interface ManifestItem {
  sha256: string;
  size: number;
  /** Kind of the first reference (lowest seq). */
  kind: BlobKind;
  /** Every seq referencing the blob, ascending. */
  seqs: number[];
  /** True when the blob is left out: only checkpoint files are, and only without --with-checkpoints. */
  omitted: boolean;
}

/** Blobs the events reference, as the manifest of a bundle of `format` lists them (sorted by sha256); `size` null when no event declares it. */
export function expectedManifest(events: readonly A2rlEvent[], withCheckpoints: boolean, format: BundleFormat = BUNDLE_FORMAT): ExpectedManifestItem[] {
  const manifest = new ManifestFold(format);
  for (const event of [...events].sort((a, b) => a.seq - b.seq)) manifest.add(event);
  return manifest.items(withCheckpoints);
}

export type ExpectedManifestItem = Omit<ManifestItem, 'size'> & { size: number | null };

/**
 * expectedManifest folded one event at a time, in seq order: one entry per blob, never the events.
 * The blobs are those ArtifactRefs (artifact-refs.ts) has `a2rl verify` check, but for a FileChanged
 * without a key (its content was never stored); a bundle of format 1 or 2 lists only format 2's.
 */
export class ManifestFold {
  private readonly found = new Map<string, { size: number | null; kind: BlobKind; seqs: number[]; checkpointOnly: boolean }>();
  private readonly everyBlob: boolean;

  constructor(format: BundleFormat = BUNDLE_FORMAT) {
    this.everyBlob = format === BUNDLE_FORMAT;
  }

  add(event: A2rlEvent): void {
    switch (event.type) {
      case 'WorkspacePrepared':
        for (const f of event.data.dataManifest) this.use(f.sha256, f.size, 'data', event.seq);
        break;
      case 'FileChanged':
        // Only archived contents: a file that changed again before it could be stored has no key.
        if (event.data.op !== 'delete' && event.data.sha256 && event.data.key) this.use(event.data.sha256, event.data.size, 'file', event.seq);
        break;
      case 'AgentOutput':
        this.use(event.data.chunk.sha256, event.data.chunk.size, 'output', event.seq);
        break;
      case 'RolloutBatchRecorded':
        if (event.data.trajectories) this.use(event.data.trajectories.sha256, event.data.trajectories.size, 'trajectories', event.seq);
        break;
      case 'SubmissionReceived':
        if (event.data.checkpoint) this.use(event.data.checkpoint.sha256, event.data.checkpoint.size, 'checkpoint-manifest', event.seq);
        for (const f of event.data.manifest) this.use(f.sha256, f.size, 'checkpoint', event.seq);
        break;
      case 'SubmissionGraded':
        if (event.data.items) this.use(event.data.items.sha256, event.data.items.size, 'graded-items', event.seq);
        break;
      case 'LlmCallRecorded':
        this.modelCall(event.data, event.seq);
        break;
      default:
        if (this.everyBlob) this.sinceFormat3(event);
        break;
    }
  }

  items(withCheckpoints: boolean): ExpectedManifestItem[] {
    return [...this.found.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([sha256, { size, kind, seqs, checkpointOnly }]) => ({ sha256, size, kind, seqs, omitted: checkpointOnly && !withCheckpoints }));
  }

  /** A model call's bodies: whole ones since format 3; stored as pieces, the manifest and the pieces it names. */
  private modelCall(data: EventData<'LlmCallRecorded'>, seq: number): void {
    if (this.everyBlob) {
      for (const body of [data.request, data.response]) if (body) this.use(body.sha256, body.size, 'llm-body', seq);
    }
    for (const body of [data.requestPieces, data.responsePieces]) {
      if (!body) continue;
      this.use(body.manifest.sha256, body.manifest.size, 'llm-body', seq);
      for (const piece of body.pieces) this.use(piece, undefined, 'llm-body', seq);
    }
  }

  /** The blobs format 3 added: executed files' kept contents, transient files' stored ones, the agent's home. */
  private sinceFormat3(event: A2rlEvent): void {
    switch (event.type) {
      case 'ProcessStarted':
        for (const f of [event.data.exe, event.data.script]) if (f?.sha256 && f.key) this.use(f.sha256, f.size, 'exec', event.seq);
        break;
      case 'TransientFileRecorded':
        if (event.data.sha256 && event.data.key) this.use(event.data.sha256, event.data.size, 'transient', event.seq);
        break;
      case 'AgentHomeArchived':
        for (const f of event.data.files) this.use(f.sha256, f.size, 'home', event.seq);
        for (const f of event.data.chunked ?? []) for (const c of f.chunks) this.use(c.sha256, c.size, 'home', event.seq);
        break;
      default:
        break;
    }
  }

  private use(sha256: string, size: number | undefined, kind: BlobKind, seq: number): void {
    let item = this.found.get(sha256);
    if (!item) this.found.set(sha256, (item = { size: null, kind, seqs: [], checkpointOnly: true }));
    if (item.size === null && size !== undefined) item.size = size;
    if (item.seqs[item.seqs.length - 1] !== seq) item.seqs.push(seq);
    if (kind !== 'checkpoint') item.checkpointOnly = false;
  }
}
