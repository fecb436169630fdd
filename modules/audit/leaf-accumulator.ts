import { hash } from 'node:crypto';
import type { PerfectSubtree } from '../ledger/merkle.js';

/**
 * MerkleAccumulator (modules/ledger/merkle.ts: RFC 6962, interior = SHA-256(0x01 ‖ left ‖ right))
 * for the fast check of a record (record-scan.ts), where it takes a million leaves: hashes are
 * 32-character latin1 strings, one byte a character, hashed from one reused buffer. A Buffer per
 * hash costs more to make than the hash itself.
 */
export class LeafAccumulator {
  /** Roots of perfect subtrees, largest first; their sizes are the set bits of `size`. */
  private readonly sizes: number[] = [];
  private readonly hashes: string[] = [];
  size = 0;

  /** Adds a leaf hash, SHA-256(0x00 ‖ event bytes), as a latin1 string. */
  push(leaf: string): void {
    let node = leaf;
    let size = 1;
    while (this.sizes.length && this.sizes[this.sizes.length - 1] === size) {
      this.sizes.pop();
      node = nodeHash(this.hashes.pop()!, node);
      size *= 2;
    }
    this.sizes.push(size);
    this.hashes.push(node);
    this.size += 1;
  }

  /** The perfect subtrees the leaves so far split into, largest first (as MerkleAccumulator.subtrees). */
  subtrees(): PerfectSubtree[] {
    return this.sizes.map((size, i) => ({ size, hash: Buffer.from(this.hashes[i], 'latin1') }));
  }
}

const NODE = Buffer.alloc(65, 1);

function nodeHash(left: string, right: string): string {
  NODE.write(left, 1, 32, 'latin1');
  NODE.write(right, 33, 32, 'latin1');
  return hash('sha256', NODE, 'binary');
}
