import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { inclusionProof, leafHash, treeRoot, verifyInclusion } from '../../ledger/merkle.js';
import { MerkleLevels, verifyConsistency } from './proofs.js';

const leaves = Array.from({ length: 37 }, (_, i) => leafHash(Buffer.from(`event ${i}`)));
const levels = new MerkleLevels(leaves);

describe('MerkleLevels', () => {
  it('gives the same root as merkle.ts for every prefix, including the empty tree', () => {
    for (let n = 0; n <= leaves.length; n++) expect(levels.root(n).toString('hex')).toBe(treeRoot(leaves, n).toString('hex'));
    expect(levels.root(0).toString('hex')).toBe(createHash('sha256').digest('hex'));
  });

  it('gives the same inclusion proofs as merkle.ts, and they verify', () => {
    for (const n of [1, 2, 3, 8, 13, 32, 37]) {
      for (let i = 0; i < n; i++) {
        const proof = levels.inclusionProof(i, n);
        expect(proof.map((p) => p.toString('hex'))).toEqual(inclusionProof(leaves, i, n).map((p) => p.toString('hex')));
        expect(verifyInclusion(leaves[i], i, n, proof, levels.root(n))).toBe(true);
      }
    }
  });

  it('proves every prefix consistent with every longer prefix', () => {
    for (let m = 0; m <= leaves.length; m++) {
      for (let n = m; n <= leaves.length; n++) {
        expect(verifyConsistency(m, n, levels.root(m), levels.root(n), levels.consistencyProof(m, n))).toBe(true);
      }
    }
  });
});

describe('verifyConsistency', () => {
  it('rejects a proof against a tree whose older part was rewritten', () => {
    const rewritten = [...leaves];
    rewritten[5] = leafHash(Buffer.from('rewritten'));
    const other = new MerkleLevels(rewritten);
    expect(verifyConsistency(13, 37, levels.root(13), other.root(37), other.consistencyProof(13, 37))).toBe(false);
    expect(verifyConsistency(13, 37, levels.root(13), other.root(37), levels.consistencyProof(13, 37))).toBe(false);
  });

  it('rejects an altered or truncated proof and wrong sizes', () => {
    const proof = levels.consistencyProof(13, 37);
    const altered = proof.map((p, i) => (i === 1 ? leafHash(p) : p));
    expect(verifyConsistency(13, 37, levels.root(13), levels.root(37), altered)).toBe(false);
    expect(verifyConsistency(13, 37, levels.root(13), levels.root(37), proof.slice(0, -1))).toBe(false);
    expect(verifyConsistency(12, 37, levels.root(13), levels.root(37), proof)).toBe(false);
    expect(verifyConsistency(37, 13, levels.root(37), levels.root(13), proof)).toBe(false);
  });
});
