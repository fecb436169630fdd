import type { A2rlEvent } from '../../ledger/events/catalog.js';
import { artifactKey } from '../../artifacts/artifact-store.port.js';

/**
 * The audit bundle's layout (docs/audit-bundle.md). Every file but the blobs is canonical JSON or text
 * derived from events.ndjson, so a verifier re-derives each one and compares bytes.
 */
export const BUNDLE_FORMAT = 'a2rl.audit-bundle/2';
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
export type ReadDescriptor = Omit<BundleDescriptor, 'format' | 'renderer'> & { format: typeof BUNDLE_FORMAT | typeof BUNDLE_FORMAT_V1; renderer: string | null };

/** A renderer version as bundle.json may carry it: printable ASCII, no spaces or quotes, at most 64 characters. */
export const RENDERER_VERSION = /^[A-Za-z0-9._/:+-]{1,64}$/;

/**
 * Why an event references a blob: `data` (WorkspacePrepared.dataManifest), `file` (FileChanged),
 * `output` (AgentOutput.chunk), `trajectories` (RolloutBatchRecorded), `checkpoint-manifest`
 * (SubmissionReceived.checkpoint), `checkpoint` (a file of SubmissionReceived.manifest),
 * `graded-items` (SubmissionGraded.items) and `llm-body` (a model call's body stored as pieces:
 * LlmCallRecorded.requestPieces/responsePieces, their manifest and the pieces it names).
 */
export type BlobKind = 'data' | 'file' | 'output' | 'trajectories' | 'checkpoint-manifest' | 'checkpoint' | 'graded-items' | 'llm-body';

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

/** Blobs the events reference, as the manifest lists them (sorted by sha256); `size` null when no event declares it. */
export function expectedManifest(events: readonly A2rlEvent[], withCheckpoints: boolean): ExpectedManifestItem[] {
  const manifest = new ManifestFold();
  for (const event of [...events].sort((a, b) => a.seq - b.seq)) manifest.add(event);
  return manifest.items(withCheckpoints);
}

export type ExpectedManifestItem = Omit<ManifestItem, 'size'> & { size: number | null };

/** expectedManifest folded one event at a time, in seq order: one entry per blob, never the events. */
export class ManifestFold {
  private readonly found = new Map<string, { size: number | null; kind: BlobKind; seqs: number[]; checkpointOnly: boolean }>();

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
        // Bodies stored as pieces only (a whole body was never carried): the manifest and the pieces it names.
        for (const body of [event.data.requestPieces, event.data.responsePieces]) {
          if (!body) continue;
          this.use(body.manifest.sha256, body.manifest.size, 'llm-body', event.seq);
          for (const piece of body.pieces) this.use(piece, undefined, 'llm-body', event.seq);
        }
        break;
      default:
        break;
    }
  }

  items(withCheckpoints: boolean): ExpectedManifestItem[] {
    return [...this.found.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([sha256, { size, kind, seqs, checkpointOnly }]) => ({ sha256, size, kind, seqs, omitted: checkpointOnly && !withCheckpoints }));
  }

  private use(sha256: string, size: number | undefined, kind: BlobKind, seq: number): void {
    let item = this.found.get(sha256);
    if (!item) this.found.set(sha256, (item = { size: null, kind, seqs: [], checkpointOnly: true }));
    if (item.size === null && size !== undefined) item.size = size;
    if (item.seqs[item.seqs.length - 1] !== seq) item.seqs.push(seq);
    if (kind !== 'checkpoint') item.checkpointOnly = false;
  }
}
