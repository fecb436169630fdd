import { createHash, createPublicKey } from 'node:crypto';
import { Readable } from 'node:stream';
import type { ArtifactStore } from '../../artifacts/artifact-store.port.js';
import type { A2rlEvent } from '../../ledger/events/catalog.js';
import { canonicalBytes } from '../../ledger/events/canonical-json.js';
import { streamName } from '../../ledger/events/ids.js';
import type { EventStore } from '../../ledger/event-store.port.js';
import { artifactBlobReader, type BlobReader } from '../../../projections/blob-reader.js';
import { checkHeads, headsFromLeaves } from './heads.js';
import {
  blobPath, BUNDLE_FORMAT, DESCRIPTOR_FILE, EVENTS_FILE, HEADS_FILE, ManifestFold, KEY_FILE, MANIFEST_FILE, REPORT_FILES,
  type BundleDescriptor, type ManifestItem,
} from './layout.js';
import { LeafHashes, leafHash } from '../../ledger/merkle.js';
import { renderBundleReports, REPORT_RENDERER } from './reports.js';
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
 *
 * The stream is read three times rather than held: once to fold what the bundle's own files need
 * (leaf hashes, heads, manifest, the size and sha256 of events.ndjson: RunFold), once for the
 * reports (analyzeRun and the renderer take the run's events as one list: held while the reports
 * are rendered, without their bytes), and once to stream events.ndjson into the archive, checked
 * against the first read's size and sha256.
 */
export async function exportBundle(opts: ExportBundleOptions, outFile: string): Promise<ExportSummary> {
  const { runId, artifacts } = opts;
  const run = await foldRun(opts.eventStore, runId);
  if (!run.count) throw new BundleExportError(`no run "${runId}" in the ledger`);

  const publicKeyPem = createPublicKey(opts.publicKeyPem).export({ type: 'spki', format: 'pem' }).toString();
  if (!run.heads.length) {
    throw new BundleExportError(`run "${runId}" has no signed tree head, so a bundle of it could not be verified offline (runs sign heads as they record; it may predate signing)`);
  }
  // The store validated every event on append; what can still be wrong is the signing: check the
  // heads exactly as verify-bundle will (roots over the leaves, signatures, proofs) and coverage.
  const heads = canonicalBytes(headsFromLeaves(runId, run.leaves, run.heads));
  const bad = checkHeads(runId, heads, null, run.heads, publicKeyPem).failures[0];
  if (bad) throw new BundleExportError(`run "${runId}" does not verify with this ledger's public key: ${bad.message.replace(`${HEADS_FILE}: `, '')} (run \`a2rl verify ${runId}\`)`);
  const gap = uncovered(run);
  if (gap) throw new BundleExportError(`run "${runId}" cannot be exported yet: ${gap}`);

  const withCheckpoints = opts.withCheckpoints ?? false;
  const manifest: ManifestItem[] = [];
  for (const item of run.manifest.items(withCheckpoints)) {
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

  const level = run.task !== null && opts.taskLevel ? opts.taskLevel(run.task) : null;
  const reports = await renderBundleReports(await runEvents(opts.eventStore, runId), bundleBlobs, level);
  const descriptor: BundleDescriptor = { format: BUNDLE_FORMAT, runId, withCheckpoints, level, renderer: REPORT_RENDERER };
  const text = (path: string, body: Buffer | string): TarFile => {
    const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
    return { path, size: bytes.length, body: bytes };
  };
  const files: TarFile[] = [
    text(DESCRIPTOR_FILE, canonicalBytes(descriptor)),
    { path: EVENTS_FILE, size: run.ndjsonBytes, body: { sha256: run.ndjsonSha256, source: 'the ledger', open: async () => Readable.from(ndjsonLines(opts.eventStore, runId, run.count)) } },
    text(HEADS_FILE, heads),
    text(KEY_FILE, publicKeyPem),
    text(MANIFEST_FILE, canonicalBytes(manifest)),
    text(REPORT_FILES.md, reports.md),
    text(REPORT_FILES.html, reports.html),
    text(REPORT_FILES.json, reports.json),
    ...manifest.filter((m) => !m.omitted).map((m) => ({ path: blobPath(m.sha256), size: m.size, body: { sha256: m.sha256, open: () => artifacts.get(m.sha256) } })),
  ];
  // A fixed, meaningful mtime: when the run was scheduled.
  await writeTarGz(outFile, files, new Date(run.firstOccurredAt!));
  return {
    runId,
    events: run.count,
    heads: run.heads.length,
    blobs: included.size,
    omittedBlobs: manifest.length - included.size,
  };
}

const NEWLINE = Buffer.from('\n');

/** What the bundle's files need from one read of the run: nothing per event but its leaf hash. */
interface RunFold {
  count: number;
  leaves: LeafHashes;
  heads: Extract<A2rlEvent, { type: 'TreeHeadSigned' }>[];
  manifest: ManifestFold;
  /** events.ndjson: every stored line and its newline. */
  ndjsonBytes: number;
  ndjsonSha256: string;
  firstOccurredAt: string | null;
  task: string | null;
  /** The last event that is not a head, and the size the heads cover. */
  lastOther: { seq: number; type: A2rlEvent['type'] } | null;
  covered: number;
}

async function foldRun(store: EventStore, runId: string): Promise<RunFold> {
  const run: RunFold = {
    count: 0, leaves: new LeafHashes(), heads: [], manifest: new ManifestFold(), ndjsonBytes: 0, ndjsonSha256: '', firstOccurredAt: null, task: null, lastOther: null, covered: 0,
  };
  const ndjson = createHash('sha256');
  // Lines are the stored bytes, exactly what the tree heads signed (older schema versions included).
  for await (const { event, bytes } of store.readStream(streamName(runId))) {
    run.count += 1;
    run.leaves.push(leafHash(bytes));
    ndjson.update(bytes).update(NEWLINE);
    run.ndjsonBytes += bytes.length + 1;
    run.firstOccurredAt ??= event.occurredAt;
    run.manifest.add(event);
    if (event.type === 'RunScheduled') run.task ??= event.data.task;
    if (event.type === 'TreeHeadSigned') {
      run.heads.push(event);
      run.covered = Math.max(run.covered, event.data.treeSize);
    } else run.lastOther = { seq: event.seq, type: event.type };
  }
  run.ndjsonSha256 = ndjson.digest('hex');
  return run;
}

async function runEvents(store: EventStore, runId: string): Promise<A2rlEvent[]> {
  const events: A2rlEvent[] = [];
  for await (const { event } of store.readStream(streamName(runId))) events.push(event);
  return events;
}

/** events.ndjson as it streams from the store (the first `count` events: those folded). */
async function* ndjsonLines(store: EventStore, runId: string, count: number): AsyncGenerator<Buffer> {
  for await (const { bytes } of store.readStream(streamName(runId), { maxCount: count })) {
    yield Buffer.concat([bytes, NEWLINE]);
  }
}

/** Why a run can't be exported yet: events after the last signed head, or a run not sealed by RunCompleted/RunInterrupted. */
function uncovered(run: RunFold): string | null {
  const lastOther = run.lastOther?.seq ?? -1;
  if (lastOther >= run.covered) return `events from seq ${run.covered} to ${lastOther} are not covered by a signed tree head yet`;
  const last = run.lastOther;
  if (last && last.type !== 'RunCompleted' && last.type !== 'RunInterrupted') {
    return `the run is not sealed (its last event is ${last.type} at seq ${last.seq}, not RunCompleted or RunInterrupted)`;
  }
  return null;
}
