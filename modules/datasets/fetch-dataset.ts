import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { canonicalJson } from '../ledger/events/canonical-json.js';
import { datasetDir, datasetSpec, sourceUrl, type DatasetFile, type DatasetSpec } from './dataset-registry.js';

/**
 * `manifest.json` in a task's dataset directory. Deterministic: the same files always give the same
 * bytes (canonical JSON, no timestamps, no local paths), so it can be compared across machines.
 */
export interface DatasetManifest {
  task: string;
  complete: true;
  /** Synthetic assets of `a2rl data micro` (modules/datasets/micro), made from `seed` by `generator` (its sources' hash). */
  micro?: true;
  seed?: number;
  generator?: string;
  files: ManifestEntry[];
}

export interface ManifestEntry {
  name: string;
  sha256: string;
  size: number;
  /** null for the base checkpoint's files (imported from a local directory). */
  source: { host: DatasetFile['host']; repo: string; revision: string; path: string; url: string; resolvedCommit: string | null } | null;
  /** `registry`: matched the pinned hash; `recorded`: first fetch, hash recorded (trust on first use); `generated`: a micro asset. */
  check: 'registry' | 'recorded' | 'generated';
}

export interface FetchProgress {
  file: string;
  received: number;
  /** null when the server sent no Content-Length. */
  total: number | null;
}

export interface FetchOptions {
  home: string;
  /** Import from this directory (air-gapped) instead of downloading; same verification. */
  from?: string;
  /** A Hugging Face checkpoint directory to install as `base-model/` (the packs copy it to `models/`). */
  baseModel?: string;
  fetchImpl?: typeof fetch;
  /** Base URL per host (default: `HF_ENDPOINT` or https://huggingface.co, https://raw.githubusercontent.com). */
  endpoints?: Partial<Record<DatasetFile['host'], string>>;
  /** Sent as a bearer token to the Hub for gated repositories (default `HF_TOKEN`). */
  token?: string;
  onProgress?: (p: FetchProgress) => void;
  signal?: AbortSignal;
  /** Replace micro assets (`a2rl data micro`); without it they are kept and the fetch refused. */
  force?: boolean;
}

export interface FetchResult {
  dir: string;
  manifest: DatasetManifest;
  /** Files already present with the recorded hash (not downloaded again). */
  skipped: string[];
  /** The pack needs `base-model/` and none is installed yet (give `baseModel`). */
  baseModelMissing: boolean;
}

export class DatasetFetchError extends Error {
  override readonly name = 'DatasetFetchError';
}

/** Downloaded or imported bytes differ from the pinned or previously recorded hash. */
export class ChecksumMismatchError extends DatasetFetchError {
  constructor(readonly file: string, readonly expected: string, readonly actual: string, readonly pinned: boolean) {
    super(
      `${file}: sha256 ${actual} does not match the ${pinned ? 'registry' : 'hash recorded on first fetch'} (${expected})` +
        (pinned ? '' : '; the upstream file changed, delete the dataset directory to accept the new version'),
    );
  }
}

export const MANIFEST = 'manifest.json';

