import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import type { A2rlEvent } from '../../ledger/events/catalog.js';
import { canonicalBytes } from '../../ledger/events/canonical-json.js';
import type { BlobReader } from '../../../projections/blob-reader.js';
import { inertLine } from '../../reports/inert-text.js';
import { keyIdOf } from '../../ledger/tree-head.js';
import { sealFailures, verifyEventChain, type VerificationFailure } from '../verify-chain.js';
import { integrityFailures } from '../verify-integrity.js';
import { checkHeads } from './heads.js';
import {
  blobPath, BUNDLE_FORMAT, BUNDLE_FORMAT_V1, BUNDLE_FORMAT_V2, DESCRIPTOR_FILE, EVENTS_FILE, expectedManifest, FIXED_FILES, HEADS_FILE, KEY_FILE, MANIFEST_FILE, RENDERER_VERSION,
  REPORT_FILES, type ManifestItem, type ReadDescriptor,
} from './layout.js';
import { renderBundleReports, REPORT_RENDERER } from './reports.js';
import { readTarGz } from './tar-io.js';

export interface VerifyBundleOptions {
  /** The signer's public key obtained out of band (`--pubkey`): the bundled key must be this key. */
  publicKeyPem?: string;
  /** Without `publicKeyPem`: the keys the reader trusts (PEM); the bundled key must be one of them. */
  trustedKeys?: readonly string[];
  /** Without `publicKeyPem`: accept the bundled key as it is (`--trust-embedded-key`), checked against nothing. */
  trustEmbeddedKey?: boolean;
  /** Refuse an archive that inflates to more than this (default: tar-io's inflateLimit of the file's size). */
  maxInflatedBytes?: number;
}

/**
 * How the signing key was established: given with --pubkey, found among the trusted keys, taken from
 * the bundle on the caller's say-so (--trust-embedded-key), or none of these (a failure).
 */
export type KeyTrust = 'pubkey' | 'trusted' | 'embedded' | 'untrusted';

export interface BundleVerification {
  ok: boolean;
  runId: string | null;
  /** Whether signatures were checked with a key given by the caller rather than only the bundled one. */
  pinnedKey: boolean;
  /** Key id of the bundled public key (null when it cannot be read). */
  keyId: string | null;
  /** Null when the bundle failed before its key was read. */
  keyTrust: KeyTrust | null;
  events: number;
  heads: number;
  blobs: number;
  omittedBlobs: number;
  /** The report renderer bundle.json names; null when it names none (bundles exported before it did) or was not read. */
  renderer: string | null;
  /**
   * Whether reports/ were re-rendered and compared byte for byte: only when `renderer` is the version
   * this a2rl renders (REPORT_RENDERER). Otherwise they are not verified, and `notes` says so.
   */
  reportsChecked: boolean;
  /** What the reader should know that is not a failure (reports of another renderer version not re-rendered): inert lines. */
  notes: string[];
  /** Every failure, most telling first: archive and key, event lines in line order, heads, blobs, reports, integrity. */
  failures: VerificationFailure[];
}

/**
 * One failure as one line, naming the bundle line, blob or file it concerns. Inert (inert-text.ts):
 * file names, JSON parse errors and event fields in it come from the bundle, which a forger wrote,
 * and must not repaint the reader's terminal or start a line of their own (a green "OK … verified").
 */
export function describeFailure(f: VerificationFailure): string {
  if (f.line !== undefined) return inertLine(`${EVENTS_FILE} line ${f.line}: ${f.message}`);
  if (f.artifact !== undefined) return inertLine(`${f.artifact}: ${f.message}`);
  return inertLine(f.message);
}

/**
 * Verifies an audit bundle offline: nothing but the file and the keys given is read. Checks, in
 * docs/audit-bundle.md's words: the archive inflates within its limit (tar-io.ts); the signing key
 * is the pinned one, or one of the trusted keys, or accepted unchecked when the caller says so
 * (otherwise the first failure, check `key`); the archive holds exactly the expected files; every line
 * of events.ndjson is a valid canonical event of the run, seqs dense, every signed head's root and
 * signature check and the last head covers everything (verify-chain.ts); heads.json's leaves,
 * heads and proofs check against the key and the lines; the artifact manifest is the one the events
 * imply and every included blob has its sha256 and size; the reports re-render identically (only
 * when bundle.json names this a2rl's REPORT_RENDERER; otherwise a note says they were not); and no
 * WorkspaceIntegrityChecked found the read-only data/ or models/ modified (the run's own verdict).
 */
