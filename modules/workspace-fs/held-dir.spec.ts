import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { BeneathError, DirCursor, hashOpenFile, HeldDir, isComponent, utf8Name } from './held-dir.js';

describe('HeldDir: every component through its parent descriptor, links refused', () => {
  let tmp: string;
  let tree: string;
  let outside: string;

  beforeEach(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'a2rl-held-'));
    tree = path.join(tmp, 'tree');
    outside = path.join(tmp, 'outside');
    mkdirSync(path.join(tree, 'sub'), { recursive: true });
    mkdirSync(outside);
    writeFileSync(path.join(tree, 'sub', 'a.txt'), 'inside');
    writeFileSync(path.join(outside, 'secret.txt'), 'outside');
  });
  afterEach(() => rmSync(tmp, { recursive: true, force: true }));

  const refusal = (p: Promise<unknown>) => p.then(() => 'opened', (err: unknown) => (err instanceof BeneathError ? err.refusal : `other: ${String(err)}`));

  it('lists, opens and hashes what is inside', async () => {
    const root = await HeldDir.open(tree);
    try {
      expect((await root.list()).map(String)).toEqual(['sub']);
      const cursor = new DirCursor(root);
      const file = await (await cursor.at(['sub'])).openFile('a.txt');
      const hashed = await hashOpenFile(file);
      await file.close();
      await cursor.close();
      expect(hashed).toEqual({ sha256: createHash('sha256').update('inside').digest('hex'), size: 6 });
    } finally {
      await root.close();
    }
  });

  it('refuses a link where a directory or a file is asked for, and never names more than the component', async () => {
    symlinkSync(outside, path.join(tree, 'dirlink'));
    symlinkSync(path.join(outside, 'secret.txt'), path.join(tree, 'filelink'));
    const root = await HeldDir.open(tree);
    try {
      expect(await refusal(root.openDir('dirlink'))).toBe('link');
      expect(await refusal(root.openFile('filelink'))).toBe('link');
      expect(await refusal(root.openFile('sub'))).toBe('not-file');
      expect(await refusal(root.openDir('nothing'))).toBe('missing');
      const err = (await root.openDir('dirlink').catch((e: unknown) => e)) as Error;
      expect(err.message).not.toContain(outside);
      expect(err.message).not.toContain(tree);
      expect(await root.readLink('dirlink')).toBe(outside); // the text only: nothing behind it is looked at
      expect((await root.lstat('dirlink'))?.isSymbolicLink()).toBe(true);
    } finally {
      await root.close();
    }
  });

  it('refuses names that are not one component', async () => {
    const root = await HeldDir.open(tree);
    try {
      for (const name of ['..', '.', '', 'sub/a.txt', 'a\0b']) expect(await refusal(root.openFile(name))).toBe('bad-name');
      expect([isComponent('..'), isComponent('a/b'), isComponent('ok')]).toEqual([false, false, true]);
    } finally {
      await root.close();
    }
  });

  it('keeps walking the directory it holds when its path is swapped for a link', async () => {
    const root = await HeldDir.open(tree);
    const sub = await root.openDir('sub');
    try {
      renameSync(path.join(tree, 'sub'), path.join(tree, 'moved'));
      symlinkSync(outside, path.join(tree, 'sub'));
      expect((await sub.list()).map(String)).toEqual(['a.txt']);
      const file = await sub.openFile('a.txt');
      expect((await hashOpenFile(file)).size).toBe(6);
      await file.close();
      expect(await refusal(root.openDir('sub'))).toBe('link');
    } finally {
      await sub.close();
      await root.close();
    }
  });

  it('creates files and directories without writing through a planted link, and removes links as links', async () => {
    symlinkSync(outside, path.join(tree, 'planted'));
    symlinkSync(path.join(outside, 'secret.txt'), path.join(tree, 'sub', 'victim.txt'));
    const root = await HeldDir.open(tree);
    try {
      expect(await refusal(root.openOrMakeDir('planted'))).toBe('link');
      const cursor = new DirCursor(root, { create: true });
      expect(await refusal(cursor.at(['sub']).then((dir) => dir.createFile('victim.txt')))).toBe('exists');
      await (await (await cursor.at(['new', 'deeper'])).createFile('x.txt')).close();
      expect(await refusal(cursor.at(['planted', 'x']))).toBe('link');
      await cursor.close();
      expect(readdirSync(path.join(tree, 'new', 'deeper'))).toEqual(['x.txt']);
      for (const name of await root.list()) await root.remove(name);
      expect(readdirSync(tree)).toEqual([]);
      expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('outside'); // untouched
    } finally {
      await root.close();
    }
  });

  it('reports a name that is not UTF-8 as such', () => {
    expect(utf8Name(Buffer.from([0x66, 0xff]))).toBeNull();
    expect(utf8Name(Buffer.from('ok'))).toBe('ok');
  });

  it('refuses a link as the directory it is asked to hold', async () => {
    symlinkSync(outside, path.join(tmp, 'rootlink'));
    await expect(HeldDir.open(path.join(tmp, 'rootlink'))).rejects.toMatchObject({ code: expect.stringMatching(/^(ELOOP|ENOTDIR)$/) });
  });
});