/** Reads a task's manifest, or null when the dataset was never fetched completely. */
export async function readManifest(dir: string): Promise<DatasetManifest | null> {
  let text: string;
  try {
    text = await readFile(path.join(dir, MANIFEST), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const manifest = JSON.parse(text) as DatasetManifest;
  return manifest.complete === true && Array.isArray(manifest.files) ? manifest : null;
}

/**
 * Fetches (or imports with `from`) a task's files into `$A2RL_HOME/datasets/<task>/`. Each file is
 * written to a temporary name, hashed while written, verified, then renamed into place; the manifest
 * is written last, so a manifest means every file listed is complete and verified.
 */
export async function fetchDataset(task: string | DatasetSpec, options: FetchOptions): Promise<FetchResult> {
  const spec = typeof task === 'string' ? datasetSpec(task) : task;
  const dir = datasetDir(options.home, spec.task);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  let previous = await readManifest(dir);
  if (previous?.micro) {
    if (!options.force) throw new DatasetFetchError(`${dir} holds micro assets (\`a2rl data micro ${spec.task}\`, seed ${previous.seed}): add --force to replace them with the real dataset`);
    // None of their hashes or files carry over to the real dataset.
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    previous = null;
  }
  const entries: ManifestEntry[] = [];
  const skipped: string[] = [];
  for (const file of spec.files) {
    const known = previous?.files.find((e) => e.name === file.name);
    const expected = file.sha256 ?? known?.sha256 ?? null;
    const target = path.join(dir, file.name);
    if (known && expected === known.sha256 && (await sha256OfFile(target)) === known.sha256) {
      entries.push(known);
      skipped.push(file.name);
      continue;
    }
    const got = options.from ? await importFile(file, options.from, target, options) : await downloadFile(file, target, options);
    if (expected && got.sha256 !== expected) {
      await rm(got.temp, { force: true });
      throw new ChecksumMismatchError(file.name, expected, got.sha256, file.sha256 !== null);
    }
    await rename(got.temp, target);
    entries.push({
      name: file.name, sha256: got.sha256, size: got.size,
      source: { host: file.host, repo: file.repo, revision: file.revision, path: file.path, url: sourceUrl(file), resolvedCommit: got.commit ?? known?.source?.resolvedCommit ?? null },
      check: file.sha256 ? 'registry' : 'recorded',
    });
  }
  if (spec.baseModel && options.baseModel) entries.push(...(await installBaseModel(options.baseModel, dir)));
  else if (spec.baseModel) entries.push(...(previous?.files.filter((e) => e.name.startsWith(`${BASE_MODEL}/`)) ?? []));
  const manifest: DatasetManifest = { task: spec.task, complete: true, files: entries };
  await writeAtomic(path.join(dir, MANIFEST), `${canonicalJson(manifest)}\n`);
  const baseModelMissing = !!spec.baseModel && !entries.some((e) => e.name === `${BASE_MODEL}/config.json`);
  return { dir, manifest, skipped, baseModelMissing };
}

/** Directory of the base checkpoint inside a task's dataset directory (read by the task packs). */
export const BASE_MODEL = 'base-model';

/** Copies a checkpoint directory to `<dir>/base-model/` through a temporary directory, then swaps it in. */
async function installBaseModel(source: string, dir: string): Promise<ManifestEntry[]> {
  const info = await stat(source).catch(() => null);
  if (!info?.isDirectory()) throw new DatasetFetchError(`--base-model ${source} is not a directory`);
  const files = (await readdir(source, { recursive: true, withFileTypes: true })).filter((d) => d.isFile())
    .map((d) => path.relative(source, path.join(d.parentPath, d.name))).sort();
  if (!files.includes('config.json')) throw new DatasetFetchError(`--base-model ${source} has no config.json: give a Hugging Face checkpoint directory`);
  const staging = `${path.join(dir, BASE_MODEL)}.partial-${randomBytes(4).toString('hex')}`;
  const entries: ManifestEntry[] = [];
  try {
    for (const rel of files) {
      const target = path.join(staging, rel);
      await mkdir(path.dirname(target), { recursive: true });
      const staged = await writeStream(target, createReadStream(path.join(source, rel)), () => undefined);
      await rename(staged.temp, target);
      entries.push({ name: `${BASE_MODEL}/${rel.split(path.sep).join('/')}`, sha256: staged.sha256, size: staged.size, source: null, check: 'recorded' });
    }
    await rm(path.join(dir, BASE_MODEL), { recursive: true, force: true });
    await rename(staging, path.join(dir, BASE_MODEL));
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return entries;
}

interface Staged { temp: string; sha256: string; size: number; commit?: string | null }

const tempName = (target: string) => `${target}.partial-${randomBytes(4).toString('hex')}`;

async function downloadFile(file: DatasetFile, target: string, options: FetchOptions): Promise<Staged> {
  const url = sourceUrl(file, options.endpoints?.[file.host] ?? (file.host === 'hf' ? process.env.HF_ENDPOINT?.trim() || undefined : undefined));
  const token = file.host === 'hf' ? (options.token ?? process.env.HF_TOKEN) : undefined;
  let res: Response;
  try {
    res = await (options.fetchImpl ?? fetch)(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, redirect: 'follow', signal: options.signal });
  } catch (err) {
    throw new DatasetFetchError(`${file.name}: cannot reach ${url}: ${err instanceof Error ? err.message : String(err)} (offline? fetch elsewhere and use --from <dir>)`);
  }
  if (!res.ok || !res.body) {
    const why = res.status === 401 || res.status === 403 ? ' (gated repository? set HF_TOKEN)' : '';
    throw new DatasetFetchError(`${file.name}: GET ${url} answered ${res.status} ${res.statusText}${why}`);
  }
  const length = Number(res.headers.get('content-length'));
  const total = Number.isFinite(length) && length > 0 ? length : null;
  let received = 0;
  const staged = await writeStream(target, res.body as unknown as AsyncIterable<Uint8Array>, (n) => {
    received = n;
    options.onProgress?.({ file: file.name, received, total });
  }, file.gunzip);
  if (total !== null && received !== total) {
    await rm(staged.temp, { force: true });
    throw new DatasetFetchError(`${file.name}: download truncated (${received} of ${total} bytes)`);
  }
  return { ...staged, commit: res.headers.get('x-repo-commit') };
}

/** Accepts `<from>/<name>` or the repository layout `<from>/<path>` (what `hf download` writes). */
async function importFile(file: DatasetFile, from: string, target: string, options: FetchOptions): Promise<Staged> {
  const candidates = [path.join(from, file.name), path.join(from, file.path)];
  for (const [i, source] of candidates.entries()) {
    const info = await stat(source).catch(() => null);
    if (!info?.isFile()) continue;
    // Under its repository path the file is as served (maybe compressed); under its target name, as stored.
    return writeStream(target, createReadStream(source), (received) => options.onProgress?.({ file: file.name, received, total: info.size }), i === 1 && file.gunzip);
  }
  throw new DatasetFetchError(`${file.name}: not found in ${from} (looked for ${candidates.join(' and ')}); download ${sourceUrl(file)}`);
}

/** Streams `input` (progress counts input bytes) into a temporary file, hashing what is stored. */
async function writeStream(target: string, input: AsyncIterable<Uint8Array>, progress: (received: number) => void, gunzip = false): Promise<Omit<Staged, 'commit'>> {
  const temp = tempName(target);
  const hash = createHash('sha256');
  const handle = await open(temp, 'wx', 0o600);
  let size = 0;
  async function* counted() {
    let received = 0;
    for await (const chunk of input) {
      received += chunk.byteLength;
      progress(received);
      yield chunk;
    }
  }
  const chunks: AsyncIterable<Uint8Array> = gunzip ? Readable.from(counted()).pipe(createGunzip()) : counted();
  try {
    for await (const chunk of chunks) {
      await handle.write(chunk);
      hash.update(chunk);
      size += chunk.byteLength;
    }
    await handle.sync();
  } catch (err) {
    await handle.close();
    await rm(temp, { force: true });
    throw err instanceof DatasetFetchError ? err : new DatasetFetchError(`${path.basename(target)}: ${err instanceof Error ? err.message : String(err)}`);
  }
  await handle.close();
  return { temp, sha256: hash.digest('hex'), size };
}

async function writeAtomic(target: string, text: string): Promise<void> {
  const temp = tempName(target);
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, target);
}

/** A file's sha256 (hex), or null when it does not exist. */
export async function sha256OfFile(file: string): Promise<string | null> {
  const hash = createHash('sha256');
  try {
    for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  return hash.digest('hex');
}