export async function verifyBundle(file: string, opts: VerifyBundleOptions = {}): Promise<BundleVerification> {
  const pinned = opts.publicKeyPem !== undefined;
  const result: BundleVerification = {
    ok: false, runId: null, pinnedKey: pinned, keyId: null, keyTrust: null, events: 0, heads: 0, blobs: 0, omittedBlobs: 0,
    renderer: null, reportsChecked: false, notes: [], failures: [],
  };
  const archive: VerificationFailure[] = [];
  const bundle = (message: string) => archive.push({ check: 'bundle', message });
  const finish = (...groups: VerificationFailure[][]): BundleVerification => {
    result.failures = [archive, ...groups].flat();
    result.ok = result.failures.length === 0;
    return result;
  };

  const { files, problems, tooLarge } = await readTarGz(file, { maxInflatedBytes: opts.maxInflatedBytes });
  problems.forEach(bundle);
  if (tooLarge) return finish();
  for (const name of FIXED_FILES) if (!files.has(name)) bundle(`${name} is missing from the bundle`);
  if (problems.length || !files.has(DESCRIPTOR_FILE) || !files.has(EVENTS_FILE) || !files.has(KEY_FILE)) return finish();

  const descriptor = readDescriptor(files.get(DESCRIPTOR_FILE)!);
  if (typeof descriptor === 'string') {
    bundle(`${DESCRIPTOR_FILE}: ${descriptor}`);
    return finish();
  }
  const { runId } = descriptor;
  result.runId = runId;
  result.renderer = descriptor.renderer;

  const key = readKeys(files.get(KEY_FILE)!, opts.publicKeyPem);
  key.problems.forEach(bundle);
  result.keyId = key.bundledId;
  if (!key.pem) return finish();
  if (pinned) result.keyTrust = 'pubkey';
  else {
    result.keyTrust = trustOf(key.pem, opts);
    // Checking goes on with the bundled key, so that --json still lists every other failure.
    if (result.keyTrust === 'untrusted') archive.push({ check: 'key', message: untrustedMessage(key.bundledId!) });
  }

  // events.ndjson: the exact bytes of each line are the Merkle leaves.
  const ndjson = files.get(EVENTS_FILE)!;
  const lines = splitLines(ndjson);
  const lineFailures: VerificationFailure[] = [];
  if (ndjson.length && ndjson[ndjson.length - 1] !== 0x0a) {
    lineFailures.push({ check: 'event', seq: lines.length - 1, line: lines.length, message: 'the file does not end with a newline (the last line was altered)' });
  }
  const chain = verifyEventChain(runId, lines.map((bytes, i) => ({ bytes, line: i + 1 })), key.pem);
  const events = chain.events;
  result.events = lines.length;
  result.heads = events.filter((e) => e.type === 'TreeHeadSigned').length;

  const heads = files.has(HEADS_FILE) ? checkHeads(runId, files.get(HEADS_FILE)!, lines, events, key.pem) : { failures: [], lineFailures: [] };
  // A seal failure names the seq (not a line): the bundle was cut, so no single line is at fault.
  const byLine = [...lineFailures, ...heads.lineFailures, ...chain.failures, ...sealFailures(events)];
  const numbered = byLine.filter((f) => f.line !== undefined).sort((a, b) => a.line! - b.line!);
  const unnumbered = byLine.filter((f) => f.line === undefined);

  const blobs = checkArtifacts(files, events, descriptor);
  result.blobs = blobs.included;
  result.omittedBlobs = blobs.omitted;

  const reports: VerificationFailure[] = [];
  if (descriptor.renderer !== REPORT_RENDERER) {
    // Reports are derived: a renderer that changed renders other bytes from the same events. They
    // are left as they are and said to be unverified; everything they derive from is verified.
    result.notes.push(rendererNote(descriptor));
    return finish(numbered, unnumbered, heads.failures, blobs.failures, integrityFailures(events));
  }
  result.reportsChecked = true;
  try {
    const rendered = await renderBundleReports(events, blobs.reader, descriptor.level);
    for (const [format, name] of Object.entries(REPORT_FILES)) {
      const bundled = files.get(name);
      if (bundled && !bundled.equals(Buffer.from(rendered[format as keyof typeof REPORT_FILES], 'utf8'))) {
        reports.push({ check: 'report', message: `${name} differs from the report re-rendered from the bundle's events and blobs` });
      }
    }
  } catch (err) {
    reports.push({ check: 'report', message: `the reports cannot be re-rendered from the bundle: ${(err as Error).message}` });
  }
  return finish(numbered, unnumbered, heads.failures, blobs.failures, reports, integrityFailures(events));
}

