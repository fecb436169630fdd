import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { initSigningKey, keysDir, loadOrInitSigningKey, loadSigningKey, signTreeHead, verifyTreeHead } from './tree-head.js';

describe('signed tree heads', () => {
  const homes: string[] = [];
  const home = () => {
    const h = mkdtempSync(path.join(os.tmpdir(), 'a2rl-keys-'));
    homes.push(h);
    return h;
  };
  afterEach(() => homes.splice(0).forEach((h) => rmSync(h, { recursive: true, force: true })));

  it('creates a private key readable only by its owner and refuses to overwrite it', () => {
    const h = home();
    const key = initSigningKey(h);
    expect(statSync(path.join(keysDir(h), 'ledger-ed25519.pem')).mode & 0o777).toBe(0o600);
    expect(loadSigningKey(h)!.keyId).toBe(key.keyId);
    expect(loadOrInitSigningKey(h).keyId).toBe(key.keyId);
    expect(() => initSigningKey(h)).toThrow(/already exists/);
  });

  it('verifies a head only with the same run, size, root and public key', () => {
    const key = initSigningKey(home());
    const other = initSigningKey(home());
    const head = { runId: 'r1', treeSize: 10, rootHash: 'ab'.repeat(32) };
    const sig = signTreeHead(head, key);
    expect(verifyTreeHead(head, key.keyId, sig, key.publicKeyPem)).toBe(true);
    expect(verifyTreeHead({ ...head, treeSize: 11 }, key.keyId, sig, key.publicKeyPem)).toBe(false);
    expect(verifyTreeHead({ ...head, runId: 'r2' }, key.keyId, sig, key.publicKeyPem)).toBe(false);
    expect(verifyTreeHead({ ...head, rootHash: 'cd'.repeat(32) }, key.keyId, sig, key.publicKeyPem)).toBe(false);
    expect(verifyTreeHead(head, key.keyId, sig, other.publicKeyPem)).toBe(false); // swapped key
    expect(verifyTreeHead(head, other.keyId, signTreeHead(head, other), key.publicKeyPem)).toBe(false);
  });
});
