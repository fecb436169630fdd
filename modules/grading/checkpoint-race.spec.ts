import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ManifestEntry } from '../ledger/events/catalog.js';
import { post, startGradingServer, type TestServer } from './testing/grading-fixtures.js';
import { until } from '../../test/testing/helpers.js';

// The race of issue 25: while /submit walks and archives a checkpoint, an agent-like loop swaps its
// parts (the checkpoint itself, a sub-directory, files) for symlinks to the held-out folder, a file in
// it and /etc. The harness runs as root, so following one would read anything. Proven three ways:
// inotify on the held-out folder (no open, read or listing by anyone), strace on this process (no
// descriptor of the harness ever resolves to the held-out folder or /etc), and what came back (errors,
// events, manifests, stored blobs) holds nothing from outside and names only paths in the checkpoint.

const here = path.dirname(fileURLToPath(import.meta.url));
const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const root = process.getuid?.() === 0;
const describeRoot = root && has('python3') ? describe : describe.skip;
const SWAP_SECONDS = 6;

/** The child's stdout lines, as they come. */
function collect(child: ChildProcess): string[] {
  const lines: string[] = [];
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const parts = (buffered + chunk.toString()).split('\n');
    buffered = parts.pop()!;
    lines.push(...parts);
  });
  return lines;
}

/** Waits until a line matches `pattern`; fails once the child's output has ended without one. */
async function untilLine(child: ChildProcess, lines: string[], pattern: RegExp): Promise<void> {
  await until(`${child.spawnargs.join(' ')} to print ${pattern}`, () => {
    if (lines.some((l) => pattern.test(l))) return true;
    if (child.stdout!.readableEnded) throw new Error(`${child.spawnargs.join(' ')} ended without printing ${pattern}: ${lines.join('\n')}`);
    return false;
  });
}

/** True once every thread of this process is traced (strace -f attaches them one by one). */
function allThreadsTraced(): boolean {
  return readdirSync('/proc/self/task').every((tid) => {
    try {
      return !/^TracerPid:\s+0$/m.test(readFileSync(`/proc/self/task/${tid}/status`, 'utf8'));
    } catch {
      return true; // the thread is gone
    }
  });
}

/** Every file in a filesystem artifact store. */
function blobFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) (e.isDirectory() ? walk : (f: string) => out.push(f))(path.join(d, e.name));
  };
  walk(dir);
  return out;
}

