import { realpath } from 'node:fs/promises';
import { relative, sep } from 'node:path';
import { DirCursor, HeldDir } from '../workspace-fs/held-dir.js';
import { forEachLimit, hashFile, sameFingerprint, walkTops, type Fingerprint, type Found, type FoundInstead, type Hashed } from '../workspace-fs/workspace-scan.js';
import type { EventData } from '../ledger/events/catalog.js';
import type { SandboxKind } from '../sandbox/sandbox.js';
import type { ManifestEntry, WorkspaceLayout } from '../workspace-fs/layout.js';

/**
 * Integrity of the read-only world: the files under `<workspace>/data` and `<workspace>/models`
 * against the manifest recorded in WorkspacePrepared. The agent is an adversary that may have
 * escaped the read-only binds, so nothing here follows a link: every directory and file is opened
 * through its parent's descriptor, refusing links (modules/workspace-fs/held-dir.ts), entries are
 * lstat'ed inside the already-open directory, and files are hashed from such descriptors.
 *
 * Two strengths. `full` re-hashes every file (tens of GB for paper tasks). Otherwise a file whose
 * stat fingerprint (dev, inode, size, mtime, ctime, to the nanosecond) equals the baseline's keeps
 * the baseline's hash: ctime cannot be set back from user space, so a rewrite, a chmod, a new link or
 * a rename-over all show. That is the check before each grading, and the end-of-run check of a
 * sandboxed agent; an unsandboxed one (`sandbox none`, running as the harness's own user) gets the
 * full check at the end (docs/security.md, "Integrity of the read-only world").
 */

export type { Fingerprint, FoundInstead } from '../workspace-fs/workspace-scan.js';

/** At most this many differences are listed in one event; the rest are counted. */
export const MAX_DIFFERENCES = 100;
/** The listed differences stay under this many bytes of JSON, so the event fits the ledger's 256 KiB limit whatever the paths. */
const DIFFERENCES_BYTES = 128 * 1024;
/** Files hashed at once: enough to keep a fast disk busy, few enough for the threadpool's other users. */
const HASH_CONCURRENCY = 4;


export interface IntegrityDifference {
  /** Workspace-relative, posix separators (`data/...`, `models/...`). */
  path: string;
  /** The manifest's sha256; null for a path the manifest does not list (added). */
  expected: string | null;
  /** The content's sha256 now; null when no regular file could be read there (missing, or `found`). */
  actual: string | null;
  /** Set when something other than a readable regular file stands at the path. */
  found?: FoundInstead;
}


/** Per path, the fingerprint a file had when it was hashed, and that hash. JSON-serialisable: it can be kept across a harness restart. */
export interface IntegrityBaseline {
  files: Record<string, Fingerprint & { sha256: string }>;
}

export interface IntegrityResult {
  ok: boolean;
  /** Paths compared: every manifest entry plus every file, link or special file found that the manifest does not list. */
  checked: number;
  /** Sorted by path, at most MAX_DIFFERENCES (fewer when the paths are very long). */
  differences: IntegrityDifference[];
  /** Differences found beyond those listed. */
  moreDifferences?: number;
  /** The baseline for the next cheap check. */
  baseline: IntegrityBaseline;
}

export interface IntegrityOptions {
  /** Re-hash every file (true), or only those whose fingerprint differs from `previous` (false). */
  full: boolean;
  /** Without it, a cheap check hashes everything. */
  previous?: IntegrityBaseline;
}


/**
 * Compares `data/` and `models/` of the workspace with the manifest. Fails closed: whatever cannot be
 * listed, stat'ed or read is a difference. Throws only when the workspace root itself cannot be opened.
 */
export async function checkWorkspaceIntegrity(layout: WorkspaceLayout, manifest: readonly ManifestEntry[], opts: IntegrityOptions): Promise<IntegrityResult> {
  const root = layout.root;
  const tops = [layout.dataDir, layout.modelsDir].map((dir) => toPosix(relative(root, dir)));
  assertManifest(manifest, tops);
  const rootDir = await HeldDir.open(await realpath(root));
  try {
    return await compare(rootDir, tops, manifest, opts);
  } finally {
    await rootDir.close();
  }
}

