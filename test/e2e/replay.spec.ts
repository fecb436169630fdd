import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { runA2rl } from './a2rl-cli.js';

// `a2rl replay` end to end through the built binary, on a reference-agent run: the workspace it
// materialises at a point must hold exactly the files (by sha256) the run recorded up to that point.

interface Ev {
  type: string;
  seq: number;
  occurredAt: string;
  data: Record<string, unknown>;
}
interface Entry {
  path: string;
  sha256: string;
}

let home: string;
let runId: string;
let evs: Ev[];
let outs = 0;

async function a2rl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return runA2rl(args, { env: { ...process.env, A2RL_HOME: home } });
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** path → sha256 of every regular file under `dir`. */
function hashes(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const abs = path.join(entry.parentPath, entry.name);
    out[path.relative(dir, abs).split(path.sep).join('/')] = sha256(readFileSync(abs));
  }
  return out;
}

/** What the run recorded up to `seq`, folded here from the raw events (independently of the index). */
function recordedAt(seq: number): Record<string, string> {
  const files: Record<string, string> = {};
  for (const e of evs.filter((x) => x.seq <= seq)) {
    if (e.type === 'WorkspacePrepared') for (const f of e.data.dataManifest as Entry[]) files[f.path] = f.sha256;
    if (e.type === 'FileChanged') {
      if (e.data.op === 'delete') delete files[e.data.path as string];
      else files[e.data.path as string] = e.data.sha256 as string;
    }
    if (e.type === 'SubmissionReceived') {
      const dir = e.data.modelPath as string;
      for (const p of Object.keys(files)) if (p.startsWith(`${dir}/`)) delete files[p];
      for (const f of e.data.manifest as Entry[]) files[`${dir}/${f.path}`] = f.sha256;
    }
  }
  return files;
}

async function materialize(at: string): Promise<{ dir: string; stdout: string }> {
  const dir = path.join(home, `replay-${++outs}`);
  const r = await a2rl(['replay', runId, '--at', at, '--out', dir]);
  if (r.code !== 0) throw new Error(`replay --at ${at} failed (${r.code}): ${r.stderr}`);
  return { dir, stdout: r.stdout };
}

const ofType = (type: string) => evs.filter((e) => e.type === type);

beforeAll(async () => {
  home = mkdtempSync(path.join(os.tmpdir(), 'a2rl-replay-e2e-'));
  const r = await a2rl(['run', '--task', 'ref-arith', '--agent', 'reference', '--budget', '60s', '--json']);
  if (r.code !== 0) throw new Error(`a2rl run failed (${r.code}): ${r.stderr}`);
  runId = (JSON.parse(r.stdout.trim().split('\n').pop()!) as { runId: string }).runId;
  const events = await a2rl(['events', runId, '--json']);
  evs = events.stdout.trim().split('\n').map((l) => JSON.parse(l) as Ev);
}, 120_000);
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('a2rl replay --at', () => {
  it('reproduces the recorded files, by sha256, at every point where the workspace changed', async () => {
    const changing = evs.filter((e) => ['WorkspacePrepared', 'FileChanged', 'SubmissionReceived'].includes(e.type)).map((e) => e.seq);
    expect(ofType('SubmissionReceived').length).toBeGreaterThanOrEqual(2);
    for (const seq of [0, ...changing]) {
      const { dir, stdout } = await materialize(String(seq));
      expect(hashes(dir)).toEqual(recordedAt(seq));
      expect(stdout).toContain(`as of seq ${seq} (`);
    }
  }, 120_000);

  it("at the last seq, holds code/, output/, data/ and models/ byte for byte as the run's workspace has them", async () => {
    const last = evs.at(-1)!.seq;
    const { dir } = await materialize(String(last));
    const workspace = path.join(home, 'workspaces', runId);
    for (const sub of ['code', 'output', 'data', 'models']) {
      const real = hashes(path.join(workspace, sub));
      expect(Object.keys(real).length).toBeGreaterThan(0);
      expect(hashes(path.join(dir, sub))).toEqual(real);
    }
  });

  it('resolves an ISO time to the last event at or before it', async () => {
    const graded = ofType('SubmissionGraded')[0];
    const seq = Math.max(...evs.filter((e) => Date.parse(e.occurredAt) <= Date.parse(graded.occurredAt)).map((e) => e.seq));
    const { dir, stdout } = await materialize(graded.occurredAt);
    expect(stdout).toContain(`as of seq ${seq} (`);
    expect(hashes(dir)).toEqual(recordedAt(seq));
  });

  it('fails clearly for an unknown run, a seq out of range, a time before the run and a non-empty --out', async () => {
    const last = evs.at(-1)!.seq;
    const out = path.join(home, 'refused');
    expect(await a2rl(['replay', 'no-such-run', '--at', '0', '--out', out])).toMatchObject({ code: 1, stderr: expect.stringContaining('no run "no-such-run"') });
    expect((await a2rl(['replay', runId, '--at', String(last + 1), '--out', out])).stderr).toContain(`seq ${last + 1} is out of range for run ${runId}: its events are seq 0..${last}`);
    expect((await a2rl(['replay', runId, '--at', '2001-01-01T00:00:00Z', '--out', out])).stderr).toContain(`is before run ${runId} began`);
    const { dir } = await materialize('1');
    writeFileSync(path.join(dir, 'extra.txt'), 'x');
    const refused = await a2rl(['replay', runId, '--at', '2', '--out', dir]);
    expect(refused).toMatchObject({ code: 1, stderr: expect.stringContaining('is not empty') });
    expect((await a2rl(['replay', runId, '--at', '2', '--out', dir, '--force'])).code).toBe(0);
    expect(hashes(dir)).toEqual(recordedAt(2));
  });
});

