import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readTarGz, writeTarGz } from '../../modules/audit/bundle/tar-io.js';
import { gzipBomb } from '../../modules/audit/bundle/testing/gzip-bomb.js';
import { asOlderFormat } from '../../modules/audit/bundle/testing/older-format.js';
import { runA2rl } from './a2rl-cli.js';

// `a2rl export` and `a2rl verify-bundle` through the built binary, on one signed reference-agent
// run in the embedded default stores. verify-bundle runs without A2RL_HOME, from an empty directory
// (so no key is trusted there), or with a reviewer's A2RL_HOME holding the keys it trusts.

let home: string;
let scratch: string;
let runId: string;
let bundle: string;

async function a2rl(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return runA2rl(args, { env: opts.env ?? { ...process.env, A2RL_HOME: home }, cwd: opts.cwd });
}

/** verify-bundle as an offline reviewer runs it: no A2RL_HOME, no a2rl configuration, an empty working directory. */
function verifyOffline(file: string, ...extra: string[]) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('A2RL_')));
  return a2rl(['verify-bundle', file, ...extra], { env, cwd: scratch });
}

const pubkey = () => path.join(home, 'keys', 'ledger-ed25519.pub.pem');

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-audit-e2e-'));
  scratch = mkdtempSync(path.join(os.tmpdir(), 'a2rl-audit-offline-'));
  const run = await a2rl(['run', '--task', 'ref-arith', '--agent', 'reference', '--budget', '60s', '--json']);
  if (run.code !== 0) throw new Error(`a2rl run failed (${run.code}): ${run.stderr}`);
  runId = (JSON.parse(run.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
  bundle = path.join(home, 'bundle.tar.gz');
  const exported = await a2rl(['export', runId, '-o', bundle]);
  if (exported.code !== 0) throw new Error(`a2rl export failed (${exported.code}): ${exported.stderr}`);
}, 180_000);
afterAll(() => {
  rmSync(home, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});

describe('a2rl export + a2rl verify-bundle on a reference-agent run', () => {
  it('verifies offline, pinned to the ledger key, touching nothing in the working directory', async () => {
    const r = await verifyOffline(bundle, '--pubkey', pubkey());
    expect(r).toMatchObject({ code: 0 });
    expect(r.stdout).toMatch(new RegExp(`^OK .*run ${runId}, \\d+ events, [1-9]\\d* signed tree heads`));
    expect(readdirSync(scratch)).toEqual([]);
  });

  it('verifies a bundle exported before bundles named their report renderer, saying its reports were not re-rendered; a current one with an edited report fails', async () => {
    const { files } = await readTarGz(bundle);
    // Format 1 also carried fewer kinds of blob (format 3 added executed files, the agent home…).
    const older = asOlderFormat(files, 'a2rl.audit-bundle/1')
      .set('reports/report.md', Buffer.from(`${files.get('reports/report.md')!.toString()}older renderer\n`));
    const olderFile = path.join(home, 'older.tar.gz');
    await writeTarGz(olderFile, [...older].map(([p, body]) => ({ path: p, size: body.length, body })), new Date(0));
    const r = await verifyOffline(olderFile, '--pubkey', pubkey());
    expect(r).toMatchObject({ code: 0 });
    expect(r.stdout).toMatch(/^OK .*; chain, proofs and artifacts verified, reports not re-rendered \(another renderer version\); signed by key/);
    expect(r.stderr).toMatch(/^note: bundle\.json names no report renderer \(format "a2rl\.audit-bundle\/1": exported before bundles recorded it\); this a2rl renders "a2rl\.report\/\d+", so reports\/ were not re-rendered/m);
    const json = await verifyOffline(olderFile, '--pubkey', pubkey(), '--json');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, renderer: null, reportsChecked: false, notes: [expect.stringMatching(/^bundle\.json names no report renderer/)] });

    const edited = new Map(files).set('reports/report.md', older.get('reports/report.md')!);
    const editedFile = path.join(home, 'edited-report.tar.gz');
    await writeTarGz(editedFile, [...edited].map(([p, body]) => ({ path: p, size: body.length, body })), new Date(0));
    const failed = await verifyOffline(editedFile, '--pubkey', pubkey());
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain("failed verification: reports/report.md differs from the report re-rendered from the bundle's events and blobs");
  });

  it('exports byte-identical bundles of the same run', async () => {
    const again = path.join(home, 'again.tar.gz');
    expect((await a2rl(['export', runId, '-o', again])).code).toBe(0);
    expect(readFileSync(again).equals(readFileSync(bundle))).toBe(true);
  });

  it('bundles the same reports `a2rl report` renders', async () => {
    const { files } = await readTarGz(bundle);
    for (const format of ['md', 'json', 'html']) {
      const r = await a2rl(['report', runId, '--format', format]);
      expect(r.code).toBe(0);
      expect(files.get(`reports/report.${format}`)!.toString('utf8')).toBe(r.stdout);
    }
    expect([...files.keys()].some((name) => /PRIVATE/.test(files.get(name)!.toString('latin1')))).toBe(false);
  });

  it('fails after any single-byte change to events.ndjson, naming the line', async () => {
    const { files } = await readTarGz(bundle);
    const events = files.get('events.ndjson')!;
    const lineStarts = [0];
    for (let i = 0; i + 1 < events.length; i++) if (events[i] === 0x0a) lineStarts.push(i + 1);
    // First byte, last byte (the final newline), a line boundary, and spread positions in between.
    const positions = [0, events.length - 1, lineStarts[3] - 1, ...Array.from({ length: 9 }, (_, k) => Math.floor(((k + 1) * events.length) / 11))];
    for (const [n, pos] of positions.entries()) {
      const bytes = Buffer.from(events);
      bytes[pos] = bytes[pos] === 0x41 ? 0x42 : 0x41; // 'A' or 'B': changes any byte, JSON-significant or not
      const copy = new Map(files).set('events.ndjson', bytes);
      const file = path.join(home, `flipped-${n}.tar.gz`);
      await writeTarGz(file, [...copy].map(([p, body]) => ({ path: p, size: body.length, body })), new Date(0));
      const r = await verifyOffline(file, '--pubkey', pubkey());
      const line = lineStarts.filter((s) => s <= pos).length;
      expect({ pos, code: r.code }).toEqual({ pos, code: 1 });
      expect(r.stderr).toContain(`failed verification: events.ndjson line ${line}: `);
    }
  }, 120_000);

  it('--json lists every failure; a bundle checked against another key fails naming the key', async () => {
    const other = path.join(home, 'other.pub.pem');
    writeFileSync(other, generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }));
    const r = await verifyOffline(bundle, '--pubkey', other, '--json');
    expect(r.code).toBe(1);
    const result = JSON.parse(r.stdout) as { ok: boolean; failures: Array<{ check: string; text: string }> };
    expect(result.ok).toBe(false);
    expect(result.failures[0].text).toMatch(/^public-key\.pem \(key id \w+\) is not the key given with --pubkey/);
    expect(result.failures.filter((f) => f.check === 'tree-head').length).toBeGreaterThan(0);
  });

  it('fails without --pubkey when the key is not trusted, in one line saying why and what to do', async () => {
    const r = await verifyOffline(bundle);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^a2rl: bundle .* failed verification: public-key\.pem: the bundle is signed by key \w{16}, which is not a trusted key .*--pubkey <file>.*a2rl keys trust <file>.*--trust-embedded-key/),
    ]);
    expect(readdirSync(scratch)).toEqual([]);
  });

  it('--trust-embedded-key accepts the bundled key, with a note that it was checked against nothing', async () => {
    const r = await verifyOffline(bundle, '--trust-embedded-key');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/; signed by key \w{16} \(the embedded key, unchecked\)\n$/);
    expect(r.stderr).toMatch(/^note: signed by key \w{16}, the key inside the bundle, which was not checked against a trust list \(--trust-embedded-key\)/);
    const both = await verifyOffline(bundle, '--trust-embedded-key', '--pubkey', pubkey());
    expect(both.code).toBe(1);
    expect(both.stderr).toContain('give --pubkey <file> or --trust-embedded-key, not both');
  });

  it("trusts this ledger's own key, and a key added with `a2rl keys trust` until `a2rl keys untrust`", async () => {
    const own = await a2rl(['verify-bundle', bundle]);
    expect(own.code).toBe(0);
    expect(own.stdout).toContain('(a trusted key)');

    const reviewer = mkdtempSync(path.join(os.tmpdir(), 'a2rl-reviewer-'));
    try {
      const env = { ...process.env, A2RL_HOME: reviewer };
      const shown = await a2rl(['keys', 'show']); // what the signer hands over: the PEM and its key id
      const keyFile = path.join(reviewer, 'signer-key.txt');
      writeFileSync(keyFile, shown.stdout);
      const keyId = /key id: (\w+)/.exec(shown.stdout)![1];

      expect((await a2rl(['verify-bundle', bundle], { env })).code).toBe(1);
      const trusted = await a2rl(['keys', 'trust', keyFile], { env });
      expect(trusted).toMatchObject({ code: 0 });
      expect(trusted.stdout).toMatch(new RegExp(`^trusted: key id ${keyId}, fingerprint sha256:${keyId}[0-9a-f]{48} \\(in .*keys/trusted\\)\n$`));
      const listed = JSON.parse((await a2rl(['keys', 'trusted', '--json'], { env })).stdout) as Array<{ keyId: string; source: string }>;
      expect(listed).toEqual([expect.objectContaining({ keyId, source: 'trusted' })]);
      const ok = await a2rl(['verify-bundle', bundle], { env });
      expect(ok.code).toBe(0);
      expect(ok.stdout).toContain(`signed by key ${keyId} (a trusted key)`);

      expect((await a2rl(['keys', 'untrust', keyId], { env })).stdout).toContain(`no longer trusted: key id ${keyId}`);
      expect((await a2rl(['verify-bundle', bundle], { env })).code).toBe(1);
      const junk = await a2rl(['keys', 'trust', path.join(reviewer, 'nothing.pem')], { env });
      expect(junk.code).toBe(1);
      expect(junk.stderr).toMatch(/^a2rl: cannot read key file .*nothing\.pem: /);
    } finally {
      rmSync(reviewer, { recursive: true, force: true });
    }
  }, 60_000);

  it('refuses a gzip bomb (2 MB inflating to 2 GiB) in one line, without inflating it', async () => {
    const bomb = path.join(home, 'bomb.tar.gz');
    writeFileSync(bomb, gzipBomb([{ path: 'events.ndjson', size: 2 * 1024 ** 3 }]));
    const r = await verifyOffline(bomb, '--pubkey', pubkey());
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^a2rl: bundle .* failed verification: the archive inflates to more than \d+ bytes \(entry "events\.ndjson" declares 2147483648 bytes.*refused as a possible decompression bomb.*--max-inflated/),
    ]);
    const bad = await verifyOffline(bomb, '--pubkey', pubkey(), '--max-inflated', 'lots');
    expect(bad.stderr).toContain('--max-inflated takes a size in bytes such as 8G, 512M or 1048576, got "lots"');
  }, 60_000);

  it('refuses to export an unknown run and to verify a missing file, with clear messages', async () => {
    const r = await a2rl(['export', 'no-such-run', '-o', path.join(home, 'x.tar.gz')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no run "no-such-run" in the ledger');
    expect(existsSync(path.join(home, 'x.tar.gz'))).toBe(false);
    const v = await verifyOffline(path.join(scratch, 'missing.tar.gz'));
    expect(v.code).toBe(1);
    expect(v.stderr).toContain('no bundle file');
  });
});
