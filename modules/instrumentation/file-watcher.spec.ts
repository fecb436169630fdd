import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { FileChanged, TransientFileRecorded } from '../ledger/events/catalog.js';
import type { Recorder } from '../ledger/recorder.js';
import { workerWatchSource, type WatchHandlers, type WatchSource } from './file-watch-source.js';
import { FileWatcher, type FileWatcherOptions } from './file-watcher.js';
import { sha } from '../../test/testing/helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** A watcher that never reports anything: only rescans can see changes. */
const silent: WatchSource = { start: async () => {}, fence: async () => false, close: async () => {} };

describe('FileWatcher', () => {
  let home: string;
  let ws: string;
  let artifacts: ArtifactStore;
  let events: FileChanged[];
  let transients: TransientFileRecorded[];
  let gaps: Array<{ reason: string; count?: number }>;
  let watcher: FileWatcher | undefined;
  const record: Recorder = async (type, data) => {
    if (type === 'TransientFileRecorded') return void transients.push(data as TransientFileRecorded);
    expect(type).toBe('FileChanged');
    events.push(data as FileChanged);
  };
  const onGap = (reason: string, count?: number) => void gaps.push({ reason, count });
  const stored = async (e: FileChanged) => (await buffer(await artifacts.get(e.sha256!))).toString();
  const ops = () => events.map((e) => `${e.op} ${e.path}`);
  const started = async (opts: Partial<FileWatcherOptions> = {}) => {
    watcher = new FileWatcher({ root: ws, artifacts, record, onGap, ...opts });
    await watcher.start();
    return watcher;
  };

  beforeEach(async () => {
    home = mkdtempSync(join(tmpdir(), 'a2rl-fw-'));
    ws = join(home, 'ws');
    for (const d of ['code', 'output', 'data']) mkdirSync(join(ws, d), { recursive: true });
    writeFileSync(join(ws, 'data', 'train.jsonl'), 'given\n');
    writeFileSync(join(ws, 'description.md'), '# task\n');
    artifacts = await FsArtifactStore.open(join(home, 'artifacts'));
    events = [];
    transients = [];
    gaps = [];
  });
  afterEach(async () => {
    await watcher?.stop().catch(() => {});
    watcher = undefined;
    rmSync(home, { recursive: true, force: true });
  });

  it('records create, modify and delete with content, hashes and observation times, each by the flush that follows it', async () => {
    const w = await started();
    const file = join(ws, 'code', 'train.py');
    const t0 = new Date().toISOString();
    writeFileSync(file, 'a\nb\nc\n');
    await w.flush();
    expect(ops()).toEqual(['create code/train.py']);
    writeFileSync(file, 'a\nB\nc\nd\n');
    await w.flush();
    unlinkSync(file);
    await w.flush();
    expect(events).toEqual([
      { path: 'code/train.py', op: 'create', sha256: sha('a\nb\nc\n'), size: 6, key: expect.stringMatching(/^sha256\//), observedAt: expect.stringMatching(ISO) },
      { path: 'code/train.py', op: 'modify', sha256: sha('a\nB\nc\nd\n'), size: 8, previousSha256: sha('a\nb\nc\n'), key: expect.any(String), observedAt: expect.stringMatching(ISO) },
      { path: 'code/train.py', op: 'delete', previousSha256: sha('a\nB\nc\nd\n'), observedAt: expect.stringMatching(ISO) },
    ]);
    const times = events.map((e) => e.observedAt);
    expect([...times].sort()).toEqual(times);
    expect(times[0] >= t0).toBe(true);
    expect(await stored(events[1])).toBe('a\nB\nc\nd\n');
    await w.stop();
    expect(events).toHaveLength(3);
    expect(gaps).toEqual([]);
  });

  it('ignores output/, data/, the harness files and what existed before start', async () => {
    writeFileSync(join(ws, 'code', 'preexisting.py'), 'x\n');
    const w = await started();
    mkdirSync(join(ws, 'output', 'ckpt'));
    writeFileSync(join(ws, 'output', 'ckpt', 'weights.json'), '[1,2]');
    writeFileSync(join(ws, 'data', 'extra.jsonl'), 'x\n');
    writeFileSync(join(ws, 'run_meta.json.tmp'), '{}');
    renameSync(join(ws, 'run_meta.json.tmp'), join(ws, 'run_meta.json'));
    writeFileSync(join(ws, 'notes.md'), 'agent notes\n');
    await w.flush();
    await w.stop();
    expect(ops()).toEqual(['create notes.md']);
  });

  it('records a notified file gone before it was read as a transient fact, and a file with a second name with its link count', async () => {
    let notify: ((paths: string[]) => void) | undefined;
    const source: WatchSource = { start: async (h) => void (notify = h.paths), fence: async () => false, close: async () => {} };
    const w = await started({ source });
    // As the watcher reports a file created and removed before it could be read (and a stale event of a removed directory).
    notify!(['code/flash.sh', 'code/gone-dir/x', 'run_meta.json.tmp']);
    writeFileSync(join(home, 'outside.txt'), 'two names\n');
    linkSync(join(home, 'outside.txt'), join(ws, 'code', 'linked.txt'));
    await w.flush();
    expect(transients).toEqual([{ path: 'code/flash.sh', note: 'created and removed before it could be read', observedAt: expect.stringMatching(ISO) }]);
    expect(events).toEqual([expect.objectContaining({ path: 'code/linked.txt', op: 'create', links: 2, sha256: sha('two names\n') })]);
    await w.stop();
    expect(transients).toHaveLength(1);
  });

  it('archives a file written 100 times in a row at most twice, ending with the final content', async () => {
    const w = await started({ minIntervalMs: 60_000 });
    const file = join(ws, 'code', 'log.txt');
    for (let i = 1; i <= 100; i++) {
      writeFileSync(file, `line ${i}\n`.repeat(i));
      await sleep(2);
    }
    await w.flush(); // takes the deferred path at once
    expect(events.length).toBeGreaterThanOrEqual(1);
    expect(events.length).toBeLessThanOrEqual(2);
    expect(await stored(events.at(-1)!)).toBe('line 100\n'.repeat(100));
    await w.stop();
    expect(events.length).toBeLessThanOrEqual(2); // the final rescan finds nothing new
  });

  it('records through the final rescan what the watcher never reported, and reports those changes as a gap', async () => {
    writeFileSync(join(ws, 'code', 'old.py'), 'old\n');
    const w = await started({ source: silent });
    writeFileSync(join(ws, 'code', 'last.py'), 'print("final")\n');
    unlinkSync(join(ws, 'code', 'old.py'));
    await w.stop();
    expect(ops().sort()).toEqual(['create code/last.py', 'delete code/old.py']);
    expect(await stored(events.find((e) => e.op === 'create')!)).toBe('print("final")\n');
    expect(gaps).toEqual([{ reason: expect.stringContaining('missed 2 changes'), count: 2 }]);
  });

  it('watches nested directories created at once (mkdir -p), and records what lands in them later', async () => {
    const w = await started();
    mkdirSync(join(ws, 'code', 'a', 'b', 'c'), { recursive: true });
    writeFileSync(join(ws, 'code', 'a', 'b', 'c', 'first.py'), '1\n');
    await w.flush();
    writeFileSync(join(ws, 'code', 'a', 'b', 'c', 'later.py'), '2\n');
    writeFileSync(join(ws, 'code', 'a', 'b', 'also.py'), '3\n');
    await w.flush();
    expect(ops()).toEqual(['create code/a/b/c/first.py', expect.any(String), expect.any(String)]);
    expect(ops().slice(1).sort()).toEqual(['create code/a/b/also.py', 'create code/a/b/c/later.py']);
    await w.stop();
    expect(events).toHaveLength(3);
    expect(gaps).toEqual([]); // all seen as they happened: no rescan had to find anything
  });

  it('records a renamed directory as deletes and creates, and keeps watching it under its new name', async () => {
    const w = await started();
    mkdirSync(join(ws, 'code', 'pkg', 'sub'), { recursive: true });
    writeFileSync(join(ws, 'code', 'pkg', 'sub', 'a.py'), 'a\n');
    await w.flush();
    renameSync(join(ws, 'code', 'pkg'), join(ws, 'code', 'lib'));
    writeFileSync(join(ws, 'code', 'lib', 'sub', 'b.py'), 'b\n');
    await w.flush();
    expect(ops().sort()).toEqual(['create code/lib/sub/a.py', 'create code/lib/sub/b.py', 'create code/pkg/sub/a.py', 'delete code/pkg/sub/a.py']);
    writeFileSync(join(ws, 'code', 'lib', 'sub', 'c.py'), 'c\n');
    await w.flush();
    expect(ops().at(-1)).toBe('create code/lib/sub/c.py');
    await w.stop();
    expect(events).toHaveLength(5);
    expect(gaps).toEqual([]);
  });

  it('hashes and stores a file larger than the in-memory limit', async () => {
    const w = await started();
    const big = Buffer.alloc(9 * 1024 * 1024, 0x61);
    writeFileSync(join(ws, 'code', 'big.bin'), big);
    await w.stop();
    expect(events).toEqual([{ path: 'code/big.bin', op: 'create', sha256: sha(big), size: big.length, key: expect.any(String), observedAt: expect.stringMatching(ISO) }]);
    expect(await artifacts.stat(sha(big))).toMatchObject({ size: big.length });
  });

  it('reads a large file again when it changed between hashing and storing, and records only what was stored', async () => {
    const file = join(ws, 'code', 'big.bin');
    const first = Buffer.alloc(9 * 1024 * 1024, 0x61);
    const second = Buffer.alloc(9 * 1024 * 1024, 0x62);
    let puts = 0;
    const racing: ArtifactStore = Object.create(artifacts, {
      put: {
        value: (body: Parameters<ArtifactStore['put']>[0], declared: { sha256: string; size: number }) => {
          if (puts++ === 0) writeFileSync(file, second); // the agent rewrites it while it is being archived
          return artifacts.put(body, declared);
        },
      },
    });
    watcher = new FileWatcher({ root: ws, artifacts: racing, record, onGap });
    await watcher.start();
    writeFileSync(file, first);
    await watcher.flush();
    await watcher.stop();
    expect(events.map((e) => e.sha256)).toEqual([sha(second)]);
    expect(await artifacts.exists(sha(first))).toBe(false);
  });

  it('never blocks on a FIFO and does not record it', async () => {
    const w = await started();
    execFileSync('mkfifo', [join(ws, 'code', 'pipe')]);
    writeFileSync(join(ws, 'code', 'after.py'), 'x\n');
    await w.flush();
    await w.stop();
    expect(ops()).toEqual(['create code/after.py']);
  });

  it('after a burst of thousands of files, has recorded the final content of every file and every deletion', async () => {
    const w = await started();
    const truth = new Map<string, string | null>();
    const write = (path: string, content: string) => {
      writeFileSync(join(ws, path), content);
      truth.set(path, content);
    };
    for (let d = 0; d < 30; d++) {
      mkdirSync(join(ws, 'code', `d${d}`)); // new directories: files land in them before their watch exists
      for (let i = 0; i < 100; i++) write(`code/d${d}/f${i}.txt`, `file ${d}/${i}\n`);
    }
    for (let d = 0; d < 30; d += 6) for (let i = 0; i < 100; i += 1) write(`code/d${d}/f${i}.txt`, `modified ${d}/${i}\n`);
    for (let i = 0; i < 100; i += 3) {
      unlinkSync(join(ws, `code/d1/f${i}.txt`));
      truth.set(`code/d1/f${i}.txt`, null);
    }
    rmSync(join(ws, 'code', 'd2'), { recursive: true });
    for (let i = 0; i < 100; i++) truth.set(`code/d2/f${i}.txt`, null);
    const check = () => {
      const last = new Map(events.map((e) => [e.path, e]));
      const wrong = [...truth].filter(([path, content]) => {
        const e = last.get(path);
        return content === null ? e !== undefined && e.op !== 'delete' : e?.sha256 !== sha(content);
      });
      expect(wrong).toEqual([]);
      for (const [path, content] of truth) if (content !== null) expect(sha(readFileSync(join(ws, path)))).toBe(last.get(path)!.sha256);
    };
    await w.flush();
    check();
    await w.stop();
    check();
    expect(gaps).toEqual([]);
  });

  it('when the watcher becomes impaired, reports a gap and records through rescans what it did not report', async () => {
    let handlers: WatchHandlers | undefined;
    const impaired: WatchSource = { start: async (h) => void (handlers = h), fence: async () => true, close: async () => {} };
    const w = await started({ source: impaired });
    writeFileSync(join(ws, 'code', 'unseen.py'), 'x\n');
    await w.flush(); // the fence says all was reported: nothing to record
    expect(events).toEqual([]);
    handlers!.impaired('cannot watch code/deep: ENOSPC');
    await w.flush();
    expect(ops()).toEqual(['create code/unseen.py']);
    expect(gaps).toEqual([{ reason: expect.stringContaining('cannot watch code/deep: ENOSPC'), count: undefined }]);
    writeFileSync(join(ws, 'code', 'next.py'), 'y\n');
    await w.flush(); // from now on every flush rescans
    expect(ops()).toEqual(['create code/unseen.py', 'create code/next.py']);
  });

  it('when more paths wait than it keeps, drops notifications with a gap and still records every final state', async () => {
    const w = await started({ maxPending: 20, concurrency: 1 });
    for (let i = 0; i < 500; i++) writeFileSync(join(ws, 'code', `f${i}.txt`), `${i}\n`);
    await w.flush();
    expect(new Set(events.map((e) => e.path)).size).toBe(500);
    expect(events).toHaveLength(500);
    expect(gaps.length).toBeGreaterThanOrEqual(1);
    expect(gaps[0].reason).toMatch(/more than 20 changed paths were waiting/);
    expect(gaps[0].count).toBeGreaterThan(0);
    expect(gaps.filter((g) => /missed/.test(g.reason))).toEqual([]); // dropped notifications are not reported twice
  });

  it('ends a flush once what was written before it is recorded, while the agent keeps writing', async () => {
    const w = await started();
    let writing = true;
    const log = join(ws, 'code', 'train.log');
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        writeFileSync(log, `step ${i}\n`, { flag: 'a' });
        await sleep(2);
      }
    })();
    await sleep(50);
    writeFileSync(join(ws, 'code', 'train.py'), 'print(1)\n');
    await w.flush();
    expect(ops()).toContain('create code/train.py');
    writing = false;
    await writer;
  });

  it('records the same without the reader thread (in-process fallback)', async () => {
    const w = await started({ readerThread: false });
    const big = Buffer.alloc(2 * 1024 * 1024, 0x61);
    writeFileSync(join(ws, 'code', 'a.py'), 'a\n');
    writeFileSync(join(ws, 'code', 'big.bin'), big);
    await w.flush();
    writeFileSync(join(ws, 'code', 'a.py'), 'b\n');
    unlinkSync(join(ws, 'code', 'big.bin'));
    symlinkSync(home, join(ws, 'code', 'up'));
    await w.flush();
    await w.stop();
    expect(ops().sort()).toEqual(['create code/a.py', 'create code/big.bin', 'delete code/big.bin', 'modify code/a.py']);
    expect(events.find((e) => e.op === 'modify')).toMatchObject({ sha256: sha('b\n'), previousSha256: sha('a\n') });
    expect(events.find((e) => e.path === 'code/big.bin')).toMatchObject({ sha256: sha(big), size: big.length });
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
      const w = await started();
      symlinkSync(outside, join(ws, 'code', 'd'));
      symlinkSync(join(outside, 'x'), join(ws, 'code', 'k')); // a link as the last component too
      writeFileSync(join(outside, 'x'), secret); // a write seen through the link
      await w.flush();
      await w.reconcile();
      await w.stop();
      expect(events).toEqual([]);
      expect(await leaked()).toBe(false);
    });

    it('never stores the outside content when the parent is swapped for a symlink between notification and reading', async () => {
      // Holds the watcher's batches back until the swap is done, so the race is certain.
      let open = false;
      const held: string[] = [];
      let deliver: WatchHandlers | undefined;
      const real = workerWatchSource({ root: realpathSync(ws), ignore: [] });
      const gated: WatchSource = {
        start: (h) => ((deliver = h), real.start({ paths: (p) => (open ? h.paths(p) : void held.push(...p)), impaired: h.impaired })),
        fence: (name, timeoutMs) => real.fence(name, timeoutMs),
        close: () => real.close(),
      };
      const w = await started({ source: gated });
      mkdirSync(join(ws, 'code', 'd'));
      writeFileSync(join(ws, 'code', 'd', 'x'), 'inside\n');
      writeFileSync(join(ws, 'code', 'd', 'big.bin'), 'inside big\n');
      while (!held.includes('code/d/big.bin')) await sleep(10);
      renameSync(join(ws, 'code', 'd'), join(ws, 'code', 'd2'));
      symlinkSync(outside, join(ws, 'code', 'd'));
      while (!held.includes('code/d2')) await sleep(10);
      open = true;
      deliver!.paths(held);
      await w.stop();
      expect(await leaked()).toBe(false);
      expect(events.filter((e) => e.path.startsWith('code/d/'))).toEqual([]);
      expect(ops().sort()).toEqual(['create code/d2/big.bin', 'create code/d2/x']);
      expect(await stored(events.find((e) => e.path === 'code/d2/x')!)).toBe('inside\n');
    });

    it('records a recorded file as deleted once its directory is replaced by a symlink', async () => {
      const w = await started();
      mkdirSync(join(ws, 'code', 'd'));
      writeFileSync(join(ws, 'code', 'd', 'x'), 'inside\n');
      await w.flush();
      rmSync(join(ws, 'code', 'd'), { recursive: true });
      symlinkSync(outside, join(ws, 'code', 'd'));
      await w.flush();
      expect(ops()).toEqual(['create code/d/x', 'delete code/d/x']);
      await w.stop();
      expect(ops()).toEqual(['create code/d/x', 'delete code/d/x']);
      expect(await leaked()).toBe(false);
    });
  });
});
