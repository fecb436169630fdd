import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { keyIdOf, keysDir, loadPublicKey } from '../ledger/tree-head.js';

/**
 * The keys `a2rl verify-bundle` accepts a bundle's signature from without `--pubkey`: the ledger's
 * own key (`$A2RL_HOME/keys/ledger-ed25519.pub.pem`) and the public keys added with `a2rl keys trust`,
 * one canonical SPKI PEM file each under `$A2RL_HOME/keys/trusted/`, named by the key's fingerprint.
 */
export interface TrustedKey {
  /** The short id signatures and `a2rl keys show` name (16 hex digits). */
  keyId: string;
  /** SHA-256 of the key's SPKI DER bytes, in hex: the key id is its first 16 digits. */
  fingerprint: string;
  publicKeyPem: string;
  /** `ledger`: this ledger's signing key (always trusted); `trusted`: added with `a2rl keys trust`. */
  source: 'ledger' | 'trusted';
  file: string;
}

export function trustedKeysDir(home: string): string {
  return path.join(keysDir(home), 'trusted');
}

export function fingerprintOf(key: KeyObject): string {
  return createHash('sha256').update(key.export({ type: 'spki', format: 'der' })).digest('hex');
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/;

/**
 * The Ed25519 public key in `text`: a PEM block, alone or with text around it (as `a2rl keys show`
 * prints it, or a bundle's public-key.pem). A private key is refused rather than used.
 */
export function parsePublicKey(text: string, source: string): KeyObject {
  const block = PEM_BLOCK.exec(text);
  if (!block) throw new Error(`${source} holds no PEM public key (-----BEGIN PUBLIC KEY-----); \`a2rl keys show\` prints one`);
  if (/PRIVATE/.test(block[1])) throw new Error(`${source} holds a private key; give the public key only (\`a2rl keys show\` prints it)`);
  let key: KeyObject;
  try {
    key = createPublicKey(block[0]);
  } catch (err) {
    throw new Error(`${source} is not a public key: ${(err as Error).message}`);
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`${source} is a ${String(key.asymmetricKeyType)} key; a2rl signs with Ed25519`);
  return key;
}

function describe(key: KeyObject, source: TrustedKey['source'], file: string): TrustedKey {
  return { keyId: keyIdOf(key), fingerprint: fingerprintOf(key), publicKeyPem: key.export({ type: 'spki', format: 'pem' }).toString(), source, file };
}

/** Every trusted key once, the ledger's first; a file in the trusted directory that is not a public key is an error naming it. */
export function listTrustedKeys(home: string): TrustedKey[] {
  const keys: TrustedKey[] = [];
  for (const key of allKeys(home)) if (!keys.some((k) => k.fingerprint === key.fingerprint)) keys.push(key);
  return keys;
}

function allKeys(home: string): TrustedKey[] {
  const keys: TrustedKey[] = [];
  const ledger = loadPublicKey(home);
  if (ledger) keys.push(describe(parsePublicKey(ledger.publicKeyPem, 'the ledger key'), 'ledger', path.join(keysDir(home), 'ledger-ed25519.pub.pem')));
  const dir = trustedKeysDir(home);
  if (!existsSync(dir)) return keys;
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.pem')).sort()) {
    const file = path.join(dir, name);
    keys.push(describe(parsePublicKey(readFileSync(file, 'utf8'), `${file} (remove it if it is not a key you trust)`), 'trusted', file));
  }
  return keys;
}

/** Adds a public key to the trusted list; trusting a key already trusted changes nothing (`added` false). */
export function trustKey(home: string, text: string, source: string): { key: TrustedKey; added: boolean } {
  const key = parsePublicKey(text, source);
  const fingerprint = fingerprintOf(key);
  const known = listTrustedKeys(home).find((k) => k.fingerprint === fingerprint);
  if (known) return { key: known, added: false };
  const dir = trustedKeysDir(home);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, `${fingerprint}.pem`);
  const tmp = `${file}.${process.pid}.partial`;
  writeFileSync(tmp, key.export({ type: 'spki', format: 'pem' }), { mode: 0o644 });
  renameSync(tmp, file);
  return { key: describe(key, 'trusted', file), added: true };
}

/** Removes a key added with `a2rl keys trust`, named by its key id or full fingerprint; the ledger's own key stays trusted. */
export function untrustKey(home: string, id: string): TrustedKey {
  const wanted = id.trim().toLowerCase();
  const matches = allKeys(home).filter((k) => k.keyId === wanted || k.fingerprint === wanted);
  if (!matches.length) throw new Error(`no trusted key ${id} (\`a2rl keys trusted\` lists them by key id and fingerprint)`);
  if (matches.some((k) => k.source === 'ledger')) throw new Error(`key ${matches[0].keyId} is this ledger's own signing key, which is always trusted`);
  for (const key of matches) rmSync(key.file); // every copy: a second file of the key would keep trusting it
  return matches[0];
}