describeRoot('POST /submit while the agent swaps checkpoint parts for links to host places (harness as root)', () => {
  let server: TestServer;
  let traceDir: string;
  beforeAll(async () => {
    server = await startGradingServer();
    traceDir = await mkdtemp(path.join(os.tmpdir(), 'a2rl-race-trace-'));
  });
  afterAll(async () => {
    await server?.close();
    await rm(traceDir, { recursive: true, force: true });
  });

  it('never opens or lists anything outside, names only paths inside the checkpoint, and still grades the honest checkpoint', async () => {
    const r = await server.newRun();
    const tag = randomBytes(6).toString('hex');
    const secretName = `SECRET-${tag}.txt`;
    const secretContent = `held-out-secret-${tag}`;
    const heldOut = r.ctx.privateDir; // holds weights.json {"score":100}: a followed link would score 100
    await writeFile(path.join(heldOut, secretName), secretContent);
    const files = { 'sub/a.bin': 'a', 'cfg/c.txt': 'c', 'extra.bin': 'x' };
    await r.checkpoint('ck', { score: 50 }, files);
    const sha = (s: string) => createHash('sha256').update(s).digest('hex');
    const honestHashes: Record<string, string> = { 'weights.json': sha(JSON.stringify({ score: 50 })), ...Object.fromEntries(Object.entries(files).map(([p, c]) => [p, sha(c)])) };

    const first = await post(`${r.url}/submit`, { model_path: 'output/ck' });
    expect([first.status, first.body.score]).toEqual([200, 50]);

    const children: ChildProcess[] = [];
    let watchLines: string[] = [];
    let swapLines: string[] = [];
    const answers: Array<{ status: number; body: any }> = [];
    const straceLog = path.join(traceDir, 'strace.log');
    let straced = false;
    try {
      const watcher = spawn('python3', [path.join(here, '..', 'workspace-fs', 'testing', 'inotify-watch.py'), heldOut], { stdio: ['ignore', 'pipe', 'inherit'] });
      children.push(watcher);
      watchLines = collect(watcher);
      await untilLine(watcher, watchLines, /^ready$/);
      const swapper = spawn('python3', [path.join(here, 'testing', 'swap-loop.py'), r.ws.outputDir, heldOut, path.join(heldOut, secretName), String(SWAP_SECONDS)], {
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      children.push(swapper);
      swapLines = collect(swapper);
      await untilLine(swapper, swapLines, /^ready$/);
      // Both helpers started before strace attaches, so only this process (the harness) is traced.
      if (has('strace')) {
        const strace = spawn('strace', ['-f', '-qq', '-yy', '-e', 'trace=open,openat,openat2,getdents64', '-o', straceLog, '-p', String(process.pid)], { stdio: 'ignore' });
        children.push(strace);
        straced = await until('strace to attach to every thread', allThreadsTraced);
      }

      const done = new Promise<void>((resolve) => swapper.once('exit', () => resolve()));
      let finished = false;
      void done.then(() => (finished = true));
      swapper.stdin!.write('go\n');
      while (!finished) answers.push(await post(`${r.url}/submit`, { model_path: 'output/ck' }));
      await untilLine(swapper, swapLines, /^swaps \d+$/);

      if (straced) {
        const strace = children[children.length - 1];
        const exited = new Promise((resolve) => strace.once('exit', resolve));
        strace.kill('SIGINT'); // detaches cleanly
        await exited;
      }
      // Control: the watcher does see an open of the held-out folder (by us, now).
      const before = watchLines.length;
      await readFile(path.join(heldOut, secretName));
      await until('the watcher to see the control read', () => watchLines.slice(before).some((l) => l.endsWith(secretName)));
      expect(watchLines.slice(0, before).filter((l) => l !== 'ready')).toEqual([]); // nothing during the race
    } finally {
      for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }

    // The race really ran, and was both won (refusals) and lost (graded) by the agent's loop.
    expect(swapLines.find((l) => l.startsWith('swaps'))).toMatch(/^swaps [1-9]\d*$/);
    expect(answers.length).toBeGreaterThan(0);
    expect(answers.some((a) => a.status !== 200)).toBe(true);

    // No score from the held-out answers, and every refusal names only paths in the checkpoint.
    const allowed = [
      /^model_path "output\/ck" (leads \(through a symlink\) outside the workspace|does not exist \(or is a dangling symlink\))$/,
      /^checkpoint (file|entry) (weights\.json|extra\.bin|sub|cfg|sub\/a\.bin|cfg\/c\.txt) [^/]*$/,
      /^invalid checkpoint: weights\.json is missing or not JSON \(ENOENT: no such file or directory, open '<submitted checkpoint>\/weights\.json'\)$/,
    ];
    for (const a of answers) {
      if (a.status === 200) expect(a.body.score === 50 || a.body.error !== undefined).toBe(true);
      expect([200, 403, 404, 422]).toContain(a.status);
      const error: string | undefined = a.body.error;
      if (error !== undefined && !allowed.some((re) => re.test(error))) throw new Error(`unexpected error text: ${error}`);
    }
    expect(answers.every((a) => a.body.score !== 100)).toBe(true);

    // Nothing from outside in the record, the manifests or the stored blobs.
    const recorded = JSON.stringify(r.events) + JSON.stringify(answers);
    for (const leak of [secretName, secretContent, heldOut, server.home, '/etc', 'passwd', 'stash-']) expect(recorded).not.toContain(leak);
    for (const e of r.events.filter((ev) => ev.type === 'SubmissionReceived')) {
      for (const entry of (e.data as { manifest: ManifestEntry[] }).manifest) expect(entry.sha256).toBe(honestHashes[entry.path]);
    }
    for (const blob of blobFiles(path.join(server.home, 'artifacts', 'sha256'))) {
      const body = readFileSync(blob, 'utf8');
      expect([body.includes(secretContent), body.includes('"score":100')]).toEqual([false, false]);
    }
    expect(readdirSync(path.join(server.home, 'staging'))).toEqual([]);

    // No descriptor of the harness ever resolved outside: strace -yy prints what each fd really is.
    if (straced) {
      const log = readFileSync(straceLog, 'utf8');
      expect(log).toContain('/proc/self/fd/'); // the walk was traced
      const resolved = [...log.matchAll(/<(\/[^>]*)>/g)].map((m) => m[1]);
      expect(resolved.some((p) => p.startsWith(r.ws.outputDir))).toBe(true);
      expect(resolved.filter((p) => p === heldOut || p.startsWith(`${heldOut}/`) || p === '/etc' || p.startsWith('/etc/'))).toEqual([]);
    }

    // The honest checkpoint, left as it was, still submits: graded 50, same content as the first.
    const last = await post(`${r.url}/submit`, { model_path: 'output/ck' });
    expect([last.status, last.body.score]).toEqual([200, 50]);
    const received = r.events.filter((e) => e.type === 'SubmissionReceived');
    expect((received[received.length - 1].data as { checkpoint: { sha256: string } }).checkpoint.sha256).toBe((received[0].data as { checkpoint: { sha256: string } }).checkpoint.sha256);
  });
});