async function compare(rootDir: HeldDir, tops: readonly string[], manifest: readonly ManifestEntry[], opts: IntegrityOptions): Promise<IntegrityResult> {
  const found = await walkTops(rootDir, tops);
  const previous = opts.full ? {} : (opts.previous?.files ?? {});
  const baseline: IntegrityBaseline = { files: {} };
  // One cursor per hashing worker: paths come in sorted order, so each directory is opened about once.
  const cursors = Array.from({ length: HASH_CONCURRENCY }, () => new DirCursor(rootDir));
  const hash = async (path: string, worker: number): Promise<Hashed> => {
    const hashed = await hashFile(cursors[worker], path);
    if (hashed.sha256 !== null) baseline.files[path] = { ...hashed.fingerprint, sha256: hashed.sha256 };
    return hashed;
  };
  try {
    return await judge(found, manifest, previous, baseline, hash);
  } finally {
    for (const cursor of cursors) await cursor.close();
  }
}

/** What was found against the manifest: unchanged fingerprints keep their hash, the rest are hashed (`hash`), added files listed. */
async function judge(
  found: Map<string, Found>,
  manifest: readonly ManifestEntry[],
  previous: IntegrityBaseline['files'],
  baseline: IntegrityBaseline,
  hash: (path: string, worker: number) => Promise<Hashed>,
): Promise<IntegrityResult> {
  const differences: IntegrityDifference[] = [];
  const toHash: ManifestEntry[] = [];
  for (const entry of manifest) {
    const at = found.get(entry.path);
    if (!at) differences.push({ path: entry.path, expected: entry.sha256, actual: null });
    else if (at.kind !== 'file') differences.push({ path: entry.path, expected: entry.sha256, actual: null, found: at.kind });
    else {
      const known = previous[entry.path];
      if (known && sameFingerprint(known, at.fingerprint)) {
        baseline.files[entry.path] = known;
        if (known.sha256 !== entry.sha256) differences.push({ path: entry.path, expected: entry.sha256, actual: known.sha256 });
      } else toHash.push(entry);
    }
  }
  await forEachLimit(toHash, HASH_CONCURRENCY, async (entry, worker) => {
    const hashed = await hash(entry.path, worker);
    if (hashed.sha256 !== entry.sha256) differences.push({ path: entry.path, expected: entry.sha256, actual: hashed.sha256, ...foundOf(hashed) });
  });

  const listed = new Set(manifest.map((e) => e.path));
  let extras = 0;
  for (const [path, at] of found) {
    if (listed.has(path) || at.kind === 'directory') continue; // directories are not compared, their files are
    extras += 1;
    differences.push(at.kind === 'file' ? { path, expected: null, actual: null } : { path, expected: null, actual: null, found: at.kind });
  }

  const shown = capDifferences(differences.sort(byPath));
  // An added file is hashed only when it is listed: the count is all the rest needs.
  const addedFiles = shown.filter((d) => d.expected === null && d.found === undefined);
  await forEachLimit(addedFiles, HASH_CONCURRENCY, async (d, worker) => {
    const at = found.get(d.path) as Extract<Found, { kind: 'file' }>;
    const known = previous[d.path];
    if (known && sameFingerprint(known, at.fingerprint)) {
      baseline.files[d.path] = known;
      d.actual = known.sha256;
    } else {
      const hashed = await hash(d.path, worker);
      d.actual = hashed.sha256;
      Object.assign(d, foundOf(hashed));
    }
  });

  const more = differences.length - shown.length;
  return {
    ok: differences.length === 0,
    checked: manifest.length + extras,
    differences: shown,
    ...(more > 0 ? { moreDifferences: more } : {}),
    baseline,
  };
}

/**
 * The baseline right after preparation, before the agent starts: every manifest file's fingerprint
 * with the manifest's hash. Nothing is hashed here: the preparation archives every file right after
 * (the artifact store reads and checks each against its manifest hash, failing the preparation on a
 * mismatch), with these fingerprints already taken. A path that is not a regular file is left out,
 * so the next check hashes (and reports) it.
 */
export async function captureIntegrityBaseline(layout: WorkspaceLayout, manifest: readonly ManifestEntry[]): Promise<IntegrityBaseline> {
  const tops = [layout.dataDir, layout.modelsDir].map((dir) => toPosix(relative(layout.root, dir)));
  assertManifest(manifest, tops);
  const rootDir = await HeldDir.open(await realpath(layout.root));
  const found = await walkTops(rootDir, tops).finally(() => rootDir.close());
  const files: IntegrityBaseline['files'] = {};
  for (const entry of manifest) {
    const at = found.get(entry.path);
    if (at?.kind === 'file' && at.fingerprint.size === String(entry.size)) files[entry.path] = { ...at.fingerprint, sha256: entry.sha256 };
  }
  return { files };
}

export type IntegrityEventData = EventData<'WorkspaceIntegrityChecked'>;

