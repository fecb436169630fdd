import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { publishFile } from '../settings/publish-file.js';
import { canonicalBytes } from './events/canonical-json.js';

/**
 * Signed tree heads: Ed25519 (node:crypto) over the canonical JSON of
 * `{runId, treeSize, rootHash, keyId}`. The signing key lives under `$A2RL_HOME/keys/` (mode 0600),
 * never inside a workspace (the sandbox does not mount A2RL_HOME) and never in an export bundle.
 */
export interface TreeHead {
  runId: string;
  treeSize: number;
  /** Lowercase hex SHA-256 root of the run's first `treeSize` events (RFC 6962). */
  rootHash: string;
}

export interface SigningKey {
  keyId: string;
  privateKey: KeyObject;
  publicKeyPem: string;
}

const PRIVATE = 'ledger-ed25519.pem';
const PUBLIC = 'ledger-ed25519.pub.pem';

export function keysDir(home: string): string {
  return path.join(home, 'keys');
}

/** Key id: the first 16 hex digits of SHA-256 over the public key's DER (SPKI) bytes. */
export function keyIdOf(publicKey: KeyObject | string): string {
  const key = typeof publicKey === 'string' ? createPublicKey(publicKey) : publicKey;
  return createHash('sha256').update(key.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 16);
}

/** Creates the signing key pair; refuses to overwrite an existing one (it would orphan old signatures). */
export function initSigningKey(home: string): SigningKey {
  const created = createSigningKey(home);
  if (created === null) throw new Error(`a signing key already exists in ${keysDir(home)}; remove it deliberately to replace it`);
  return created;
}

/**
 * A new key pair, or null when `home` has a private key already (also when another process created
 * one a moment ago: the private key appears whole or not at all, and only its creator writes the public one).
 */
function createSigningKey(home: string): SigningKey | null {
  const dir = keysDir(home);
  if (existsSync(path.join(dir, PRIVATE))) return null;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const privatePem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const publicKeyPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  if (!publishFile(path.join(dir, PRIVATE), privatePem, { mode: 0o600, replace: false })) return null;
  publishFile(path.join(dir, PUBLIC), publicKeyPem, { mode: 0o644, replace: true });
  return { keyId: keyIdOf(publicKey), privateKey, publicKeyPem };
}

export function loadSigningKey(home: string): SigningKey | null {
  const file = path.join(keysDir(home), PRIVATE);
  if (!existsSync(file)) return null;
  const privateKey = createPrivateKey(readFileSync(file));
  const publicKey = createPublicKey(privateKey);
  return { keyId: keyIdOf(publicKey), privateKey, publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
}

/** The public key alone (PEM and id), for verifying and exporting: no need to read the private key. */
export function loadPublicKey(home: string): { keyId: string; publicKeyPem: string } | null {
  const file = path.join(keysDir(home), PUBLIC);
  if (!existsSync(file)) return null;
  const publicKeyPem = readFileSync(file, 'utf8');
  return { keyId: keyIdOf(publicKeyPem), publicKeyPem };
}

/** The existing key, or a new one (runs sign their heads from the first run on). */
export function loadOrInitSigningKey(home: string): SigningKey {
  return loadSigningKey(home) ?? createSigningKey(home) ?? loadKeyCreatedMeanwhile(home);
}

/** Another process created the key between our look and our write: use theirs. */
function loadKeyCreatedMeanwhile(home: string): SigningKey {
  const key = loadSigningKey(home);
  if (key === null) throw new Error(`the signing key in ${keysDir(home)} vanished while it was being created`);
  return key;
}

function message(head: TreeHead, keyId: string): Buffer {
  return canonicalBytes({ keyId, rootHash: head.rootHash, runId: head.runId, treeSize: head.treeSize });
}

/** Base64 Ed25519 signature over the head. */
export function signTreeHead(head: TreeHead, key: SigningKey): string {
  return sign(null, message(head, key.keyId), key.privateKey).toString('base64');
}

export function verifyTreeHead(head: TreeHead, keyId: string, signature: string, publicKeyPem: string): boolean {
  try {
    const publicKey = parsedPublicKey(publicKeyPem);
    if (publicKey.keyId !== keyId) return false;
    return verify(null, message(head, keyId), publicKey.key, Buffer.from(signature, 'base64'));
  } catch {
    return false;
  }
}

/**
 * The key a PEM holds and its id, parsed once per PEM: a run of 1M events has ~16k heads, all
 * verified against the same key, and parsing plus exporting it took more than verifying each signature.
 */
function parsedPublicKey(pem: string): { key: KeyObject; keyId: string } {
  let found = parsedKeys.get(pem);
  if (!found) {
    const key = createPublicKey(pem);
    found = { key, keyId: keyIdOf(key) };
    if (parsedKeys.size >= PARSED_KEYS_KEPT) parsedKeys.delete(parsedKeys.keys().next().value!);
    parsedKeys.set(pem, found);
  }
  return found;
}

/** A verifier sees one key, or the few of a trusted-keys file: a small bound keeps hostile input from growing the cache. */
const PARSED_KEYS_KEPT = 16;
const parsedKeys = new Map<string, { key: KeyObject; keyId: string }>();
