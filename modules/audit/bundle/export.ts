import { createPublicKey } from 'node:crypto';
import type { ArtifactStore } from '../../artifacts/artifact-store.port.js';
import type { A2rlEvent } from '../../ledger/events/catalog.js';
import { canonicalBytes } from '../../ledger/events/canonical-json.js';
import { streamName } from '../../ledger/events/ids.js';
import type { EventStore } from '../../ledger/event-store.port.js';
import { artifactBlobReader, type BlobReader } from '../../../projections/run-analysis/blob-reader.js';
import { buildHeads, checkHeads } from './heads.js';
import {
  blobPath, BUNDLE_FORMAT, DESCRIPTOR_FILE, EVENTS_FILE, expectedManifest, HEADS_FILE, KEY_FILE, MANIFEST_FILE, REPORT_FILES,
  type BundleDescriptor, type ManifestItem,
} from './layout.js';
import { renderBundleReports } from './reports.js';
import { writeTarGz, type TarFile } from './tar-io.js';

export interface ExportBundleOptions {
  runId: string;
  eventStore: EventStore;
  artifacts: ArtifactStore;
  /** The ledger's public signing key (SPKI PEM); only its public part is ever written. */
  publicKeyPem: string;
  /** Include checkpoint files (SubmissionReceived manifests' files); left out by default. */
  withCheckpoints?: boolean;
  /** The level of a task id, for the report (as `a2rl report` gives it); unknown tasks: null. */
  taskLevel?: (task: string) => number | null;
}

export interface ExportSummary {
  runId: string;
  events: number;
  heads: number;
  blobs: number;
  omittedBlobs: number;
}

/** The run cannot be exported as a bundle that verifies; the message says why. */
export class BundleExportError extends Error {
  override readonly name = 'BundleExportError';
}

/**
 * Writes a run's audit bundle (layout in layout.ts and docs/audit-bundle.md). Refuses a run whose chain
 * would not verify with `publicKeyPem` (no signed head, events after the last head, a head that does
 * not match) and any referenced blob the artifact store lacks: a bundle is complete or not written.
 * The same run and options give a byte-identical bundle.
 */
export async function exportBundle(opts: ExportBundleOptions, outFile: string): Promise<ExportSummary> {
  const { runId, artifacts } = opts;
  const events: A2rlEvent[] = [];
  // Lines are the stored bytes, exactly what the tree heads signed (older schema versions included).
  const lines: Buffer[] = [];
  for await (const recorded of opts.eventStore.readStream(streamName(runId))) {
    events.push(recorded.event);
    lines.push(recorded.bytes);
  }
  if (!events.length) throw new BundleExportError(`no run "${runId}" in the ledger`);

  const publicKeyPem = createPublicKey(opts.publicKeyPem).export({ type: 'spki', format: 'pem' }).toString();
  if (!events.some((e) => e.type === 'TreeHeadSigned')) {
    throw new BundleExportError(`run "${runId}" has no signed tree head, so a bundle of it could not be verified offline (runs sign heads as they record; it may predate signing)`);
  }
  // The store validated every event on append; what can still be wrong is the signing: check the
  // heads exactly as verify-bundle will (roots over the leaves, signatures, proofs) and coverage.
  const heads = canonicalBytes(buildHeads(runId, lines, events));
  const bad = checkHeads(runId, heads, lines, events, publicKeyPem).failures[0];
  if (bad) throw new BundleExportError(`run "${runId}" does not verify with this ledger's public key: ${bad.message.replace(`${HEADS_FILE}: `, '')} (run \`a2rl verify ${runId}\`)`);
  const gap = uncovered(events);
  if (gap) throw new BundleExportError(`run "${runId}" cannot be exported yet: ${gap}`);

  const withCheckpoints = opts.withCheckpoints ?? false;
  const manifest: ManifestItem[] = [];
  for (const item of expectedManifest(events, withCheckpoints)) {
    const stat = await artifacts.stat(item.sha256);
    if (!stat && !item.omitted) throw new BundleExportError(`${blobPath(item.sha256)} (referenced at seq ${item.seqs.join(', ')}) is missing from the artifact store`);
    if (stat && item.size !== null && stat.size !== item.size) {
      throw new BundleExportError(`${blobPath(item.sha256)} is ${stat.size} bytes in the artifact store, seq ${item.seqs[0]} says ${item.size}`);
    }
    manifest.push({ ...item, size: (stat?.size ?? item.size)! });
  }
  const included = new Set(manifest.filter((m) => !m.omitted).map((m) => m.sha256));
  const storeReader = artifactBlobReader(artifacts);
  const bundleBlobs: BlobReader = { read: (sha256) => (included.has(sha256) ? storeReader.read(sha256) : Promise.resolve(null)) };

  const task = events.find((e) => e.type === 'RunScheduled')?.data as { task: string } | undefined;
  const level = task && opts.taskLevel ? opts.taskLevel(task.task) : null;
  const reports = await renderBundleReports(events, bundleBlobs, level);
  const descriptor: BundleDescriptor = { format: BUNDLE_FORMAT, runId, withCheckpoints, level };
  const text = (path: string, body: Buffer | string): TarFile => {
    const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
    return { path, size: bytes.length, body: bytes };
  };
  const files: TarFile[] = [
    text(DESCRIPTOR_FILE, canonicalBytes(descriptor)),
    text(EVENTS_FILE, Buffer.concat(lines.flatMap((l) => [l, NEWLINE]))),
    text(HEADS_FILE, heads),
    text(KEY_FILE, publicKeyPem),
    text(MANIFEST_FILE, canonicalBytes(manifest)),
    text(REPORT_FILES.md, reports.md),
    text(REPORT_FILES.html, reports.html),
    text(REPORT_FILES.json, reports.json),
    ...manifest.filter((m) => !m.omitted).map((m) => ({ path: blobPath(m.sha256), size: m.size, body: { sha256: m.sha256, open: () => artifacts.get(m.sha256) } })),
  ];
  // A fixed, meaningful mtime: when the run was scheduled.
  await writeTarGz(outFile, files, new Date(events[0].occurredAt));
  return {
    runId,
    events: events.length,
    heads: events.filter((e) => e.type === 'TreeHeadSigned').length,
    blobs: included.size,
    omittedBlobs: manifest.length - included.size,
  };
}

const NEWLINE = Buffer.from('\n');

/** Why a run can't be exported yet: events after the last signed head, or a run not sealed by RunCompleted/RunInterrupted. */
function uncovered(events: readonly A2rlEvent[]): string | null {
  let covered = 0;
  let lastOther = -1;
  for (const e of events) {
    if (e.type === 'TreeHeadSigned') covered = Math.max(covered, e.data.treeSize);
    else lastOther = e.seq;
  }
  if (lastOther >= covered) return `events from seq ${covered} to ${lastOther} are not covered by a signed tree head yet`;
  const last = events.filter((e) => e.type !== 'TreeHeadSigned').at(-1);
  if (last && last.type !== 'RunCompleted' && last.type !== 'RunInterrupted') {
    return `the run is not sealed (its last event is ${last.type} at seq ${last.seq}, not RunCompleted or RunInterrupted)`;
  }
  return null;
}
