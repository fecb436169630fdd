import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { chmod, mkdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { validatePayload } from '../ledger/events/envelope.js';
import { canonicalBytes } from '../ledger/events/canonical-json.js';
import { fakeTask } from './testing/fake-task.js';
import { prepareWorkspace } from './workspace.js';
import { workspaceLayout, type ManifestEntry, type WorkspaceLayout } from '../workspace-fs/layout.js';
import { IntegrityChecks } from './steps/integrity.js';
import type { EventData } from '../ledger/events/catalog.js';
import {
  captureIntegrityBaseline,
  checkWorkspaceIntegrity,
  integrityAtEnd,
  integrityBeforeGrading,
  integrityEventData,
  MAX_DIFFERENCES,
  type IntegrityBaseline,
} from './workspace-integrity.js';
import { sha } from '../../test/testing/helpers.js';
import { integrityOk } from '../../projections/derived-facts.js';


const FILES: Record<string, string> = {
  'data/train.jsonl': '{"q":"1+1","a":"2"}\n',
  'data/splits/dev.jsonl': '{"q":"2+2","a":"4"}\n',
  'models/tiny-base/config.json': '{"layers":2}\n',
  'models/tiny-base/weights.bin': 'w'.repeat(4096),
};

let home: string;
let layout: WorkspaceLayout;
let manifest: ManifestEntry[];

async function put(path: string, body: string | Buffer): Promise<void> {
  await mkdir(dirname(join(layout.root, path)), { recursive: true });
  await writeFile(join(layout.root, path), body);
}

beforeEach(async () => {
  home = mkdtempSync(join(tmpdir(), 'a2rl-integrity-'));
  layout = workspaceLayout(join(home, 'workspaces'), 'run-1', 'tiny-base');
  for (const [path, body] of Object.entries(FILES)) await put(path, body);
  await mkdir(layout.codeDir);
  manifest = Object.entries(FILES)
    .map(([path, body]) => ({ path, sha256: sha(body), size: Buffer.byteLength(body) }))
    .sort((a, b) => (a.path < b.path ? -1 : 1));
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

const full = () => checkWorkspaceIntegrity(layout, manifest, { full: true });
const cheap = (previous: IntegrityBaseline) => checkWorkspaceIntegrity(layout, manifest, { full: false, previous });

describe('checkWorkspaceIntegrity', () => {
  it('finds a freshly prepared workspace intact, cheaply and in full', async () => {
    const prepared = await prepareWorkspace({
      workspacesRoot: join(home, 'prepared'),
      taskCacheDir: join(home, 'tasks'),
      runId: 'run-p',
      task: fakeTask(),
      instructions: 'go\n',
    });
    const baseline = await captureIntegrityBaseline(prepared.layout, prepared.dataManifest);
    expect(Object.keys(baseline.files).sort()).toEqual(prepared.dataManifest.map((e) => e.path));
    const quick = await checkWorkspaceIntegrity(prepared.layout, prepared.dataManifest, { full: false, previous: baseline });
    const hashed = await checkWorkspaceIntegrity(prepared.layout, prepared.dataManifest, { full: true });
    for (const result of [quick, hashed]) {
      expect(result).toMatchObject({ ok: true, checked: prepared.dataManifest.length, differences: [] });
      expect(result.moreDifferences).toBeUndefined();
    }
    // Files outside data/ and models/ are not the read-only world.
    await writeFile(join(prepared.layout.codeDir, 'train.py'), 'print(1)\n');
    expect((await checkWorkspaceIntegrity(prepared.layout, prepared.dataManifest, { full: true })).ok).toBe(true);
  });

  it('reports changed, missing and added files with expected and actual hashes, sorted by path', async () => {
    await writeFile(join(layout.root, 'data/train.jsonl'), 'poisoned\n');
    await rm(join(layout.root, 'models/tiny-base/config.json'));
    await put('data/splits/test.jsonl', 'held-out?\n');
    const result = await full();
    expect(result.ok).toBe(false);
    expect(result.checked).toBe(manifest.length + 1);
    expect(result.differences).toEqual([
      { path: 'data/splits/test.jsonl', expected: null, actual: sha('held-out?\n') },
      { path: 'data/train.jsonl', expected: sha(FILES['data/train.jsonl']), actual: sha('poisoned\n') },
      { path: 'models/tiny-base/config.json', expected: sha(FILES['models/tiny-base/config.json']), actual: null },
    ]);
  });

  it('never follows a link: a symlink to identical content is a difference, and so is a linked directory', async () => {
    const outside = join(home, 'outside');
    await mkdir(join(outside, 'splits'), { recursive: true });
    await writeFile(join(outside, 'train.jsonl'), FILES['data/train.jsonl']);
    await writeFile(join(outside, 'splits', 'dev.jsonl'), FILES['data/splits/dev.jsonl']);
    await rm(join(layout.root, 'data/train.jsonl'));
    await symlink(join(outside, 'train.jsonl'), join(layout.root, 'data/train.jsonl'));
    await rm(join(layout.root, 'data/splits'), { recursive: true });
    await symlink(join(outside, 'splits'), join(layout.root, 'data/splits'));
    expect((await full()).differences).toEqual([
      { path: 'data/splits', expected: null, actual: null, found: 'symlink' },
      { path: 'data/splits/dev.jsonl', expected: sha(FILES['data/splits/dev.jsonl']), actual: null },
      { path: 'data/train.jsonl', expected: sha(FILES['data/train.jsonl']), actual: null, found: 'symlink' },
    ]);
  });

  it('never opens or lists the target of a directory swapped for a link while it checks (inotify on the target)', async () => {
    if (spawnSync('sh', ['-c', 'command -v python3']).status !== 0) return;
    const outside = join(home, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'dev.jsonl'), FILES['data/splits/dev.jsonl']); // identical content: following would pass
    const watcher = spawn('python3', [fileURLToPath(new URL('../workspace-fs/testing/inotify-watch.py', import.meta.url)), outside], { stdio: ['ignore', 'pipe', 'inherit'] });
    const seen: string[] = [];
    watcher.stdout.on('data', (chunk: Buffer) => seen.push(...chunk.toString().split('\n').filter(Boolean)));
    try {
      while (!seen.includes('ready')) await new Promise((resolve) => setTimeout(resolve, 20));
      const splits = join(layout.root, 'data/splits');
      let linked = false;
      let stop = false;
      let ended!: () => void;
      const stopped = new Promise<void>((resolve) => (ended = resolve));
      // The agent's loop: a link to `outside` for a moment, then the real directory for a moment.
      const flip = () => {
        if (linked) {
          unlinkSync(splits);
          renameSync(join(home, 'stash'), splits);
        } else {
          renameSync(splits, join(home, 'stash'));
          symlinkSync(outside, splits);
        }
        linked = !linked;
        if (!stop || linked) setTimeout(flip, Math.random() * 3);
        else ended();
      };
      flip();
      const results = [];
      for (let i = 0; i < 25; i++) results.push(await full());
      stop = true;
      await stopped; // the real directory is back
      expect(seen.filter((l) => l !== 'ready')).toEqual([]);
      for (const result of results) {
        for (const d of result.differences) expect(d.path.startsWith('data/splits')).toBe(true);
      }
      expect((await full()).ok).toBe(true);
    } finally {
      watcher.kill('SIGKILL');
    }
  });

  it('does not follow data/ itself when it is a link to a faithful copy', async () => {
    const copy = join(home, 'copy');
    await rename(layout.dataDir, copy);
    await symlink(copy, layout.dataDir);
    const result = await full();
    expect(result.differences.map((d) => [d.path, d.found ?? (d.actual === null ? 'missing' : 'changed')])).toEqual([
      ['data', 'symlink'],
      ['data/splits/dev.jsonl', 'missing'],
      ['data/train.jsonl', 'missing'],
    ]);
  });

  it('reports a directory or a FIFO where a file should be, and an added FIFO, without blocking on it', async () => {
    await rm(join(layout.root, 'data/train.jsonl'));
    await mkdir(join(layout.root, 'data/train.jsonl'));
    await rm(join(layout.root, 'models/tiny-base/config.json'));
    execFileSync('mkfifo', [join(layout.root, 'models/tiny-base/config.json'), join(layout.root, 'models/tiny-base/pipe')]);
    expect((await full()).differences).toEqual([
      { path: 'data/train.jsonl', expected: sha(FILES['data/train.jsonl']), actual: null, found: 'directory' },
      { path: 'models/tiny-base/config.json', expected: sha(FILES['models/tiny-base/config.json']), actual: null, found: 'other' },
      { path: 'models/tiny-base/pipe', expected: null, actual: null, found: 'other' },
    ]);
  });

  it('finds an added file whose name is not UTF-8', async () => {
    const dir = Buffer.from(join(layout.root, 'data/'));
    await writeFile(Buffer.concat([dir, Buffer.from([0x66, 0xff, 0xfe])]), 'hidden\n');
    const result = await full();
    expect(result.ok).toBe(false);
    expect(result.differences).toHaveLength(1);
    expect(result.differences[0]).toMatchObject({ path: 'data/f\uFFFD\uFFFD', expected: null });
  });

  it('hashes files larger than one read in bounded chunks', async () => {
    const big = Buffer.alloc(9 * 1024 * 1024 + 17, 7);
    await put('models/tiny-base/weights.bin', big);
    const result = await full();
    expect(result.differences).toEqual([{ path: 'models/tiny-base/weights.bin', expected: sha(FILES['models/tiny-base/weights.bin']), actual: sha(big) }]);
    manifest = manifest.map((e) => (e.path === 'models/tiny-base/weights.bin' ? { ...e, sha256: sha(big), size: big.length } : e));
    expect((await full()).ok).toBe(true);
  });
});

describe('the cheap check (stat against a baseline)', () => {
  it('keeps the baseline hash of a file whose stat is unchanged, and re-hashes one whose stat changed', async () => {
    const baseline = await captureIntegrityBaseline(layout, manifest);
    // A baseline that lies about one hash shows which files were re-hashed: only those that changed.
    const lying = structuredClone(baseline);
    lying.files['data/train.jsonl'].sha256 = 'e'.repeat(64);
    expect((await cheap(lying)).differences).toEqual([{ path: 'data/train.jsonl', expected: sha(FILES['data/train.jsonl']), actual: 'e'.repeat(64) }]);
    expect((await full()).ok).toBe(true);
    await chmod(join(layout.root, 'data/train.jsonl'), 0o444); // ctime moves: hashed again, and found intact
    const after = await cheap(lying);
    expect(after.ok).toBe(true);
    expect(after.baseline.files['data/train.jsonl'].sha256).toBe(sha(FILES['data/train.jsonl']));
  });

  it('catches a same-size rewrite whose mtime was put back (ctime cannot be)', async () => {
    const baseline = await captureIntegrityBaseline(layout, manifest);
    const path = join(layout.root, 'models/tiny-base/weights.bin');
    const reference = join(home, 'reference');
    await writeFile(reference, '');
    execFileSync('touch', ['-r', path, reference]); // the exact times, to the nanosecond
    await writeFile(path, 'x'.repeat(4096));
    execFileSync('touch', ['-r', reference, path]);
    const after = await stat(path, { bigint: true });
    expect([after.size, after.mtimeNs]).toEqual([BigInt(4096), (await stat(reference, { bigint: true })).mtimeNs]);
    const result = await cheap(baseline);
    expect(result.differences).toEqual([{ path: 'models/tiny-base/weights.bin', expected: sha('w'.repeat(4096)), actual: sha('x'.repeat(4096)) }]);
    // The difference stays in later cheap checks: the new baseline keeps the hash it found.
    expect((await cheap(result.baseline)).differences).toEqual(result.differences);
  });

  it('catches a file replaced by rename with identical stat times and size', async () => {
    const baseline = await captureIntegrityBaseline(layout, manifest);
    const path = join(layout.root, 'data/train.jsonl');
    const forged = `${path}.new`;
    await writeFile(forged, '{"q":"1+1","a":"3"}\n');
    execFileSync('touch', ['-r', path, forged]);
    await rename(forged, path);
    expect((await cheap(baseline)).differences).toEqual([{ path: 'data/train.jsonl', expected: sha(FILES['data/train.jsonl']), actual: sha('{"q":"1+1","a":"3"}\n') }]);
  });

  it('hashes everything without a baseline, and the full check ignores the baseline', async () => {
    const lying: IntegrityBaseline = structuredClone(await captureIntegrityBaseline(layout, manifest));
    for (const f of Object.values(lying.files)) f.sha256 = '0'.repeat(64);
    expect((await checkWorkspaceIntegrity(layout, manifest, { full: false })).ok).toBe(true);
    expect((await checkWorkspaceIntegrity(layout, manifest, { full: true, previous: lying })).ok).toBe(true);
    expect((await cheap(lying)).differences).toHaveLength(manifest.length);
  });

  it('survives a JSON round trip of the baseline (kept across a harness restart)', async () => {
    const baseline = JSON.parse(JSON.stringify(await captureIntegrityBaseline(layout, manifest))) as IntegrityBaseline;
    await writeFile(join(layout.root, 'data/splits/dev.jsonl'), 'changed\n');
    expect((await cheap(baseline)).differences.map((d) => d.path)).toEqual(['data/splits/dev.jsonl']);
  });
});

describe('the end-of-run check of a sandboxed agent (stat against the last baseline)', () => {
  const SHARDS = 12;
  const shard = (i: number) => `models/tiny-base/model-${String(i).padStart(5, '0')}-of-${SHARDS}.safetensors`;
  /** A multi-file models/, the manifest covering it. */
  async function shardedModels(): Promise<void> {
    for (let i = 0; i < SHARDS; i++) await put(shard(i), Buffer.alloc(64 * 1024 + i, i));
    manifest = [...manifest, ...Array.from({ length: SHARDS }, (_, i) => ({ path: shard(i), sha256: sha(Buffer.alloc(64 * 1024 + i, i)), size: 64 * 1024 + i }))]
      .sort((a, b) => (a.path < b.path ? -1 : 1));
  }
  /** The baseline with every hash replaced: a file the check re-hashes comes out right, one it does not shows the lie. */
  const lyingAbout = (baseline: IntegrityBaseline): IntegrityBaseline => {
    const lying = structuredClone(baseline);
    for (const f of Object.values(lying.files)) f.sha256 = 'e'.repeat(64);
    return lying;
  };

  it('re-hashes no file of an unchanged multi-file models/, and records full: false', async () => {
    await shardedModels();
    const end = await integrityAtEnd(layout, manifest, 'end', lyingAbout(await captureIntegrityBaseline(layout, manifest)));
    expect(end.data).toMatchObject({ phase: 'end', full: false, checked: manifest.length });
    // Every path kept the baseline's (false) hash: not one file was read.
    expect(end.data.differences.map((d) => [d.path, d.actual])).toEqual(manifest.map((e) => [e.path, 'e'.repeat(64)]));
    // The same check with a true baseline passes.
    expect((await integrityAtEnd(layout, manifest, 'end', await captureIntegrityBaseline(layout, manifest))).data.differences).toEqual([]);
  });

  it('re-hashes every file without a baseline (an unsandboxed run), and records full: true', async () => {
    await shardedModels();
    const end = await integrityAtEnd(layout, manifest, 'end');
    expect(end.data).toMatchObject({ phase: 'end', full: true, checked: manifest.length, differences: [] });
  });

  it('catches a shard rewritten behind the harness with its size and mtime put back (ctime moves), after a grading check', async () => {
    await shardedModels();
    const grading = await integrityBeforeGrading(layout, manifest, await captureIntegrityBaseline(layout, manifest), 'sub-1');
    expect(grading.data.differences).toEqual([]);
    const path = join(layout.root, shard(7));
    const before = await stat(path, { bigint: true });
    const reference = join(home, 'reference');
    await writeFile(reference, '');
    execFileSync('touch', ['-r', path, reference]); // utimensat: the exact times, to the nanosecond
    const forged = Buffer.alloc(64 * 1024 + 7, 0xaa);
    await writeFile(path, forged);
    execFileSync('touch', ['-r', reference, path]);
    const after = await stat(path, { bigint: true });
    // Only ctime tells: same inode, size and mtime.
    expect([after.ino, after.size, after.mtimeNs]).toEqual([before.ino, before.size, before.mtimeNs]);
    expect(after.ctimeNs).not.toBe(before.ctimeNs);
    const end = await integrityAtEnd(layout, manifest, 'end', grading.baseline);
    expect(end.data).toMatchObject({ full: false, differences: [{ path: shard(7), expected: sha(Buffer.alloc(64 * 1024 + 7, 7)), actual: sha(forged) }] });
  });

  it('catches a shard replaced by another inode with the same size and times', async () => {
    await shardedModels();
    const baseline = await captureIntegrityBaseline(layout, manifest);
    const path = join(layout.root, shard(3));
    await writeFile(`${path}.new`, Buffer.alloc(64 * 1024 + 3, 0xbb));
    execFileSync('touch', ['-r', path, `${path}.new`]);
    await rename(`${path}.new`, path);
    const end = await integrityAtEnd(layout, manifest, 'end', baseline);
    expect(end.data.differences).toEqual([{ path: shard(3), expected: sha(Buffer.alloc(64 * 1024 + 3, 3)), actual: sha(Buffer.alloc(64 * 1024 + 3, 0xbb)) }]);
  });

  it('IntegrityChecks: stat-compared at the end in the bwrap sandbox, every file re-hashed unsandboxed, always on resume', async () => {
    await shardedModels();
    const recorded: EventData<'WorkspaceIntegrityChecked'>[] = [];
    const session = { runId: 'run-1', warn: (m: string) => { throw new Error(m); }, record: async (_type: string, data: unknown) => void recorded.push(data as never) } as unknown as ConstructorParameters<typeof IntegrityChecks>[0];
    const lying = lyingAbout(await captureIntegrityBaseline(layout, manifest));
    await new IntegrityChecks(session, layout, manifest, lying, 'bwrap').atEnd();
    await new IntegrityChecks(session, layout, manifest, lying, 'none').atEnd();
    await new IntegrityChecks(session, layout, manifest, lying).atEnd(); // the default is the safe one
    await new IntegrityChecks(session, layout, manifest, lying, 'bwrap').atResume();
    expect(recorded.map((d) => [d.phase, d.full, d.differences.length])).toEqual([
      ['end', false, manifest.length],
      ['end', true, 0],
      ['end', true, 0],
      ['resume', true, 0],
    ]);
  });
});

describe('caps and the event', () => {
  it(`lists at most ${MAX_DIFFERENCES} differences and counts the rest`, async () => {
    for (let i = 0; i < 150; i++) await put(`data/extra/${String(i).padStart(3, '0')}.txt`, `extra ${i}\n`);
    const result = await full();
    expect(result.ok).toBe(false);
    expect(result.checked).toBe(manifest.length + 150);
    expect(result.differences).toHaveLength(MAX_DIFFERENCES);
    expect(result.moreDifferences).toBe(50);
    expect(result.differences[0]).toEqual({ path: 'data/extra/000.txt', expected: null, actual: sha('extra 0\n') });
    expect(result.differences[99].path).toBe('data/extra/099.txt');
  });

  it('keeps the event under the ledger size limit whatever the path lengths', async () => {
    const deep = Array.from({ length: 8 }, (_, i) => `${i}`.repeat(250)).join('/');
    for (let i = 0; i < MAX_DIFFERENCES; i++) await put(`data/${deep}/${i}`, `${i}`);
    const result = await full();
    const data = integrityEventData(result, { phase: 'end', full: true, observedAt: new Date('2026-01-01T00:00:00Z') });
    expect(result.differences.length).toBeLessThan(MAX_DIFFERENCES);
    expect(result.differences.length + (result.moreDifferences ?? 0)).toBe(MAX_DIFFERENCES);
    expect(canonicalBytes(data).length).toBeLessThan(200 * 1024);
    expect(() => validatePayload('WorkspaceIntegrityChecked', data)).not.toThrow();
  });

  it('gives the grading path and the end of the run valid WorkspaceIntegrityChecked payloads', async () => {
    const baseline = await captureIntegrityBaseline(layout, manifest);
    const grading = await integrityBeforeGrading(layout, manifest, baseline, 'sub-1');
    expect(grading.data).toMatchObject({ phase: 'grading', submissionId: 'sub-1', full: false, checked: manifest.length, differences: [] });
    expect([grading.data.ok, integrityOk(grading.data)]).toEqual([undefined, true]); // a verdict readers compute, not a fact
    expect(validatePayload('WorkspaceIntegrityChecked', grading.data)).toBe(grading.data);
    await rm(join(layout.root, 'data/train.jsonl'));
    const end = await integrityAtEnd(layout, manifest);
    expect(end.data).toMatchObject({ phase: 'end', full: true, differences: [{ path: 'data/train.jsonl', actual: null }] });
    expect(integrityOk(end.data)).toBe(false);
    expect(end.data.submissionId).toBeUndefined();
    expect(() => validatePayload('WorkspaceIntegrityChecked', end.data)).not.toThrow();
    expect(() => validatePayload('WorkspaceIntegrityChecked', { ...end.data, differences: [{ path: 'data/x', expected: 'nope', actual: null }] })).toThrow();
    expect(() => validatePayload('WorkspaceIntegrityChecked', { ...end.data, differences: [{ path: 'data/x', actual: null }] })).toThrow();
  });

  it('refuses a manifest path outside data/ and models/', async () => {
    await expect(checkWorkspaceIntegrity(layout, [{ path: 'code/x', sha256: sha(''), size: 0 }], { full: true })).rejects.toThrow(/not a plain path/);
    await expect(checkWorkspaceIntegrity(layout, [{ path: 'data/../code/x', sha256: sha(''), size: 0 }], { full: true })).rejects.toThrow(/not a plain path/);
  });
});