describe('a2rl replay --timeline', () => {
  it('lists every seq with its type and time (JSON) and a summary line per event (text)', async () => {
    const json = await a2rl(['replay', runId, '--timeline', '--json']);
    const entries = json.stdout.trim().split('\n').map((l) => JSON.parse(l) as { seq: number; type: string; occurredAt: string; summary: string });
    expect(entries.map((e) => [e.seq, e.type, e.occurredAt])).toEqual(evs.map((e) => [e.seq, e.type, e.occurredAt]));
    const text = (await a2rl(['replay', runId, '--timeline'])).stdout.trim().split('\n');
    expect(text).toHaveLength(evs.length + 1);
    const graded = ofType('SubmissionGraded')[0];
    expect(text[graded.seq + 1]).toMatch(new RegExp(`^${graded.seq}\\s+${graded.occurredAt}\\s+SubmissionGraded\\s+${graded.data.submissionId} score `));
  });
});

describe('a2rl replay --diff', () => {
  it('shows the code revision between two submissions', async () => {
    const [first, second] = ofType('SubmissionReceived');
    const revised = evs.filter((e) => e.type === 'FileChanged' && e.data.path === 'code/train.mjs' && e.seq > first.seq && e.seq < second.seq);
    expect(revised.length).toBeGreaterThan(0);

    const json = await a2rl(['replay', runId, '--diff', String(first.seq), String(second.seq), '--json']);
    const diff = JSON.parse(json.stdout) as { files: Array<{ path: string; change: string; before: { sha256: string }; after: { sha256: string }; diff: { hunks: Array<{ lines: string[] }> } }> };
    const train = diff.files.find((f) => f.path === 'code/train.mjs')!;
    expect(train).toMatchObject({ change: 'modified', before: { sha256: recordedAt(first.seq)['code/train.mjs'] }, after: { sha256: revised.at(-1)!.data.sha256 } });
    const lines = train.diff.hunks.flatMap((h) => h.lines);
    expect(lines.some((l) => l.startsWith('-'))).toBe(true);
    expect(lines.some((l) => l.startsWith('+'))).toBe(true);
    const dir = second.data.modelPath as string;
    expect(diff.files.filter((f) => f.change === 'added').map((f) => f.path)).toEqual(
      (second.data.manifest as Entry[]).map((f) => `${dir}/${f.path}`).sort(),
    );

    const text = (await a2rl(['replay', runId, '--diff', String(first.seq), String(second.seq)])).stdout;
    expect(text).toContain(`M code/train.mjs`);
    expect(text).toContain('--- a/code/train.mjs');
    expect(text).toContain('+++ b/code/train.mjs');
    for (const l of lines) expect(text).toContain(l);
  });
});
