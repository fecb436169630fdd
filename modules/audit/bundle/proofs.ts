import { createHash } from 'node:crypto';
import { nodeHash, type LeafHashes } from '../../ledger/merkle.js';

/**
 * RFC 6962 roots and proofs for every prefix of one leaf list, each in O(log n) after an O(n) build.
 * merkle.ts recomputes subtrees from the leaves on every call, which is quadratic when a bundle of
 * 100,000 events needs a proof per signed head. In an RFC 6962 tree every left child is a perfect
 * subtree aligned on its size, so the hashes of all aligned perfect subtrees (one array per level)
 * give any root or proof by folding a few of them.
 */
export class MerkleLevels {
  /**
   * levels[h] holds, 32 bytes each, the roots of the perfect subtrees over leaves [i·2^h, (i+1)·2^h):
   * one flat buffer per level (about 64 bytes a leaf in all, no object per node).
   */
  private readonly levels: Buffer[];
  readonly size: number;

  constructor(leafHashes: readonly Buffer[] | LeafHashes) {
    const leaves = Array.isArray(leafHashes) ? Buffer.concat(leafHashes as Buffer[]) : (leafHashes as LeafHashes).flat();
    this.size = leaves.length / 32;
    this.levels = [leaves];
    for (let below = leaves; below.length > 32; ) {
      const count = Math.floor(below.length / 64);
      const level = Buffer.allocUnsafe(count * 32);
      for (let i = 0; i < count; i++) nodeHash(below.subarray(i * 64, i * 64 + 32), below.subarray(i * 64 + 32, i * 64 + 64)).copy(level, i * 32);
      this.levels.push(level);
      below = level;
    }
  }

  /** Root of the tree over the first `size` leaves. */
  root(size = this.size): Buffer {
    if (!Number.isInteger(size) || size < 0 || size > this.size) throw new RangeError(`tree size ${size} is outside 0..${this.size}`);
    return size === 0 ? createHash('sha256').digest() : this.subtree(0, size);
  }

  /** Audit path of leaf `index` in the tree of the first `size` leaves (RFC 6962 §2.1.1). */
  inclusionProof(index: number, size: number): Buffer[] {
    if (!(Number.isInteger(index) && index >= 0 && index < size && size <= this.size)) throw new RangeError(`no leaf ${index} in a tree of size ${size}`);
    const path: Buffer[] = [];
    const walk = (m: number, from: number, to: number): void => {
      if (to - from <= 1) return;
      const k = split(to - from);
      if (m < k) {
        walk(m, from, from + k);
        path.push(this.subtree(from + k, to));
      } else {
        walk(m - k, from + k, to);
        path.push(this.subtree(from, from + k));
      }
    };
    walk(index, 0, size);
    return path;
  }

  /** Proof that the tree of the first `older` leaves is a prefix of the tree of the first `newer` (RFC 6962 §2.1.2). */
  consistencyProof(older: number, newer: number): Buffer[] {
    if (!(Number.isInteger(older) && older >= 0 && older <= newer && newer <= this.size)) throw new RangeError(`no consistency proof from size ${older} to ${newer}`);
    if (older === 0 || older === newer) return [];
    const path: Buffer[] = [];
    const sub = (m: number, from: number, to: number, whole: boolean): void => {
      if (m === to - from) {
        if (!whole) path.push(this.subtree(from, to));
        return;
      }
      const k = split(to - from);
      if (m <= k) {
        sub(m, from, from + k, whole);
        path.push(this.subtree(from + k, to));
      } else {
        sub(m - k, from + k, to, false);
        path.push(this.subtree(from, from + k));
      }
    };
    sub(older, 0, newer, true);
    return path;
  }

  /** Root over leaves [from, to), `from` aligned as RFC 6962 splits always leave it. */
  private subtree(from: number, to: number): Buffer {
    const n = to - from;
    if ((n & (n - 1)) === 0) {
      const h = Math.log2(n);
      const i = Math.floor(from / n);
      return this.levels[h].subarray(i * 32, i * 32 + 32);
    }
    const k = split(n);
    return nodeHash(this.subtree(from, from + k), this.subtree(from + k, to));
  }
}

/** Largest power of two strictly below n (n ≥ 2). */
function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** Checks a consistency proof between two roots (RFC 9162 §2.1.4.2). */
export function verifyConsistency(older: number, newer: number, olderRoot: Buffer, newerRoot: Buffer, proof: readonly Buffer[]): boolean {
  if (older < 0 || older > newer) return false;
  if (older === newer) return proof.length === 0 && olderRoot.equals(newerRoot);
  if (older === 0) return proof.length === 0;
  const path = (older & (older - 1)) === 0 ? [olderRoot, ...proof] : [...proof];
  if (path.length === 0) return false;
  let fn = older - 1;
  let sn = newer - 1;
  while (fn & 1) {
    fn >>= 1;
    sn >>= 1;
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn & 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while (!(fn & 1) && fn !== 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 && fr.equals(olderRoot) && sr.equals(newerRoot);
}