/** Why reports/ were not re-rendered, in one inert line: the renderer versions (bundle text) are quoted as JSON strings. */
function rendererNote(d: ReadDescriptor): string {
  const why =
    d.renderer === null
      ? `${DESCRIPTOR_FILE} names no report renderer (format "${BUNDLE_FORMAT_V1}": exported before bundles recorded it)`
      : `the reports were rendered by report renderer ${JSON.stringify(d.renderer)}`;
  return inertLine(
    `${why}; this a2rl renders "${REPORT_RENDERER}", so reports/ were not re-rendered or compared and are not verified ` +
      '(events, heads, key, blobs and integrity were verified as usual)',
  );
}

/** bundle.json: formats 3 and 2 name their renderer; format 1 (older exports) does not, and is read with renderer null. */
function readDescriptor(bytes: Buffer): ReadDescriptor | string {
  let d: Record<string, unknown>;
  try {
    d = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
  } catch (err) {
    return `not JSON: ${(err as Error).message}`;
  }
  if (typeof d !== 'object' || d === null || Array.isArray(d)) return 'not a JSON object';
  if (d.format !== BUNDLE_FORMAT && d.format !== BUNDLE_FORMAT_V2 && d.format !== BUNDLE_FORMAT_V1) {
    return `format is ${JSON.stringify(d.format)}; this a2rl reads "${BUNDLE_FORMAT}", "${BUNDLE_FORMAT_V2}" and "${BUNDLE_FORMAT_V1}"`;
  }
  const v1 = d.format === BUNDLE_FORMAT_V1;
  if (Object.keys(d).sort().join() !== (v1 ? 'format,level,runId,withCheckpoints' : 'format,level,renderer,runId,withCheckpoints')) {
    return v1 ? `must hold exactly format, runId, withCheckpoints and level (format "${BUNDLE_FORMAT_V1}")` : 'must hold exactly format, runId, withCheckpoints, level and renderer';
  }
  if (!v1 && (typeof d.renderer !== 'string' || !RENDERER_VERSION.test(d.renderer))) return 'renderer must be a report renderer version (up to 64 characters of A-Z a-z 0-9 . _ / : + -)';
  if (typeof d.runId !== 'string' || typeof d.withCheckpoints !== 'boolean' || !(d.level === null || (Number.isSafeInteger(d.level) && (d.level as number) > 0))) {
    return 'runId must be a string, withCheckpoints a boolean, level null or a positive integer';
  }
  if (!canonicalBytes(d).equals(bytes)) return 'not in canonical JSON form (RFC 8785): the file was edited';
  return { ...(d as unknown as ReadDescriptor), renderer: v1 ? null : (d.renderer as string) };
}

/** Whether the bundled key is among the trusted keys (compared as SPKI DER), or accepted as embedded. */
function trustOf(bundledPem: string, opts: VerifyBundleOptions): KeyTrust {
  const der = spkiDer(bundledPem)!;
  if ((opts.trustedKeys ?? []).some((pem) => spkiDer(pem)?.equals(der))) return 'trusted';
  return opts.trustEmbeddedKey ? 'embedded' : 'untrusted';
}

function spkiDer(pem: string): Buffer | null {
  try {
    return createPublicKey(pem).export({ type: 'spki', format: 'der' });
  } catch {
    return null;
  }
}

function untrustedMessage(keyId: string): string {
  return (
    `${KEY_FILE}: the bundle is signed by key ${keyId}, which is not a trusted key (\`a2rl keys trusted\` lists them): anyone can re-sign a bundle with their own key. ` +
    "Pass --pubkey <file> with the signer's public key obtained independently, trust it once with `a2rl keys trust <file>`, or pass --trust-embedded-key to accept the bundle's own key unchecked"
  );
}

/** The key signatures are checked with: the pinned one when given (the bundled key must equal it). */
function readKeys(bundled: Buffer, pinnedPem: string | undefined): { pem: string | null; bundledId: string | null; problems: string[] } {
  const problems: string[] = [];
  const text = bundled.toString('utf8');
  let bundledKey: KeyObject | null = null;
  if (/PRIVATE KEY/.test(text)) problems.push(`${KEY_FILE} holds a private key; a bundle must only carry the public key`);
  else {
    try {
      bundledKey = createPublicKey(text);
      if (bundledKey.export({ type: 'spki', format: 'pem' }).toString() !== text) problems.push(`${KEY_FILE} is not the key's canonical SPKI PEM: the file was edited`);
    } catch (err) {
      problems.push(`${KEY_FILE} is not a public key: ${(err as Error).message}`);
    }
  }
  const bundledId = bundledKey ? keyIdOf(bundledKey) : null;
  if (pinnedPem === undefined) return { pem: bundledKey ? text : null, bundledId, problems };
  let pinned: KeyObject;
  try {
    pinned = createPublicKey(pinnedPem);
  } catch (err) {
    return { pem: null, bundledId, problems: [...problems, `the --pubkey file is not a public key: ${(err as Error).message}`] };
  }
  const der = (k: KeyObject) => k.export({ type: 'spki', format: 'der' });
  if (bundledKey && !der(bundledKey).equals(der(pinned))) {
    problems.push(`${KEY_FILE} (key id ${keyIdOf(bundledKey)}) is not the key given with --pubkey (key id ${keyIdOf(pinned)}): the bundle was signed by another key`);
  }
  return { pem: pinned.export({ type: 'spki', format: 'pem' }).toString(), bundledId, problems };
}

