import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, mkdtempSync, openSync, closeSync, ftruncateSync, rmSync, truncateSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsArtifactStore } from '../../infra/artifacts/fs-artifact-store.js';
import type { ArtifactStore } from '../artifacts/artifact-store.port.js';
import type { FileChanged, LimitReached } from '../ledger/events/catalog.js';
import type { Recorder } from '../ledger/recorder.js';
import { FileWatcher, type FileWatcherOptions } from './file-watcher.js';
import { sha } from '../../test/testing/helpers.js';

const MiB = 1024 * 1024;
const TiB = 1024 * 1024 * MiB;

/** A sparse file of `size` bytes with 4 KiB of data at its start. */
function sparse(path: string, size: number): void {
  const fd = openSync(path, 'wx');
  try {
    writeSync(fd, randomBytes(4096), 0, 4096, 0);
    ftruncateSync(fd, size);
  } finally {
    closeSync(fd);
  }
}

describe('FileWatcher limits', () => {
  let home: string;
  let ws: string;
  let artifacts: ArtifactStore;
  let events: Array<{ type: string; data: any }>;
  let told: Array<[string, LimitReached]>;
  let watcher: FileWatcher | undefined;
  const record: Recorder = async (type, data) => void events.push({ type, data });
  const changes = () => events.filter((e) => e.type === 'FileChanged').map((e) => e.data as FileChanged);
  const limits = () => events.filter((e) => e.type === 'LimitReached').map((e) => e.data as LimitReached);
  const started = async (opts: Partial<FileWatcherOptions>) => {
    watcher = new FileWatcher({ root: ws, artifacts, record, onLimit: (limit, data) => void told.push([limit, data]), ...opts });
    await watcher.start();
    return watcher;
  };

  beforeEach(async () => {
    home = mkdtempSync(join(tmpdir(), 'a2rl-fwl-'));
    ws = join(home, 'ws');
    for (const d of ['code', 'output', 'data', 'models']) mkdirSync(join(ws, d), { recursive: true });
    writeFileSync(join(ws, 'description.md'), '# task\n');
    sparse(join(ws, 'data', 'train.bin'), 64 * MiB); // read-only inputs: not counted
    sparse(join(ws, 'models', 'base.bin'), 64 * MiB);
    artifacts = await FsArtifactStore.open(join(home, 'artifacts'));
    events = [];
    told = [];
  });
  afterEach(async () => {
    await watcher?.stop().catch(() => {});
    watcher = undefined;
    rmSync(home, { recursive: true, force: true });
  });

  describe('diskBytes', () => {
    it('counts code/ and output/ (not data/ or models/) and, once over, records LimitReached once and tells the run to stop the agent', async () => {
      const w = await started({ diskBytes: 10 * MiB });
      writeFileSync(join(ws, 'code', 'train.py'), 'print(1)\n');
      mkdirSync(join(ws, 'output', 'ck'));
      sparse(join(ws, 'output', 'ck', 'weights.bin'), 8 * MiB);
      await w.flush();
      expect(limits()).toEqual([]);
      writeFileSync(join(ws, 'code', 'cache.bin'), randomBytes(3 * MiB));
      await w.flush();
      const total = 9 + 8 * MiB + 3 * MiB; // description.md is the harness's: not counted
      const reached = { limit: 'diskBytes', value: total, max: 10 * MiB, action: 'stopped the agent', observedAt: expect.any(String) };
      expect(limits()).toEqual([reached]);
      expect(told).toEqual([['diskBytes', reached]]);
      writeFileSync(join(ws, 'code', 'more.bin'), randomBytes(MiB));
      await w.stop();
      expect(limits()).toHaveLength(1); // once per run
      // output/ counts, but is archived at submission, not recorded as file changes.
      expect(changes().map((c) => `${c.op} ${c.path}`).sort()).toEqual(['create code/cache.bin', 'create code/more.bin', 'create code/train.py']);
    });

    it('counts a sparse file at its logical size before reading a byte of it', async () => {
      const w = await started({ diskBytes: 10 * MiB, fileBytes: 64 * MiB });
      sparse(join(ws, 'code', 'huge.bin'), TiB);
      await w.flush();
      expect(limits()).toEqual([
        { limit: 'diskBytes', value: TiB, max: 10 * MiB, action: 'stopped the agent', observedAt: expect.any(String) },
        { limit: 'fileBytes', value: TiB, max: 64 * MiB, scope: 'code/huge.bin', action: 'not archived', observedAt: expect.any(String) },
      ]);
      expect(changes()).toEqual([{ path: 'code/huge.bin', op: 'create', size: TiB, observedAt: expect.any(String) }]);
    });

    it('counts hard links to one file once, and removed files no more', async () => {
      const w = await started({ diskBytes: 10 * MiB });
      const content = randomBytes(6 * MiB);
      writeFileSync(join(ws, 'code', 'a.bin'), content);
      linkSync(join(ws, 'code', 'a.bin'), join(ws, 'code', 'b.bin'));
      await w.flush();
      expect(limits()).toEqual([]);
      unlinkSync(join(ws, 'code', 'a.bin'));
      unlinkSync(join(ws, 'code', 'b.bin'));
      await w.flush();
      writeFileSync(join(ws, 'code', 'c.bin'), randomBytes(6 * MiB)); // 6 MiB in all now, not 18
      await w.stop();
      expect(limits()).toEqual([]);
      expect(changes().filter((c) => c.op === 'create').map((c) => [c.path, c.sha256])).toEqual(
        expect.arrayContaining([
          ['code/a.bin', sha(content)],
          ['code/b.bin', sha(content)],
        ]),
      );
    });

    it("says 'recorded' as its action when no one is there to stop the agent", async () => {
      watcher = new FileWatcher({ root: ws, artifacts, record, diskBytes: MiB });
      await watcher.start();
      writeFileSync(join(ws, 'code', 'x.bin'), randomBytes(2 * MiB));
      await watcher.stop();
      expect(limits()).toEqual([{ limit: 'diskBytes', value: 2 * MiB, max: MiB, action: 'recorded', observedAt: expect.any(String) }]);
    });
  });

  describe('fileBytes', () => {
    it('never reads a file over the limit into the store: LimitReached once while it stays over, FileChanged without content', async () => {
      const w = await started({ fileBytes: MiB });
      const file = join(ws, 'code', 'big.log');
      const first = randomBytes(2 * MiB);
      writeFileSync(file, first);
      await w.flush();
      writeFileSync(file, randomBytes(1024), { flag: 'a' });
      await w.flush();
      writeFileSync(file, 'small now\n');
      await w.flush();
      unlinkSync(file);
      await w.stop();
      expect(limits()).toEqual([{ limit: 'fileBytes', value: 2 * MiB, max: MiB, scope: 'code/big.log', action: 'not archived', observedAt: expect.any(String) }]);
      expect(told.map(([limit]) => limit)).toEqual(['fileBytes']);
      expect(changes()).toEqual([
        { path: 'code/big.log', op: 'create', size: 2 * MiB, observedAt: expect.any(String) },
        { path: 'code/big.log', op: 'modify', size: 2 * MiB + 1024, observedAt: expect.any(String) },
        { path: 'code/big.log', op: 'modify', sha256: sha('small now\n'), size: 10, key: expect.any(String), observedAt: expect.any(String) },
        { path: 'code/big.log', op: 'delete', previousSha256: sha('small now\n'), observedAt: expect.any(String) },
      ]);
      expect(await artifacts.exists(sha(first))).toBe(false);
      expect(events.map((e) => e.type)[0]).toBe('LimitReached'); // the limit comes before the change it explains
    });

    it('applies below the reader thread size too, with and without the reader thread', async () => {
      for (const readerThread of [true, false]) {
        events = [];
        const w = await started({ fileBytes: 1000, readerThread });
        writeFileSync(join(ws, 'code', 'ok.txt'), 'x'.repeat(1000));
        writeFileSync(join(ws, 'code', 'over.txt'), 'y'.repeat(1001));
        await w.stop();
        watcher = undefined;
        expect(limits().map((l) => l.scope)).toEqual(['code/over.txt']);
        const byPath = Object.fromEntries(changes().map((c) => [c.path, c]));
        expect(byPath['code/ok.txt']).toMatchObject({ sha256: sha('x'.repeat(1000)), size: 1000 });
        expect(byPath['code/over.txt']).toEqual({ path: 'code/over.txt', op: 'create', size: 1001, observedAt: expect.any(String) });
        expect(await artifacts.exists(sha('y'.repeat(1001)))).toBe(false);
        rmSync(join(ws, 'code'), { recursive: true });
        mkdirSync(join(ws, 'code'));
      }
    });

    it('records a file shrunk under the limit and then grown over it again with a new LimitReached', async () => {
      const w = await started({ fileBytes: MiB });
      const file = join(ws, 'code', 'w.bin');
      sparse(file, 2 * MiB);
      await w.flush();
      truncateSync(file, 4096);
      await w.flush();
      truncateSync(file, 3 * MiB);
      await w.stop();
      expect(limits().map((l) => l.value)).toEqual([2 * MiB, 3 * MiB]);
      expect(changes().map((c) => [c.op, c.size, c.sha256 !== undefined])).toEqual([
        ['create', 2 * MiB, false],
        ['modify', 4096, true],
        ['modify', 3 * MiB, false],
      ]);
      expect(changes()[2].previousSha256).toBe(changes()[1].sha256);
    });
  });

  it('limits nothing and watches no output/ when no limit is given', async () => {
    const w = await started({});
    writeFileSync(join(ws, 'code', 'big.bin'), randomBytes(2 * MiB));
    sparse(join(ws, 'output', 'weights.bin'), TiB);
    await w.stop();
    expect(limits()).toEqual([]);
    expect(changes().map((c) => c.path)).toEqual(['code/big.bin']);
  });
});
