import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { inclusionProof, leafHash, MerkleAccumulator, nodeHash, treeRoot, verifyInclusion } from './merkle.js';

const leaves = (n: number) => Array.from({ length: n }, (_, i) => leafHash(Buffer.from(`leaf ${i}`)));
const hex = (b: Buffer) => b.toString('hex');

describe('RFC 6962 Merkle tree', () => {
  it('hashes leaves and nodes with domain separation, and the empty tree as SHA-256 of nothing', () => {
    expect(hex(leafHash(Buffer.alloc(0)))).toBe('6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d');
    expect(hex(treeRoot([]))).toBe(hex(createHash('sha256').digest()));
    const [a, b, c] = leaves(3);
    expect(treeRoot([a, b, c]).equals(nodeHash(nodeHash(a, b), c))).toBe(true);
  });

  it('matches the RFC 6962 test vector tree of 8 leaves', () => {
    // Leaves from the Certificate Transparency reference tests (RFC 6962 implementations).
    const inputs = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'];
    const hashes = inputs.map((h) => leafHash(Buffer.from(h, 'hex')));
    expect(hex(treeRoot(hashes))).toBe('5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328');
    expect(hex(treeRoot(hashes, 3))).toBe('aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77');
  });

  it('the accumulator gives the same root as the full computation at every size', () => {
    const all = leaves(70);
    const acc = new MerkleAccumulator();
    for (let n = 1; n <= all.length; n++) {
      acc.push(all[n - 1]);
      expect(hex(acc.root())).toBe(hex(treeRoot(all, n)));
    }
  });

  it('inclusion proofs verify for every leaf and size, and fail for a wrong leaf, index or root', () => {
    const all = leaves(13);
    for (let size = 1; size <= all.length; size++) {
      const root = treeRoot(all, size);
      for (let i = 0; i < size; i++) {
        const proof = inclusionProof(all, i, size);
        expect(verifyInclusion(all[i], i, size, proof, root)).toBe(true);
        if (size > 1) {
          expect(verifyInclusion(all[(i + 1) % size], i, size, proof, root)).toBe(false);
          expect(verifyInclusion(all[i], (i + 1) % size, size, proof, root)).toBe(false);
        }
      }
    }
    expect(verifyInclusion(all[0], 0, 4, inclusionProof(all, 0, 4), treeRoot(all, 5))).toBe(false);
  });
});

describe('MerkleAccumulator.pushSubtree', () => {
  const leaves = Array.from({ length: 300 }, (_, i) => leafHash(Buffer.from(`leaf ${i}`)));

  it('builds the same tree from aligned parts built apart, with the same root at every size', () => {
    for (const part of [1, 4, 16, 64]) {
      const whole = new MerkleAccumulator();
      const joined = new MerkleAccumulator();
      let local = new MerkleAccumulator();
      for (const [i, leaf] of leaves.entries()) {
        if (i % part === 0 && local.size) {
          for (const subtree of local.subtrees()) joined.pushSubtree(subtree);
          local = new MerkleAccumulator();
        }
        const probe = joined.clone();
        for (const subtree of local.subtrees()) probe.pushSubtree(subtree);
        expect(probe.root()).toEqual(whole.root());
        whole.push(leaf);
        local.push(leaf);
      }
      expect(whole.root()).toEqual(treeRoot(leaves));
    }
  });

  it('refuses a subtree that does not line up with the leaves so far', () => {
    const tree = new MerkleAccumulator();
    tree.push(leaves[0]);
    expect(() => tree.pushSubtree({ size: 2, hash: leaves[1] })).toThrow(RangeError);
  });
});
