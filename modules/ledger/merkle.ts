import { createHash, hash } from 'node:crypto';

/**
 * RFC 6962 Merkle tree hashing (as used by Certificate Transparency): a run's events, as canonical
 * JSON bytes, are the leaves. Leaf hash = SHA-256(0x00 ‖ leaf), interior = SHA-256(0x01 ‖ left ‖ right);
 * the tree over n leaves splits at the largest power of two below n. The empty tree hashes to SHA-256("").
 */
export function leafHash(leaf: Uint8Array): Buffer {
  const input = scratch(leaf.length + 1);
  input[0] = 0;
  input.set(leaf, 1);
  return hash('sha256', input.subarray(0, leaf.length + 1), 'buffer');
}

export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  const input = scratch(1 + left.length + right.length);
  input[0] = 1;
  input.set(left, 1);
  input.set(right, 1 + left.length);
  return hash('sha256', input.subarray(0, 1 + left.length + right.length), 'buffer');
}

// One-shot hashing of prefix ‖ data copied into a reused buffer: a third of the cost of a
// createHash chain per call, which counts at a million leaves (`a2rl verify`).
let buffer = Buffer.alloc(64 * 1024);
function scratch(size: number): Buffer {
  if (size > buffer.length) buffer = Buffer.alloc(Math.max(size, buffer.length * 2));
  return buffer;
}

function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** Root over already-hashed leaves [from, to). */
function subtreeRoot(leafHashes: readonly Buffer[], from: number, to: number): Buffer {
  const n = to - from;
  if (n === 0) return createHash('sha256').digest();
  if (n === 1) return leafHashes[from];
  const k = split(n);
  return nodeHash(subtreeRoot(leafHashes, from, from + k), subtreeRoot(leafHashes, from + k, to));
}

/** Merkle tree head (root hash) over the first `size` leaf hashes (default: all). */
export function treeRoot(leafHashes: readonly Buffer[], size = leafHashes.length): Buffer {
  if (size > leafHashes.length) throw new RangeError(`tree size ${size} exceeds the ${leafHashes.length} leaves known`);
  return subtreeRoot(leafHashes, 0, size);
}

/**
 * Incremental roots: feeds leaf hashes one at a time and gives the root at any size in O(log n),
 * keeping only the perfect subtrees on the right edge (how the harness signs heads as a run grows).
 */
export class MerkleAccumulator {
  /** Roots of perfect subtrees, largest first; their sizes are the set bits of `size`. */
  private stack: PerfectSubtree[] = [];
  size = 0;

  push(leafHash: Buffer): void {
    this.pushSubtree({ size: 1, hash: leafHash });
  }

  /**
   * Adds a perfect subtree built elsewhere over the next `subtree.size` leaves (a power of two that
   * divides the leaves so far, so that it lines up with this tree's own subtrees).
   */
  pushSubtree(subtree: PerfectSubtree): void {
    if (this.size % subtree.size !== 0) throw new RangeError(`a subtree of ${subtree.size} leaves cannot follow ${this.size}`);
    let node = subtree;
    while (this.stack.length && this.stack[this.stack.length - 1].size === node.size) {
      const left = this.stack.pop()!;
      node = { size: left.size * 2, hash: nodeHash(left.hash, node.hash) };
    }
    this.stack.push(node);
    this.size += subtree.size;
  }

  root(): Buffer {
    if (!this.stack.length) return createHash('sha256').digest();
    let hash = this.stack[this.stack.length - 1].hash;
    for (let i = this.stack.length - 2; i >= 0; i--) hash = nodeHash(this.stack[i].hash, hash);
    return hash;
  }

  /** The perfect subtrees the leaves so far split into, largest first (the tree's right edge). */
  subtrees(): PerfectSubtree[] {
    return [...this.stack];
  }

  clone(): MerkleAccumulator {
    const copy = new MerkleAccumulator();
    copy.stack = [...this.stack];
    copy.size = this.size;
    return copy;
  }
}

/** A perfect subtree of a Merkle tree: its size (a power of two) and root hash. */
export interface PerfectSubtree {
  size: number;
  hash: Buffer;
}

/** Audit path for leaf `index` in the tree of the first `size` leaves (RFC 6962 §2.1.1). */
export function inclusionProof(leafHashes: readonly Buffer[], index: number, size = leafHashes.length): Buffer[] {
  if (!(index >= 0 && index < size && size <= leafHashes.length)) throw new RangeError(`no leaf ${index} in a tree of size ${size}`);
  const path: Buffer[] = [];
  const walk = (m: number, from: number, to: number): void => {
    const n = to - from;
    if (n <= 1) return;
    const k = split(n);
    if (m < k) {
      walk(m, from, from + k);
      path.push(subtreeRoot(leafHashes, from + k, to));
    } else {
      walk(m - k, from + k, to);
      path.push(subtreeRoot(leafHashes, from, from + k));
    }
  };
  walk(index, 0, size);
  return path;
}

/** Checks an audit path against a root (RFC 9162 §2.1.3.2). */
export function verifyInclusion(leaf: Buffer, index: number, size: number, proof: readonly Buffer[], root: Buffer): boolean {
  if (index < 0 || index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && r.equals(root);
}

/**
 * Leaf hashes of a log, 32 bytes each, in a few large chunks: no object per leaf, so a run of
 * millions of events costs 32 bytes an event (a Buffer per hash would cost several times that).
 */
export class LeafHashes {
  private static readonly PER_CHUNK = 16384;
  private readonly chunks: Buffer[] = [];
  size = 0;

  push(hash: Buffer): void {
    const i = this.size % LeafHashes.PER_CHUNK;
    if (i === 0) this.chunks.push(Buffer.allocUnsafe(32 * LeafHashes.PER_CHUNK));
    hash.copy(this.chunks[this.chunks.length - 1], i * 32);
    this.size += 1;
  }

  /** The hash of leaf `index` (a view, not a copy), or null past the end. */
  get(index: number): Buffer | null {
    if (!(Number.isInteger(index) && index >= 0 && index < this.size)) return null;
    const i = index % LeafHashes.PER_CHUNK;
    return this.chunks[Math.floor(index / LeafHashes.PER_CHUNK)].subarray(i * 32, i * 32 + 32);
  }

  /** All hashes in one buffer, 32 bytes each. */
  flat(): Buffer {
    const out = Buffer.concat(this.chunks, this.size * 32);
    return out;
  }
}