function splitLines(buf: Buffer): Buffer[] {
  const lines: Buffer[] = [];
  let start = 0;
  for (let i = buf.indexOf(0x0a); i !== -1; i = buf.indexOf(0x0a, start)) {
    lines.push(buf.subarray(start, i));
    start = i + 1;
  }
  if (start < buf.length) lines.push(buf.subarray(start));
  return lines;
}

/** Manifest against the events, blobs against the manifest, and no file the layout does not name. */
function checkArtifacts(files: Map<string, Buffer>, events: readonly A2rlEvent[], descriptor: ReadDescriptor): { failures: VerificationFailure[]; reader: BlobReader; included: number; omitted: number } {
  const failures: VerificationFailure[] = [];
  // Older formats carried fewer kinds of blob: their manifest is checked as it was then.
  const expected = expectedManifest(events, descriptor.withCheckpoints, descriptor.format);
  const manifestBytes = files.get(MANIFEST_FILE);
  let listed: ManifestItem[] = [];
  const manifestFailure = (message: string) => failures.push({ check: 'artifact', artifact: MANIFEST_FILE, message });
  if (manifestBytes) {
    try {
      listed = JSON.parse(manifestBytes.toString('utf8')) as ManifestItem[];
      if (!Array.isArray(listed)) throw new Error('not an array');
      if (!canonicalBytes(listed).equals(manifestBytes)) manifestFailure('not in canonical JSON form (RFC 8785): the file was edited');
    } catch (err) {
      manifestFailure(`not a JSON array of blobs: ${(err as Error).message}`);
      listed = [];
    }
  }
  const bySha = new Map(listed.map((m) => [m?.sha256, m]));
  for (const want of expected) {
    const got = bySha.get(want.sha256);
    bySha.delete(want.sha256);
    if (!got) manifestFailure(`does not list ${blobPath(want.sha256)}, referenced at seq ${want.seqs.join(', ')}`);
    else if (canonicalBytes({ ...want, size: want.size ?? got.size }).toString() !== canonicalBytes(got).toString()) {
      manifestFailure(`the entry for ${want.sha256} is not what the events imply (kind ${want.kind}, seqs ${want.seqs.join(', ')}, size ${want.size ?? 'undeclared'}, omitted ${want.omitted})`);
    }
  }
  for (const sha of bySha.keys()) manifestFailure(`lists ${String(sha)}, which no event references`);

  const present = new Map<string, Buffer>();
  const allowed = new Set(FIXED_FILES);
  for (const want of expected) {
    if (want.omitted) continue;
    const name = blobPath(want.sha256);
    allowed.add(name);
    const body = files.get(name);
    const size = want.size ?? listedSize(listed, want.sha256);
    if (!body) {
      failures.push({ check: 'artifact', artifact: name, message: `missing from the bundle (referenced at seq ${want.seqs.join(', ')})` });
      continue;
    }
    const sha256 = createHash('sha256').update(body).digest('hex');
    if (sha256 !== want.sha256) failures.push({ check: 'artifact', artifact: name, message: `content has sha256 ${sha256}: the blob was altered` });
    else if (size !== null && body.length !== size) failures.push({ check: 'artifact', artifact: name, message: `is ${body.length} bytes, ${size} recorded` });
    else present.set(want.sha256, body);
  }
  for (const name of [...files.keys()].sort()) {
    if (!allowed.has(name)) failures.push({ check: 'bundle', artifact: name, message: 'unexpected file: the bundle layout and its events name no such file' });
  }
  const reader: BlobReader = { read: (sha256) => Promise.resolve(present.get(sha256) ?? null) };
  const omitted = expected.filter((m) => m.omitted).length;
  return { failures, reader, included: expected.length - omitted, omitted };
}

function listedSize(listed: ManifestItem[], sha256: string): number | null {
  const size = listed.find((m) => m?.sha256 === sha256)?.size;
  return Number.isSafeInteger(size) ? size! : null;
}
