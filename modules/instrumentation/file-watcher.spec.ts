import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { FileChanged } from '../ledger/events/catalog.js';
import { FileWatcher, lineDiff } from './file-watcher.js';
import type { Recorder } from '../runs/run-context.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha = (b: string | Buffer) => createHash('sha256').update(b).digest('hex');

describe('FileWatcher', () => {
  let home: string;
  let ws: string;
  let artifacts: ArtifactStore;
  let events: FileChanged[];
  let watcher: FileWatcher;
  const record: Recorder = async (type, data) => {
    expect(type).toBe('FileChanged');
    events.push(data as FileChanged);
  };
  const stored = async (e: FileChanged) => (await buffer(await artifacts.get(e.sha256!))).toString();

  beforeEach(async () => {
    home = mkdtempSync(join(tmpdir(), 'a2rl-fw-'));
    ws = join(home, 'ws');
    for (const d of ['code', 'output', 'data']) mkdirSync(join(ws, d), { recursive: true });
    writeFileSync(join(ws, 'data', 'train.jsonl'), 'given\n');
    writeFileSync(join(ws, 'description.md'), '# task\n');
    artifacts = await FsArtifactStore.open(join(home, 'artifacts'));
    events = [];
  });
  afterEach(async () => {
    await watcher?.stop().catch(() => {});
    rmSync(home, { recursive: true, force: true });
  });

  it('records create, modify and delete with content, hashes and line counts', async () => {
    watcher = new FileWatcher({ root: ws, artifacts, record, quietMs: 50 });
    await watcher.start();
    const file = join(ws, 'code', 'train.py');
    writeFileSync(file, 'a\nb\nc\n');
    await sleep(300);
    writeFileSync(file, 'a\nB\nc\nd\n');
    await sleep(300);
    unlinkSync(file);
    await sleep(300);
    expect(events).toEqual([
      { path: 'code/train.py', op: 'create', sha256: sha('a\nb\nc\n'), size: 6, key: expect.stringMatching(/^sha256\//), linesAdded: 3, linesRemoved: 0 },
      { path: 'code/train.py', op: 'modify', sha256: sha('a\nB\nc\nd\n'), size: 8, previousSha256: sha('a\nb\nc\n'), key: expect.any(String), linesAdded: 2, linesRemoved: 1 },
      { path: 'code/train.py', op: 'delete', previousSha256: sha('a\nB\nc\nd\n'), linesAdded: 0, linesRemoved: 4 },
    ]);
    expect(await stored(events[1])).toBe('a\nB\nc\nd\n');
  });

  it('ignores output/, data/, the harness files and what existed before start', async () => {
    writeFileSync(join(ws, 'code', 'preexisting.py'), 'x\n');
    watcher = new FileWatcher({ root: ws, artifacts, record, quietMs: 50 });
    await watcher.start();
    mkdirSync(join(ws, 'output', 'ckpt'));
    writeFileSync(join(ws, 'output', 'ckpt', 'weights.json'), '[1,2]');
    writeFileSync(join(ws, 'data', 'extra.jsonl'), 'x\n');
    writeFileSync(join(ws, 'run_meta.json.tmp'), '{}');
    renameSync(join(ws, 'run_meta.json.tmp'), join(ws, 'run_meta.json'));
    writeFileSync(join(ws, 'notes.md'), 'agent notes\n');
    await watcher.stop();
    expect(events.map((e) => e.path)).toEqual(['notes.md']);
  });

  it('coalesces a burst of 100 writes into few events ending with the final content', async () => {
    watcher = new FileWatcher({ root: ws, artifacts, record, quietMs: 150, rescanMs: 60_000 });
    await watcher.start();
    const file = join(ws, 'code', 'log.txt');
    for (let i = 1; i <= 100; i++) {
      writeFileSync(file, `line ${i}\n`.repeat(i));
      await sleep(2);
    }
    await sleep(500);
    expect(events.length).toBeGreaterThanOrEqual(1);
    expect(events.length).toBeLessThanOrEqual(3);
    expect(await stored(events.at(-1)!)).toBe('line 100\n'.repeat(100));
    await watcher.stop();
    expect(events.length).toBeLessThanOrEqual(3); // the final flush finds nothing new
  });

  it('records a change made right before stop() through the final rescan', async () => {
    watcher = new FileWatcher({ root: ws, artifacts, record, quietMs: 10_000, rescanMs: 60_000 });
    await watcher.start();
    writeFileSync(join(ws, 'code', 'last.py'), 'print("final")\n');
    await watcher.stop();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ path: 'code/last.py', op: 'create', linesAdded: 1 });
    expect(await stored(events[0])).toBe('print("final")\n');
  });

  it('catches files in created and renamed directories that fs.watch may drop, via the periodic rescan', async () => {
    watcher = new FileWatcher({ root: ws, artifacts, record, quietMs: 50, rescanMs: 300 });
    await watcher.start();
    mkdirSync(join(ws, 'code', 'pkg', 'sub'), { recursive: true });
    writeFileSync(join(ws, 'code', 'pkg', 'sub', 'a.py'), 'a\n');
    await sleep(200);
    renameSync(join(ws, 'code', 'pkg'), join(ws, 'code', 'lib'));
    writeFileSync(join(ws, 'code', 'lib', 'sub', 'b.py'), 'b\n');
    await sleep(800);
    const ops = events.map((e) => `${e.op} ${e.path}`).sort();
    expect(ops).toEqual(['create code/lib/sub/a.py', 'create code/lib/sub/b.py', 'create code/pkg/sub/a.py', 'delete code/pkg/sub/a.py']);
  });

  it('hashes and stores a file larger than the in-memory limit', async () => {
    watcher = new FileWatcher({ root: ws, artifacts, record, quietMs: 50 });
    await watcher.start();
    const big = Buffer.alloc(9 * 1024 * 1024, 0x61);
    writeFileSync(join(ws, 'code', 'big.bin'), big);
    await watcher.stop();
    expect(events).toEqual([
      { path: 'code/big.bin', op: 'create', sha256: sha(big), size: big.length, key: expect.any(String), linesAdded: 0, linesRemoved: 0 },
    ]);
    expect(await artifacts.stat(sha(big))).toMatchObject({ size: big.length });
  });

  describe('never reads through a symlink or outside the workspace', () => {
    const secret = 'TOP SECRET held-out answer\n';
    const bigSecret = Buffer.alloc(9 * 1024 * 1024, 0x53);
    let outside: string;
    beforeEach(() => {
      outside = join(home, 'private');
      mkdirSync(outside);
      writeFileSync(join(outside, 'x'), secret);
      writeFileSync(join(outside, 'big.bin'), bigSecret);
    });
    const leaked = async () => (await artifacts.exists(sha(secret))) || (await artifacts.exists(sha(bigSecret)));

    it('does not record a file reached through a symlinked parent directory pointing outside the root', async () => {
      watcher = new FileWatcher({ root: ws, artifacts, record, quietMs: 50, rescanMs: 200 });
      await watcher.start();
      symlinkSync(outside, join(ws, 'code', 'd'));
      symlinkSync(join(outside, 'x'), join(ws, 'code', 'k')); // a link as the last component too
      writeFileSync(join(outside, 'x'), secret); // a write seen through the link
      await sleep(500);
      await watcher.stop();
      expect(events).toEqual([]);
      expect(await leaked()).toBe(false);
    });

    it('never stores the outside content when the parent is swapped for a symlink within the quiet window', async () => {
      watcher = new FileWatcher({ root: ws, artifacts, record, quietMs: 400, rescanMs: 60_000 });
      await watcher.start();
      mkdirSync(join(ws, 'code', 'd'));
      await sleep(100); // fs.watch now watches code/d, so the writes below are reported as code/d/...
      writeFileSync(join(ws, 'code', 'd', 'x'), 'inside\n');
      writeFileSync(join(ws, 'code', 'd', 'big.bin'), 'inside big\n');
      await sleep(100); // still inside the quiet window
      renameSync(join(ws, 'code', 'd'), join(ws, 'code', 'd2'));
      symlinkSync(outside, join(ws, 'code', 'd'));
      await sleep(800);
      await watcher.stop();
      expect(await leaked()).toBe(false);
      expect(events.filter((e) => e.path.startsWith('code/d/'))).toEqual([]);
      expect(events.map((e) => `${e.op} ${e.path}`).sort()).toEqual(['create code/d2/big.bin', 'create code/d2/x']);
      expect(await stored(events.find((e) => e.path === 'code/d2/x')!)).toBe('inside\n');
    });

    it('records a recorded file as deleted once its directory is replaced by a symlink', async () => {
      watcher = new FileWatcher({ root: ws, artifacts, record, quietMs: 50, rescanMs: 60_000 });
      await watcher.start();
      mkdirSync(join(ws, 'code', 'd'));
      writeFileSync(join(ws, 'code', 'd', 'x'), 'inside\n');
      await sleep(300);
      rmSync(join(ws, 'code', 'd'), { recursive: true });
      symlinkSync(outside, join(ws, 'code', 'd'));
      await sleep(300);
      await watcher.stop();
      expect(events.map((e) => `${e.op} ${e.path}`)).toEqual(['create code/d/x', 'delete code/d/x']);
      expect(await leaked()).toBe(false);
    });
  });
});

describe('lineDiff', () => {
  const d = (a: string, b: string) => lineDiff(Buffer.from(a), Buffer.from(b));
  it('counts an exact LCS diff', () => {
    expect(d('', 'a\nb\n')).toEqual({ added: 2, removed: 0 });
    expect(d('a\nb\nc\n', 'a\nc\nb\n')).toEqual({ added: 1, removed: 1 });
    expect(d('a\nb\n', 'a\nb')).toEqual({ added: 0, removed: 0 });
    expect(d('x\n'.repeat(10), 'x\n'.repeat(12))).toEqual({ added: 2, removed: 0 });
  });
  it('falls back to a multiset difference for very large changes', () => {
    const before = Array.from({ length: 3000 }, (_, i) => `l${i}`).join('\n');
    const after = Array.from({ length: 3000 }, (_, i) => `l${2999 - i}`).join('\n'); // reversed: LCS would say 2999/2999
    expect(lineDiff(Buffer.from(before), Buffer.from(after))).toEqual({ added: 0, removed: 0 });
  });
});
