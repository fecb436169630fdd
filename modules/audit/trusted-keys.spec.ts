import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { initSigningKey, keyIdOf } from '../ledger/tree-head.js';
import { fingerprintOf, listTrustedKeys, parsePublicKey, trustedKeysDir, trustKey, untrustKey } from './trusted-keys.js';

const publicPem = () => generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();

describe('the trusted keys of verify-bundle', () => {
  let home: string;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-trust-'));
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it('are none in a fresh home, and reading them creates nothing', () => {
    expect(listTrustedKeys(home)).toEqual([]);
    expect(readdirSync(home)).toEqual([]);
  });

  it("include the ledger's own key, which cannot be untrusted", () => {
    const ledger = initSigningKey(home);
    expect(listTrustedKeys(home)).toEqual([expect.objectContaining({ keyId: ledger.keyId, source: 'ledger', publicKeyPem: ledger.publicKeyPem })]);
    expect(() => untrustKey(home, ledger.keyId)).toThrow(`key ${ledger.keyId} is this ledger's own signing key, which is always trusted`);
    expect(trustKey(home, ledger.publicKeyPem, 'ledger.pem')).toMatchObject({ added: false, key: { source: 'ledger' } });
  });

  it('take a key as `a2rl keys show` prints it, once, and name it by key id and fingerprint', () => {
    const pem = publicPem();
    const shown = `${pem}key id: ${keyIdOf(pem)}\n`;
    const { key, added } = trustKey(home, shown, 'signer.txt');
    expect(added).toBe(true);
    expect(key).toMatchObject({ keyId: keyIdOf(pem), source: 'trusted', publicKeyPem: pem });
    expect(key.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(key.fingerprint.startsWith(key.keyId)).toBe(true);
    expect(key.file).toBe(path.join(trustedKeysDir(home), `${key.fingerprint}.pem`));
    expect(trustKey(home, pem, 'again.pem').added).toBe(false);
    expect(listTrustedKeys(home)).toEqual([key]);
  });

  it('are removed by key id or fingerprint, every copy of the key', () => {
    const a = trustKey(home, publicPem(), 'a.pem').key;
    const b = trustKey(home, publicPem(), 'b.pem').key;
    writeFileSync(path.join(trustedKeysDir(home), 'copy-of-a.pem'), a.publicKeyPem);
    expect(untrustKey(home, a.keyId).fingerprint).toBe(a.fingerprint);
    expect(listTrustedKeys(home).map((k) => k.keyId)).toEqual([b.keyId]);
    expect(untrustKey(home, b.fingerprint.toUpperCase()).keyId).toBe(b.keyId);
    expect(listTrustedKeys(home)).toEqual([]);
    expect(() => untrustKey(home, b.keyId)).toThrow(`no trusted key ${b.keyId}`);
  });

  it('refuse a private key, a key of another algorithm and text without a key, in one line naming the file', () => {
    const pair = generateKeyPairSync('ed25519');
    expect(() => trustKey(home, pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), 'secret.pem')).toThrow(
      'secret.pem holds a private key; give the public key only (`a2rl keys show` prints it)',
    );
    const x25519 = generateKeyPairSync('x25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();
    expect(() => trustKey(home, x25519, 'x.pem')).toThrow('x.pem is a x25519 key; a2rl signs with Ed25519');
    expect(() => trustKey(home, 'hello', 'notes.txt')).toThrow('notes.txt holds no PEM public key');
    expect(() => parsePublicKey('-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n', 'bad.pem')).toThrow(/^bad\.pem is not a public key: /);
    expect(listTrustedKeys(home)).toEqual([]);
  });

  it('name a file in the trusted directory that is not a key', () => {
    mkdirSync(trustedKeysDir(home), { recursive: true });
    writeFileSync(path.join(trustedKeysDir(home), 'junk.pem'), 'not a key');
    expect(() => listTrustedKeys(home)).toThrow(`${path.join(trustedKeysDir(home), 'junk.pem')} (remove it if it is not a key you trust) holds no PEM public key`);
  });

  it('fingerprint the SPKI bytes, as key ids do', () => {
    const pem = publicPem();
    expect(fingerprintOf(parsePublicKey(pem, 'k')).slice(0, 16)).toBe(keyIdOf(pem));
  });
});
