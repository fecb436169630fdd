import type { EventData, EventType } from '../ledger/events/catalog.js';
import { systemClock, type ObservationClock } from './observer.js';
import { BlobRemap, type RedactedBlob } from './redacting-artifact-store.js';
import { fieldPath, SecretRedactor, type KnownSecret } from './secret-redactor.js';

export type SecretRedactedFact = EventData<'SecretRedacted'>;

/** Events never redacted: the heads sign what is stored, and the facts carry no value. */
const UNREDACTED = new Set<EventType>(['TreeHeadSigned', 'SecretRedacted']);

export interface RunRedactionOptions {
  secrets?: readonly KnownSecret[];
  /** When a redaction was made (the facts' observedAt). */
  clock?: ObservationClock;
}

/**
 * What one run keeps out of its ledger: the secrets known so far (more can be added, e.g. the run
 * token once it is minted), the blobs its observers stored redacted, and, per event, the data as it
 * may be recorded with the SecretRedacted facts that say what was taken out (never the value).
 */
export class RunRedaction {
  readonly blobs = new BlobRemap();
  private current: SecretRedactor;
  private readonly clock: ObservationClock;

  constructor(opts: RunRedactionOptions = {}) {
    this.current = new SecretRedactor(opts.secrets ?? []);
    this.clock = opts.clock ?? systemClock;
  }

  get redactor(): SecretRedactor {
    return this.current;
  }

  /** Secrets learnt during the run: they apply to every event and blob from now on. */
  add(secrets: readonly KnownSecret[]): void {
    this.current = this.current.with(secrets);
  }

  /** The event's data as it may be recorded, and the facts to record with it. */
  redactEvent<T extends EventType>(type: T, data: EventData<T>): { data: EventData<T>; facts: SecretRedactedFact[] } {
    if (UNREDACTED.has(type)) return { data, facts: [] };
    let observedAt: string | undefined;
    const at = () => (observedAt ??= this.clock().toISOString());
    const text = this.current.redactData(data);
    const facts: SecretRedactedFact[] = text.hits.map((h) => ({ where: 'event', eventType: type, field: h.field, kind: h.kind, count: h.count, observedAt: at() }));
    const blobs = this.remapBlobs(type, text.data);
    for (const b of blobs.found) {
      for (const h of b.blob.hits) {
        facts.push({
          where: 'blob',
          eventType: type,
          ...(b.field ? { field: b.field } : {}),
          blob: b.kind,
          ...(b.path !== undefined ? { path: b.path } : {}),
          kind: h.kind,
          count: h.count,
          observedAt: at(),
        });
      }
    }
    return { data: blobs.data, facts };
  }

  private remapBlobs<T extends EventType>(type: T, data: EventData<T>): { data: EventData<T>; found: BlobFound[] } {
    // Checkpoints are archived whole by the grading API (graded bytes = archived bytes): never remapped.
    if (this.blobs.size === 0 || type === 'SubmissionReceived') return { data, found: [] };
    if (type === 'FileChanged') return remapFileChanged(data as EventData<'FileChanged'>, this.blobs) as { data: EventData<T>; found: BlobFound[] };
    const found: BlobFound[] = [];
    const kind = type === 'AgentOutput' ? 'output' : 'other';
    const out = remapRefs(data, '', this.blobs, (field, blob) => found.push({ field, kind, blob }));
    return { data: out as EventData<T>, found };
  }
}

interface BlobFound {
  field: string;
  kind: 'file' | 'output' | 'other';
  path?: string;
  blob: RedactedBlob;
}

/**
 * A file's recorded sha256 and size describe the blob archived for it, so restoring the file from
 * the ledger verifies; the hash of the file as it was on disk is not recorded when it was redacted.
 * `previousSha256` follows, so a file's chain of versions stays consistent.
 */
function remapFileChanged(data: EventData<'FileChanged'>, blobs: BlobRemap): { data: EventData<'FileChanged'>; found: BlobFound[] } {
  const current = data.sha256 !== undefined ? blobs.get(data.sha256) : undefined;
  const previous = data.previousSha256 !== undefined ? blobs.get(data.previousSha256) : undefined;
  if (!current && !previous) return { data, found: [] };
  const out = { ...data };
  if (current) {
    out.sha256 = current.ref.sha256;
    out.size = current.ref.size;
    if (out.key !== undefined) out.key = current.ref.key;
  }
  if (previous) out.previousSha256 = previous.ref.sha256;
  // Only an event that refers to the stored blob reports what it lacks.
  const found: BlobFound[] = current && data.key !== undefined ? [{ field: '', kind: 'file', path: data.path, blob: current }] : [];
  return { data: out, found };
}

function isBlobRef(value: object): value is { sha256: string; size: number; key: string } {
  const v = value as Record<string, unknown>;
  return typeof v.sha256 === 'string' && typeof v.size === 'number' && typeof v.key === 'string';
}

/** Rewrites every BlobRef-shaped object whose content was stored redacted; copies only what changed. */
function remapRefs(value: unknown, path: string, blobs: BlobRemap, onFound: (field: string, blob: RedactedBlob) => void): unknown {
  if (Array.isArray(value)) {
    let copy: unknown[] | null = null;
    value.forEach((item, i) => {
      const next = remapRefs(item, `${path}[${i}]`, blobs, onFound);
      if (next !== item) (copy ??= value.slice())[i] = next;
    });
    return copy ?? value;
  }
  if (value === null || typeof value !== 'object') return value;
  if (isBlobRef(value)) {
    const blob = blobs.get(value.sha256);
    if (!blob) return value;
    onFound(path, blob);
    return { ...value, sha256: blob.ref.sha256, size: blob.ref.size, key: blob.ref.key };
  }
  let copy: Record<string, unknown> | null = null;
  for (const [key, item] of Object.entries(value)) {
    const next = remapRefs(item, fieldPath(path, key), blobs, onFound);
    if (next !== item) (copy ??= { ...value })[key] = next;
  }
  return copy ?? value;
}