export interface IntegrityEventContext {
  phase: 'grading' | 'end' | 'resume';
  /** The submission about to be graded (phase `grading`). */
  submissionId?: string;
  full: boolean;
  /** When the check finished: the state it describes. */
  observedAt: Date;
}

/**
 * A check's result as the WorkspaceIntegrityChecked payload (the baseline stays with the harness).
 * The verdict (`ok`) is not written: it is whether `differences` is empty, which readers compute.
 */
export function integrityEventData(result: IntegrityResult, at: IntegrityEventContext): IntegrityEventData {
  return {
    phase: at.phase,
    ...(at.submissionId !== undefined ? { submissionId: at.submissionId } : {}),
    full: at.full,
    checked: result.checked,
    differences: result.differences.map((d) => ({ ...d })),
    ...(result.moreDifferences ? { moreDifferences: result.moreDifferences } : {}),
    observedAt: at.observedAt.toISOString(),
  };
}

/**
 * The cheap check before a grading: stat-compared against `baseline` (from captureIntegrityBaseline or
 * the previous check), re-hashing only what changed. Record `data`; keep `baseline` for the next one.
 */
export async function integrityBeforeGrading(
  layout: WorkspaceLayout,
  manifest: readonly ManifestEntry[],
  baseline: IntegrityBaseline | undefined,
  submissionId?: string,
): Promise<{ data: IntegrityEventData; baseline: IntegrityBaseline }> {
  const result = await checkWorkspaceIntegrity(layout, manifest, { full: false, previous: baseline });
  return { data: integrityEventData(result, { phase: 'grading', submissionId, full: false, observedAt: new Date() }), baseline: result.baseline };
}

/**
 * The check at the end of the run (or of a resumed run's workspace found on disk). With `previous`
 * (the last check's baseline, or the one captured at preparation) it is stat-compared like the check
 * before a grading, re-hashing only files whose fingerprint changed: pass it only where the agent
 * could not reach the harness nor set a file's ctime (the bwrap sandbox; endCheckComparesStat).
 * Without it every file is re-hashed. `full` in `data` says which. Record `data`.
 */
export async function integrityAtEnd(
  layout: WorkspaceLayout,
  manifest: readonly ManifestEntry[],
  phase: 'end' | 'resume' = 'end',
  previous?: IntegrityBaseline,
): Promise<{ data: IntegrityEventData; baseline: IntegrityBaseline }> {
  const full = previous === undefined;
  const result = await checkWorkspaceIntegrity(layout, manifest, { full, previous });
  return { data: integrityEventData(result, { phase, full, observedAt: new Date() }), baseline: result.baseline };
}

/**
 * Whether the end-of-run check may trust unchanged fingerprints: only when the agent ran in the bwrap
 * sandbox (its own uid, or a user namespace; data/ and models/ read-only binds). Unsandboxed it runs
 * as the harness's user, which can reach the harness itself: every file is re-hashed.
 */
export function endCheckComparesStat(sandbox: SandboxKind): boolean {
  return sandbox === 'bwrap';
}

// ---- helpers ----

/** The first differences, at most MAX_DIFFERENCES and DIFFERENCES_BYTES of JSON. */
function capDifferences(sorted: IntegrityDifference[]): IntegrityDifference[] {
  const shown: IntegrityDifference[] = [];
  let bytes = 0;
  for (const d of sorted) {
    // Sized as it will be recorded: a hash where `actual` may still be filled in.
    bytes += Buffer.byteLength(JSON.stringify({ ...d, actual: 'f'.repeat(64) }));
    if (shown.length === MAX_DIFFERENCES || bytes > DIFFERENCES_BYTES) break;
    shown.push(d);
  }
  return shown;
}

function foundOf(hashed: Hashed): { found?: FoundInstead } {
  return hashed.sha256 === null && hashed.found ? { found: hashed.found } : {};
}

/** Manifest paths are ours (materializeTask), but a path that could leave data/ or models/ is a bug worth stopping on. */
function assertManifest(manifest: readonly ManifestEntry[], tops: readonly string[]): void {
  for (const { path } of manifest) {
    const parts = path.split('/');
    if (!tops.includes(parts[0]) || parts.length < 2 || parts.some((p) => p === '' || p === '.' || p === '..')) {
      throw new Error(`manifest path "${path}" is not a plain path under ${tops.join('/ or ')}/`);
    }
  }
}

const byPath = (a: IntegrityDifference, b: IntegrityDifference) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);
const toPosix = (p: string) => p.split(sep).join('/');
