import { mkdtempSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { datasetSpec, sourceUrl, type DatasetSpec } from './dataset-registry.js';
import { ChecksumMismatchError, DatasetFetchError, fetchDataset, readManifest, type FetchProgress } from './fetch-dataset.js';
import { sha } from '../../test/testing/helpers.js';

// Fixture bytes written here (never real dataset content), served by a local Hub stand-in.
const TRAIN = Buffer.from('{"question":"1+1?","answer":"#### 2"}\n'.repeat(2000));
const TEST = Buffer.from('{"question":"2+2?","answer":"#### 4"}\n');
const TEST_GZ = gzipSync(TEST);

const spec = (trainSha: string | null): DatasetSpec => ({
  task: 'fixture',
  files: [
    { name: 'train.jsonl', host: 'hf', repo: 'acme/fixture', revision: 'main', path: 'data/train.jsonl', sha256: trainSha, use: 'visible' },
    { name: 'test.jsonl', host: 'github', repo: 'acme/fixture', revision: 'v1', path: 'data/test.jsonl.gz', gunzip: true, sha256: null, use: 'private' },
  ],
  baseModel: true,
});

let server: Server;
let endpoint: string;
let endpoints: { hf: string; github: string };
let served: Record<string, Buffer>;
let requests: string[];
let home: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    requests.push(req.url ?? '');
    const body = served[req.url ?? ''];
    if (!body) return void res.writeHead(404).end('not found');
    res.writeHead(200, { 'content-length': body.length, 'x-repo-commit': 'c0ffee' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  endpoints = { hf: endpoint, github: `${endpoint}/gh` };
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

beforeEach(() => {
  served = { '/datasets/acme/fixture/resolve/main/data/train.jsonl': TRAIN, '/gh/acme/fixture/v1/data/test.jsonl.gz': TEST_GZ };
  requests = [];
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-datasets-'));
});
afterEach(() => rm(home, { recursive: true, force: true }));

describe('fetchDataset', () => {
  it('downloads every file with progress, gunzips, verifies a pinned hash and writes a deterministic manifest', async () => {
    const progress: FetchProgress[] = [];
    const result = await fetchDataset(spec(sha(TRAIN)), { home, endpoints, onProgress: (p) => progress.push(p) });

    const dir = path.join(home, 'datasets', 'fixture');
    expect(result.dir).toBe(dir);
    expect(await readFile(path.join(dir, 'train.jsonl'))).toEqual(TRAIN);
    expect(await readFile(path.join(dir, 'test.jsonl'))).toEqual(TEST);
    expect((await readdir(dir)).sort()).toEqual(['manifest.json', 'test.jsonl', 'train.jsonl']); // no temp files left
    const last = progress.filter((p) => p.file === 'train.jsonl').at(-1);
    expect(last).toEqual({ file: 'train.jsonl', received: TRAIN.length, total: TRAIN.length });

    const manifest = await readManifest(dir);
    expect(manifest).toEqual({
      task: 'fixture', complete: true,
      files: [
        { name: 'train.jsonl', sha256: sha(TRAIN), size: TRAIN.length, check: 'registry',
          source: { host: 'hf', repo: 'acme/fixture', revision: 'main', path: 'data/train.jsonl', url: 'https://huggingface.co/datasets/acme/fixture/resolve/main/data/train.jsonl', resolvedCommit: 'c0ffee' } },
        { name: 'test.jsonl', sha256: sha(TEST), size: TEST.length, check: 'recorded',
          source: { host: 'github', repo: 'acme/fixture', revision: 'v1', path: 'data/test.jsonl.gz', url: 'https://raw.githubusercontent.com/acme/fixture/v1/data/test.jsonl.gz', resolvedCommit: 'c0ffee' } },
      ],
    });
    // No clock value and no local path: the manifest is the same on every machine.
    const text = await readFile(path.join(dir, 'manifest.json'), 'utf8');
    expect(text).not.toContain(home);
    expect(text).not.toMatch(/20\d\d-\d\d-\d\d/);
    expect(result.baseModelMissing).toBe(true);
  });

  it('installs a base checkpoint directory as base-model/ and keeps it on later fetches', async () => {
    const ckpt = path.join(home, 'ckpt');
    await mkdir(path.join(ckpt, 'sub'), { recursive: true });
    await writeFile(path.join(ckpt, 'config.json'), '{}');
    await writeFile(path.join(ckpt, 'sub', 'weights.bin'), 'w');
    const first = await fetchDataset(spec(null), { home, endpoints, baseModel: ckpt });
    expect(first.baseModelMissing).toBe(false);
    expect(first.manifest.files.slice(2).map((f) => [f.name, f.size, f.source])).toEqual([['base-model/config.json', 2, null], ['base-model/sub/weights.bin', 1, null]]);
    expect(await readFile(path.join(home, 'datasets', 'fixture', 'base-model', 'sub', 'weights.bin'), 'utf8')).toBe('w');
    const again = await fetchDataset(spec(null), { home, endpoints });
    expect(again.manifest).toEqual(first.manifest);
    await rm(path.join(ckpt, 'config.json'));
    await expect(fetchDataset(spec(null), { home, endpoints, baseModel: ckpt })).rejects.toThrow(/no config\.json/);
  });

  it('refuses bytes that do not match the pinned hash and leaves nothing behind', async () => {
    await expect(fetchDataset(spec('0'.repeat(64)), { home, endpoints })).rejects.toThrow(ChecksumMismatchError);
    const dir = path.join(home, 'datasets', 'fixture');
    expect(await readdir(dir)).toEqual([]);
    expect(await readManifest(dir)).toBeNull();
  });

  it('skips files already present with the recorded hash and refuses a changed upstream file afterwards', async () => {
    await fetchDataset(spec(null), { home, endpoints });
    requests = [];
    const again = await fetchDataset(spec(null), { home, endpoints });
    expect(again.skipped).toEqual(['train.jsonl', 'test.jsonl']);
    expect(requests).toEqual([]);

    await rm(path.join(home, 'datasets', 'fixture', 'test.jsonl'));
    served['/gh/acme/fixture/v1/data/test.jsonl.gz'] = gzipSync('changed upstream\n');
    await expect(fetchDataset(spec(null), { home, endpoints })).rejects.toThrow(/hash recorded on first fetch/);
  });

  it('imports from a directory (by target name, or repository layout still compressed) with the same verification', async () => {
    const from = path.join(home, 'offline');
    await mkdir(path.join(from, 'data'), { recursive: true });
    await writeFile(path.join(from, 'train.jsonl'), TRAIN);
    await writeFile(path.join(from, 'data', 'test.jsonl.gz'), TEST_GZ);
    const result = await fetchDataset(spec(sha(TRAIN)), { home, from, fetchImpl: () => Promise.reject(new Error('no network')) });
    expect(result.manifest.files.map((f) => [f.name, f.sha256, f.source?.resolvedCommit])).toEqual([['train.jsonl', sha(TRAIN), null], ['test.jsonl', sha(TEST), null]]);

    await writeFile(path.join(from, 'train.jsonl'), 'tampered');
    await rm(path.join(home, 'datasets'), { recursive: true });
    await expect(fetchDataset(spec(sha(TRAIN)), { home, from })).rejects.toThrow(ChecksumMismatchError);
    await rm(path.join(from, 'train.jsonl'));
    await expect(fetchDataset(spec(sha(TRAIN)), { home, from })).rejects.toThrow(/not found in .*offline/);
  });

  it('reports HTTP errors, truncated downloads and unreachable hosts as DatasetFetchError', async () => {
    delete served['/gh/acme/fixture/v1/data/test.jsonl.gz'];
    await expect(fetchDataset(spec(null), { home, endpoints })).rejects.toThrow(/test\.jsonl: GET .* answered 404/);

    const truncated: typeof fetch = async () => new Response(TEST.subarray(0, 5), { headers: { 'content-length': String(TEST.length) } });
    await expect(fetchDataset(spec(null), { home, endpoints, fetchImpl: truncated })).rejects.toThrow(/truncated/);

    const offline: typeof fetch = () => Promise.reject(new Error('getaddrinfo ENOTFOUND'));
    await expect(fetchDataset(spec(null), { home, endpoints, fetchImpl: offline })).rejects.toThrow(DatasetFetchError);
    await expect(fetchDataset(spec(null), { home, endpoints, fetchImpl: offline })).rejects.toThrow(/--from <dir>/);
  });

  it('keeps micro assets (a2rl data micro) unless forced, and then leaves none of their files or hashes', async () => {
    const dir = path.join(home, 'datasets', 'fixture');
    await mkdir(path.join(dir, 'base-model'), { recursive: true });
    await writeFile(path.join(dir, 'train.jsonl'), 'micro rows\n');
    await writeFile(path.join(dir, 'base-model', 'config.json'), '{}');
    const micro = { task: 'fixture', complete: true, micro: true, seed: 7, generator: 'g', files: [{ name: 'train.jsonl', sha256: sha(Buffer.from('micro rows\n')), size: 11, source: null, check: 'generated' }] };
    await writeFile(path.join(dir, 'manifest.json'), JSON.stringify(micro));

    await expect(fetchDataset(spec(null), { home, endpoints })).rejects.toThrow(/micro assets .*seed 7.*--force/);
    expect(requests).toEqual([]);
    expect(await readManifest(dir)).toMatchObject({ micro: true });

    const result = await fetchDataset(spec(null), { home, endpoints, force: true });
    expect(result.manifest.micro).toBeUndefined();
    expect(result.manifest.files.map((f) => [f.name, f.sha256])).toEqual([['train.jsonl', sha(TRAIN)], ['test.jsonl', sha(TEST)]]);
    expect(result.baseModelMissing).toBe(true);
    expect((await readdir(dir)).sort()).toEqual(['manifest.json', 'test.jsonl', 'train.jsonl']);
  });

  it('installs only the base model for a task whose data comes with its environment server (webshop)', async () => {
    const ckpt = path.join(home, 'ckpt-webshop');
    await mkdir(ckpt, { recursive: true });
    await writeFile(path.join(ckpt, 'config.json'), '{}');
    const result = await fetchDataset('webshop', { home, baseModel: ckpt, fetchImpl: () => Promise.reject(new Error('no network needed')) });
    expect(result.manifest.files.map((f) => f.name)).toEqual(['base-model/config.json']);
    expect(result.baseModelMissing).toBe(false);
    expect(datasetSpec('webshop').environmentData).toMatch(/setup\.sh/);
    expect(datasetSpec('alfworld').environmentData).toMatch(/alfworld-download.*ALFWORLD_DATA/);
  });
});

describe('dataset registry', () => {
  it('builds download URLs with the pinned revision per host', () => {
    expect(sourceUrl(datasetSpec('gsm8k').files[0])).toBe('https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/train.jsonl');
    expect(sourceUrl(datasetSpec('deepsearchqa').files[0])).toBe('https://huggingface.co/datasets/google/deepsearchqa/resolve/main/DSQA-full.csv');
    expect(sourceUrl(datasetSpec('deepsearchqa').files[0], 'http://mirror:1/')).toBe('http://mirror:1/datasets/google/deepsearchqa/resolve/main/DSQA-full.csv');
    expect(() => datasetSpec('nope')).toThrow(/no dataset is registered for task "nope"/);
  });
});
