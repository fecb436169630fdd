import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { keyIdOf } from '../ledger/tree-head.js';
import { publishFile } from './publish-file.js';

describe('publishFile', () => {
  const dirs: string[] = [];
  const dir = () => {
    const d = mkdtempSync(path.join(os.tmpdir(), 'a2rl-publish-'));
    dirs.push(d);
    return d;
  };
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('creates a file with exactly the mode asked for, whatever the umask, and leaves no temporary file', () => {
    const d = dir();
    const before = process.umask(0o077);
    try {
      expect(publishFile(path.join(d, 'pub'), 'public\n', { mode: 0o644, replace: false })).toBe(true);
    } finally {
      process.umask(before);
    }
    expect(readFileSync(path.join(d, 'pub'), 'utf8')).toBe('public\n');
    expect(statSync(path.join(d, 'pub')).mode & 0o777).toBe(0o644);
    expect(readdirSync(d)).toEqual(['pub']);
  });

  it('without replace, keeps an existing file and says it did not write', () => {
    const d = dir();
    writeFileSync(path.join(d, 'token'), 'first\n');
    expect(publishFile(path.join(d, 'token'), 'second\n', { mode: 0o600, replace: false })).toBe(false);
    expect(readFileSync(path.join(d, 'token'), 'utf8')).toBe('first\n');
    expect(readdirSync(d)).toEqual(['token']);
  });

  it('with replace, replaces an existing file', () => {
    const d = dir();
    writeFileSync(path.join(d, 'key.pub'), 'old\n');
    expect(publishFile(path.join(d, 'key.pub'), 'new\n', { mode: 0o644, replace: true })).toBe(true);
    expect(readFileSync(path.join(d, 'key.pub'), 'utf8')).toBe('new\n');
    expect(readdirSync(d)).toEqual(['key.pub']);
  });

  // A worker and a scheduler started together on one home used to race here: the loser could read the
  // operator token while the winner had created it but not written it yet (an empty file), or find a
  // half-written signing key. Four processes walk the same 150 fresh homes on one shared clock, so
  // they reach each home within a fraction of a millisecond of each other.
  it('lets processes that create the operator token and signing key at once all agree on one, none failing', async () => {
    const base = dir();
    const homes = Array.from({ length: 150 }, (_, i) => path.join(base, String(i)));
    const start = Date.now() + 4000;
    const script = `
      const { loadOrCreateOperatorToken } = await import(${JSON.stringify(new URL('../grading/grading.options.ts', import.meta.url).pathname)});
      const { loadOrInitSigningKey } = await import(${JSON.stringify(new URL('../ledger/tree-head.ts', import.meta.url).pathname)});
      const homes = ${JSON.stringify(homes)};
      const out = [];
      for (let i = 0; i < homes.length; i++) {
        while (Date.now() < ${start} + i * 3) {}
        const token = await loadOrCreateOperatorToken(homes[i]).catch((e) => 'failed: ' + e.message);
        let key;
        try { key = loadOrInitSigningKey(homes[i]).keyId; } catch (e) { key = 'failed: ' + e.message; }
        out.push(token + ' ' + key);
      }
      process.stdout.write(JSON.stringify(out));`;
    const child = () =>
      new Promise<string[]>((resolve, reject) => {
        const c = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        c.stdout.on('data', (d: Buffer) => (out += d.toString()));
        c.on('error', reject);
        c.on('close', (code) => (code === 0 ? resolve(JSON.parse(out) as string[]) : reject(new Error(`child exited ${code}`))));
      });
    const outs = await Promise.all([child(), child(), child(), child()]);
    const disagreements = homes.filter((_, i) => new Set(outs.map((o) => o[i])).size !== 1);
    expect(outs.flat().filter((line) => line.includes('failed: '))).toEqual([]);
    expect(disagreements).toEqual([]);
    for (const [i, home] of homes.entries()) {
      const [token, key] = outs[0][i].split(' ');
      expect(readFileSync(path.join(home, 'operator.token'), 'utf8')).toBe(`${token}\n`);
      expect(keyIdOf(readFileSync(path.join(home, 'keys', 'ledger-ed25519.pub.pem'), 'utf8'))).toBe(key);
      expect(readdirSync(home).sort()).toEqual(['keys', 'operator.token']);
    }
  }, 120_000);
});
