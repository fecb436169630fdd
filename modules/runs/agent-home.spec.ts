import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { MemoryArtifactStore } from '../../infra/artifacts/memory-artifact-store.js';
import { RedactingArtifactStore } from '../instrumentation/redacting-artifact-store.js';
import { RunRedaction } from '../instrumentation/run-redaction.js';
import { archiveAgentHome, archiveChanges, chunkListHash, chunksOf, homeFilesOf, newHomeWatchState, restoreAgentHome, watchAgentHome, writeAgentHomeFiles, type ArchivedHome } from './agent-home.js';

const TOKEN = 'gw-token-3f9a1c7e5b2d8f4a';

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

describe('the agent home', () => {
  let home: string;
  beforeEach(() => {
    home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-home-'));
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("writes the adapter's files under the home, owned by the agent's uid", async () => {
    await writeAgentHomeFiles(home, { '.codex/config.toml': 'model = "x"\n', 'a.json': '{}' }, process.getuid?.() === 0 ? 4242 : undefined);
    expect(readFileSync(path.join(home, '.codex/config.toml'), 'utf8')).toBe('model = "x"\n');
    if (process.getuid?.() === 0) {
      expect([statSync(path.join(home, '.codex')).uid, statSync(path.join(home, '.codex/config.toml')).uid, statSync(path.join(home, 'a.json')).uid]).toEqual([4242, 4242, 4242]);
    }
    await expect(writeAgentHomeFiles(home, { '../escape': 'x' })).rejects.toThrow(/outside the home/);
  });

  it('archives regular files redacted, skipping links, FIFOs, files over the size limit and files past the count', async () => {
    mkdirSync(path.join(home, '.codex/shell_snapshots'), { recursive: true });
    writeFileSync(path.join(home, '.codex/shell_snapshots/s.sh'), `export OPENAI_API_KEY=${TOKEN}\n`);
    writeFileSync(path.join(home, 'big.bin'), Buffer.alloc(2048));
    writeFileSync(path.join(home, 'notes.txt'), 'hello\n');
    symlinkSync('/etc/shadow', path.join(home, 'shadow'));
    execFileSync('mkfifo', [path.join(home, 'pipe')]);
    const inner = new MemoryArtifactStore();
    const store = new RedactingArtifactStore(inner, new RunRedaction({ secrets: [{ kind: 'gateway-token', value: TOKEN }] }));

    const archived = await archiveAgentHome(home, store, { maxFiles: 10, maxFileBytes: 1024 });
    expect(archived.files.map((f) => f.path)).toEqual(['.codex/shell_snapshots/s.sh', 'notes.txt']);
    expect(archived.skipped).toBe(3);
    expect(archived.skippedReason).toMatch(/larger than 1024 bytes; not a regular file/);
    const snapshot = await text(await inner.get(archived.files[0].sha256));
    expect(snapshot.includes(TOKEN)).toBe(false);
    expect(snapshot).toContain('[REDACTED:gateway-token]');

    const capped = await archiveAgentHome(home, store, { maxFiles: 1, maxFileBytes: 1 << 20 });
    expect({ files: capped.files.length, skipped: capped.skipped, why: capped.skippedReason?.includes('more than 1 files') }).toEqual({ files: 1, skipped: 4, why: true });
  });

  describe('archived as it changes', () => {
    it('stores only what changed since the last pass, says what is gone, and reports a skipped entry once', async () => {
      mkdirSync(path.join(home, '.claude/projects/w'), { recursive: true });
      writeFileSync(path.join(home, '.claude/projects/w/s.jsonl'), '{"n":1}\n');
      writeFileSync(path.join(home, 'config.json'), '{}');
      writeFileSync(path.join(home, 'huge.bin'), Buffer.alloc(2048));
      symlinkSync('/etc/shadow', path.join(home, 'shadow'));
      const store = new MemoryArtifactStore();
      const limits = { maxFiles: 10, maxFileBytes: 1024 };
      const state = newHomeWatchState();
      const paths = (a: ArchivedHome | null) => a?.files.map((f) => f.path) ?? null;

      const first = await archiveChanges(home, store, limits, state);
      expect(first).toMatchObject({ changedOnly: true, skipped: 2, skippedReason: 'larger than 1024 bytes; not a regular file' });
      expect(paths(first)).toEqual(['.claude/projects/w/s.jsonl', 'config.json']);
      expect(await archiveChanges(home, store, limits, state)).toBeNull();

      writeFileSync(path.join(home, '.claude/projects/w/s.jsonl'), '{"n":1}\n{"n":2}\n');
      writeFileSync(path.join(home, 'new.txt'), 'x');
      unlinkSync(path.join(home, 'config.json'));
      const second = await archiveChanges(home, store, limits, state);
      expect({ files: paths(second), removed: second?.removed, skipped: second?.skipped }).toEqual({ files: ['.claude/projects/w/s.jsonl', 'new.txt'], removed: ['config.json'], skipped: 0 });
      const session = second!.files[0];
      expect(store.blobs.get(session.sha256)?.toString()).toBe('{"n":1}\n{"n":2}\n');

      // The home as of the newest pass: the whole first archive with the later changes applied.
      expect(homeFilesOf([first!, second!]).map((f) => [f.path, f.size])).toEqual([['.claude/projects/w/s.jsonl', 16], ['new.txt', 1]]);
      // A whole archive (the one after the agent ends) starts over.
      expect(homeFilesOf([first!, { files: [{ path: 'only', sha256: session.sha256, size: 16 }], skipped: 0 }]).map((f) => f.path)).toEqual(['only']);
    });

    it('runs passes every everyMs until stopped, each reporting its changes through onArchived', async () => {
      writeFileSync(path.join(home, 'a.txt'), 'a');
      const seen: string[][] = [];
      const stop = watchAgentHome(home, new MemoryArtifactStore(), { maxFiles: 10, maxFileBytes: 1024 }, (a) => void seen.push(a.files.map((f) => f.path)), { everyMs: 10 });
      await until(() => seen.length === 1);
      writeFileSync(path.join(home, 'b.txt'), 'b');
      await until(() => seen.length === 2);
      await stop();
      writeFileSync(path.join(home, 'c.txt'), 'c');
      await new Promise((r) => setTimeout(r, 100));
      expect(seen).toEqual([['a.txt'], ['b.txt']]);
    });

    it('redacts what it archives, as the whole archive does', async () => {
      writeFileSync(path.join(home, 'session.jsonl'), `{"key":"${TOKEN}"}\n`);
      const inner = new MemoryArtifactStore();
      const store = new RedactingArtifactStore(inner, new RunRedaction({ secrets: [{ kind: 'gateway-token', value: TOKEN }] }));
      const archived = await archiveChanges(home, store, { maxFiles: 10, maxFileBytes: 1024 }, newHomeWatchState());
      expect(await text(await inner.get(archived!.files[0].sha256))).toBe('{"key":"[REDACTED:gateway-token]"}\n');
    });
  });

  describe('a large file archived in pieces', () => {
    const lines = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `{"turn":${from + i},"text":"${'x'.repeat(20)}"}\n`).join('');

    it('cuts after a newline at or past each multiple of the piece size, so appending keeps the earlier pieces', () => {
      const before = Buffer.from(lines(0, 40));
      const after = Buffer.concat([before, Buffer.from(lines(40, 60))]);
      const [a, b] = [chunksOf(before, 256), chunksOf(after, 256)];
      expect(Buffer.concat(a).equals(before) && Buffer.concat(b).equals(after)).toBe(true);
      expect(a.slice(0, -1).every((piece) => piece[piece.length - 1] === 0x0a)).toBe(true);
      expect(a.length).toBeGreaterThan(3);
      expect(b.slice(0, a.length - 1).map((p) => p.toString())).toEqual(a.slice(0, -1).map((p) => p.toString()));
      expect(chunksOf(Buffer.alloc(1000), 256)).toHaveLength(1); // no newline: one piece
    });

    it('stores only the new pieces of a growing transcript, and restores it byte for byte', async () => {
      const file = path.join(home, '.claude/projects/w/session.jsonl');
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, lines(0, 40));
      const store = new MemoryArtifactStore();
      const limits = { maxFiles: 10, maxFileBytes: 1 << 20, chunkBytes: 256 };
      const state = newHomeWatchState();
      const first = (await archiveChanges(home, store, limits, state))!;
      const stored = store.blobs.size;
      writeFileSync(file, lines(0, 60));
      const second = (await archiveChanges(home, store, limits, state))!;
      expect({ files: first.files, chunkedFirst: first.chunked?.map((c) => c.path) }).toEqual({ files: [], chunkedFirst: ['.claude/projects/w/session.jsonl'] });
      // Only the last piece before, and what was appended, are new.
      expect(store.blobs.size - stored).toBeLessThanOrEqual(second.chunked![0].chunks.length - first.chunked![0].chunks.length + 1);
      expect(second.chunked![0].sha256).toBe(chunkListHash(second.chunked![0].chunks));

      const target = path.join(os.tmpdir(), `a2rl-home-chunked-${process.pid}`);
      try {
        await restoreAgentHome(target, homeFilesOf([first, second]), store);
        expect(readFileSync(path.join(target, '.claude/projects/w/session.jsonl'), 'utf8')).toBe(lines(0, 60));
        const forged = { ...second.chunked![0], chunks: [...second.chunked![0].chunks].reverse() };
        await expect(restoreAgentHome(target, [forged], store)).rejects.toThrow(/its pieces do not match its sha256/);
      } finally {
        rmSync(target, { recursive: true, force: true });
      }
    });

    it('redacts a credential wherever it falls: no cut splits a line', async () => {
      const text = `${'a'.repeat(250)}${TOKEN}${'b'.repeat(250)}\n${lines(0, 20)}`;
      writeFileSync(path.join(home, 'big.jsonl'), text);
      const inner = new MemoryArtifactStore();
      const store = new RedactingArtifactStore(inner, new RunRedaction({ secrets: [{ kind: 'gateway-token', value: TOKEN }] }));
      const archived = (await archiveChanges(home, store, { maxFiles: 10, maxFileBytes: 1 << 20, chunkBytes: 256 }, newHomeWatchState()))!;
      const pieces = await Promise.all(archived.chunked![0].chunks.map(async (c) => text_(await inner.get(c.sha256))));
      expect(pieces.length).toBeGreaterThan(1);
      expect(pieces.join('').includes(TOKEN)).toBe(false);
      expect(pieces[0]).toContain('[REDACTED:gateway-token]');
    });
  });

  describe('restored on another machine', () => {
    let other: string;
    beforeEach(() => {
      other = mkdtempSync(path.join(os.tmpdir(), 'a2rl-home-restored-'));
    });
    afterEach(() => rmSync(other, { recursive: true, force: true }));

    it('writes the archived files back byte for byte into a new home, owned by the agent', async () => {
      mkdirSync(path.join(home, '.codex/sessions/2026/01/01'), { recursive: true });
      writeFileSync(path.join(home, '.codex/sessions/2026/01/01/rollout-x.jsonl'), '{"type":"session_meta"}\n');
      writeFileSync(path.join(home, '.claude.json'), '{"a":1}');
      const store = new MemoryArtifactStore();
      const archived = await archiveAgentHome(home, store, { maxFiles: 10, maxFileBytes: 1024 });
      const target = path.join(other, 'home');
      const uid = process.getuid?.() === 0 ? 4242 : undefined;
      await restoreAgentHome(target, archived.files, store, uid);
      expect(readFileSync(path.join(target, '.codex/sessions/2026/01/01/rollout-x.jsonl'), 'utf8')).toBe('{"type":"session_meta"}\n');
      expect(readFileSync(path.join(target, '.claude.json'), 'utf8')).toBe('{"a":1}');
      expect(statSync(path.join(target, '.codex')).mode & 0o777).toBe(0o700);
      expect(statSync(path.join(target, '.claude.json')).mode & 0o777).toBe(0o600);
      if (uid !== undefined) expect([target, path.join(target, '.codex/sessions/2026'), path.join(target, '.claude.json')].map((p) => statSync(p).uid)).toEqual([uid, uid, uid]);
    });

    it('refuses a path outside the home (../x, absolute, a .. inside) before writing anything', async () => {
      const store = new MemoryArtifactStore();
      const put = await store.put(Buffer.from('x'), { sha256: createHash('sha256').update('x').digest('hex'), size: 1 });
      const file = (p: string) => ({ path: p, sha256: put.sha256, size: 1 });
      for (const hostile of ['../x', '/etc/x', 'a/../../x', 'a//b', './a', '', 'a\u0000b']) {
        await expect(restoreAgentHome(path.join(other, 'home'), [file('fine.txt'), file(hostile)], store)).rejects.toThrow(/outside the home: refusing to restore/);
      }
      expect(readdirSync(other)).toEqual([]);
    });

    it('writes nothing through a link: a linked directory on the way or a linked file is refused', async () => {
      const store = new MemoryArtifactStore();
      const put = await store.put(Buffer.from('x'), { sha256: createHash('sha256').update('x').digest('hex'), size: 1 });
      const outside = path.join(other, 'outside');
      mkdirSync(outside);
      const target = path.join(other, 'home');
      mkdirSync(target);
      symlinkSync(outside, path.join(target, 'd'));
      symlinkSync(path.join(outside, 'f'), path.join(target, 'f'));
      await expect(restoreAgentHome(target, [{ path: 'd/x', sha256: put.sha256, size: 1 }], store)).rejects.toThrow(/not a directory .*refusing to restore through it/);
      await expect(restoreAgentHome(target, [{ path: 'f', sha256: put.sha256, size: 1 }], store)).rejects.toThrow(/without following a link/);
      expect(readdirSync(outside)).toEqual([]);
      expect(lstatSync(path.join(target, 'f')).isSymbolicLink()).toBe(true);
    });

    it('refuses a blob that does not match the archived sha256 and size', async () => {
      const store = new MemoryArtifactStore();
      const put = await store.put(Buffer.from('x'), { sha256: createHash('sha256').update('x').digest('hex'), size: 1 });
      await expect(restoreAgentHome(path.join(other, 'home'), [{ path: 'a', sha256: put.sha256, size: 2 }], store)).rejects.toThrow(/does not match its sha256 and size/);
      expect(existsSync(path.join(other, 'home', 'a'))).toBe(false);
    });
  });
});

const text_ = text;

async function until(ok: () => boolean, capMs = 30_000): Promise<void> {
  for (const started = Date.now(); !ok(); ) {
    if (Date.now() - started > capMs) throw new Error('gave up waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}
