import type { BlobRef } from '../ledger/events/shared.js';
import {
  bodyShape,
  encodeManifest,
  MAX_PIECES_PER_CALL,
  MIN_SPLIT_BYTES,
  piecesNamed,
  segmentKey,
  sha256Hex,
  applyManifest,
  planEntries,
  splitBody,
  type BodyManifest,
  type BodyShape,
  type Segment,
  type PiecesRef,
} from './request-pieces.js';

/** How a call's body was stored: whole (as runs before pieces did) or as pieces. */
export type StoredBody = { whole: BlobRef } | { pieces: PiecesRef; parentable?: { keys: string[]; order: number } };

export interface BodyStoreOptions {
  /** The run's (redacting) artifact store. */
  storeBlob: (body: Buffer) => Promise<BlobRef>;
  /**
   * Whether the store would redact the whole body. A body it would is stored whole, so what is
   * recorded stays exactly the redacted body (pieces redacted one by one need not join into it).
   */
  wouldRedact?: (body: Buffer) => boolean;
}

/** Request bodies of recent calls a new request is compared with, to refer to the one it continues. */
const RECENT_PARENTS = 8;

/**
 * The gateway's side of request-pieces.ts: stores a call's body as pieces where that rebuilds it byte
 * for byte (checked here, before the form is chosen), else whole. A request refers to the recent
 * request it shares the most leading segments with (its parent), so it stores only what it appended.
 */
export class BodyStore {
  private recent: { manifest: string; keys: string[]; order: number }[] = [];
  private stores = 0;
  /** Pieces already stored (as they are, unredacted) by this run's calls: not written again. */
  private readonly stored = new Set<string>();

  constructor(private readonly options: BodyStoreOptions) {}

  /**
   * Stores a body. `order` (requests): where its call comes in the record order (default: the order
   * of these calls); its parent is an adopted request that comes before it, so the parent's event is
   * always recorded first.
   */
  async store(body: Buffer, api: string, part: 'request' | 'response', order?: number): Promise<StoredBody> {
    const pieces = await this.storePieces(body, bodyShape(api, part), part === 'request' ? order ?? ++this.stores : undefined);
    return pieces ?? { whole: await this.options.storeBlob(body) };
  }

  /** Lets later requests refer to this one (once its call's record is made). */
  adopt(stored: StoredBody): void {
    if (!('pieces' in stored) || !stored.parentable) return;
    this.recent = [{ manifest: stored.pieces.manifest.sha256, ...stored.parentable }, ...this.recent].slice(0, RECENT_PARENTS);
  }

  private async storePieces(body: Buffer, shape: BodyShape, order: number | undefined): Promise<StoredBody | null> {
    if (body.length < MIN_SPLIT_BYTES || this.options.wouldRedact?.(body)) return null;
    const split = splitBody(body, shape);
    if (!split) return null;
    const keys = split.segments.map(segmentKey);
    const manifest = (order !== undefined ? this.againstParent(split.segments, order) : undefined) ?? { entries: split.segments };
    const named = piecesNamed(manifest.entries);
    if (named.length > MAX_PIECES_PER_CALL) return null;
    for (const sha of named) if (!(await this.storePiece(sha, split.pieces.get(sha)!))) return null;
    const bytes = encodeManifest(manifest);
    const stored = await this.options.storeBlob(bytes);
    if (stored.sha256 !== sha256Hex(bytes)) return null;
    const ref: PiecesRef = { sha256: sha256Hex(body), size: body.length, manifest: { sha256: stored.sha256, size: stored.size, key: stored.key }, pieces: named };
    return { pieces: ref, ...(order !== undefined ? { parentable: { keys, order } } : {}) };
  }

  /** False when the store kept the piece redacted (other bytes than the body's). */
  private async storePiece(sha256: string, bytes: Buffer): Promise<boolean> {
    if (this.stored.has(sha256)) return true;
    if ((await this.options.storeBlob(bytes)).sha256 !== sha256) return false;
    this.stored.add(sha256);
    return true;
  }

  /**
   * The manifest against the recent request it shares the most segments with; none when none shares
   * any. Checked: applied to the parent's segments, it gives the body's.
   */
  private againstParent(segments: Segment[], order: number): BodyManifest | undefined {
    let best: { manifest: BodyManifest; shared: number; parentKeys: string[] } | undefined;
    for (const r of this.recent) {
      if (r.order >= order) continue;
      const { entries, shared } = planEntries(r.keys, segments);
      if (shared > (best?.shared ?? 0)) best = { manifest: { parent: r.manifest, entries }, shared, parentKeys: r.keys };
    }
    if (!best) return undefined;
    const keys = applyManifest(best.parentKeys, best.manifest);
    return keys.length === segments.length && keys.every((k, i) => k === segmentKey(segments[i])) ? best.manifest : undefined;
  }
}
