import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecCapturer, openInRoot, scriptOperand } from './exec-capture.js';
import { StraceState, type ExecHooks } from './process-tracer-state.js';
import { readAllStats, readArgv, readCwd, type ProcessStart } from './process-monitor.js';
import { until } from '../../test/testing/helpers.js';

describe('scriptOperand: the script an interpreter runs, by the real executable', () => {
  it('finds the first operand after options and their values', () => {
    expect(scriptOperand('python3.11', ['-u', '-W', 'ignore', 'x.py', 'a'])).toBe('x.py');
    expect(scriptOperand('bash', ['-e', '-o', 'pipefail', 'run.sh'])).toBe('run.sh');
    expect(scriptOperand('node', ['--require', 'r.js', 'app.mjs'])).toBe('app.mjs');
    expect(scriptOperand('perl', ['-w', 'x.pl'])).toBe('x.pl');
    expect(scriptOperand('python3', ['--', 'x.py'])).toBe('x.py');
  });

  it('finds none for inline code, a module, stdin, or a program that is no interpreter', () => {
    expect(scriptOperand('python3', ['-c', 'print(1)'])).toBeUndefined();
    expect(scriptOperand('python3', ['-m', 'torch.distributed.run', 'train.py'])).toBeUndefined();
    expect(scriptOperand('python3', ['-uc', 'x'])).toBeUndefined();
    expect(scriptOperand('bash', ['-lc', 'python x.py'])).toBeUndefined();
    expect(scriptOperand('sh', ['-s'])).toBeUndefined();
    expect(scriptOperand('node', ['-e', 'x'])).toBeUndefined();
    expect(scriptOperand('sleep', ['x.py'])).toBeUndefined();
  });
});

describe('openInRoot: resolves a path as the process sees it, never outside its root', () => {
  let dir: string;
  let child: ChildProcess | undefined;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'a2rl-exec-root-'))));
  afterEach(() => {
    child?.kill('SIGKILL');
    child = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  /** A process whose root is `dir/root` (bwrap), with /usr and its links so that it can run sleep. */
  async function rooted(): Promise<number> {
    const root = join(dir, 'root');
    mkdirSync(join(root, 'ws', 'code'), { recursive: true });
    const args = ['--bind', root, '/', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', '--chdir', '/ws/code', '--unshare-pid', '--die-with-parent', '/usr/bin/sleep', '60'];
    child = spawn('bwrap', args, { stdio: 'ignore' });
    // The sleep is a descendant of bwrap (under its pid namespace's init): wait until it runs there.
    return until('the rooted sleep to start', () => {
      const stats = readAllStats();
      const below = (pid: number): boolean => pid === child!.pid || (pid > 1 && below(stats.get(pid)?.ppid ?? 0));
      const sleeper = [...stats.values()].find((st) => below(st.ppid) && readArgv(st.pid)?.join(' ') === '/usr/bin/sleep 60');
      return sleeper && readCwd(sleeper.pid) === '/ws/code' ? sleeper.pid : undefined;
    });
  }

  it("follows links inside the process's root and refuses every way out of it", async () => {
    const pid = await rooted();
    const root = join(dir, 'root');
    writeFileSync(join(root, 'ws', 'code', 'real.py'), 'print("inside")\n');
    writeFileSync(join(dir, 'secret'), 'host secret\n'); // outside the process's root
    symlinkSync('real.py', join(root, 'ws', 'code', 'rel.py'));
    symlinkSync('/ws/code/real.py', join(root, 'ws', 'code', 'abs.py'));
    symlinkSync(join(dir, 'secret'), join(root, 'ws', 'code', 'host.py')); // the host's path: not in its root
    symlinkSync('../../../../../../../secret', join(root, 'ws', 'code', 'up.py'));
    symlinkSync('loop.py', join(root, 'ws', 'code', 'loop.py'));
    const opened = (path: string) => {
      const r = openInRoot(pid, path);
      if (!('fd' in r)) return r;
      const content = readFileSync(r.fd, 'utf8');
      closeSync(r.fd);
      return { path: r.path, content };
    };
    for (const path of ['real.py', 'rel.py', './abs.py', '/ws/code/../code/./abs.py', '/../../ws/code/real.py']) {
      expect(opened(path)).toEqual({ path: '/ws/code/real.py', content: 'print("inside")\n' });
    }
    expect(opened('host.py')).toMatchObject({ error: 'not found' });
    expect(opened('up.py')).toMatchObject({ error: 'not found', path: '/secret' }); // `..` stops at its root
    expect(opened('loop.py')).toMatchObject({ error: 'too many links' });
    expect(opened('/ws')).toMatchObject({ error: 'not a regular file' });
    expect(opened('/dev/zero')).toMatchObject({ error: 'not a regular file' });
  });

  it('captures a script argument from inside the root with its bytes, and a link outside as not found', async () => {
    const pid = await rooted();
    const root = join(dir, 'root');
    writeFileSync(join(root, 'ws', 'code', 'x.py'), 'x = 1\n');
    symlinkSync(join(dir, 'secret'), join(root, 'ws', 'code', 'host.py'));
    writeFileSync(join(dir, 'secret'), 'host secret\n');
    const capturer = new ExecCapturer();
    const facts = capturer.capture(pid, '/usr/bin/sleep', ['python3', 'x.py']);
    expect(facts.exe!.path).toBe('/usr/bin/sleep'); // not an interpreter: no script
    expect(facts.script).toBeUndefined();
    // As if it were python: what `python3 x.py` and `python3 host.py` would run there.
    const asPython = new ExecCapturer();
    const viaArg = (asPython as unknown as { captureInRoot(pid: number, path: string): unknown }).captureInRoot(pid, 'x.py');
    expect(viaArg).toMatchObject({ path: '/ws/code/x.py', size: 6 });
    expect(Buffer.from((viaArg as { content: Uint8Array }).content).toString()).toBe('x = 1\n');
    expect((asPython as unknown as { captureInRoot(pid: number, path: string): unknown }).captureInRoot(pid, 'host.py')).toEqual({ path: '/tmp', note: 'not found' }); // the host's /tmp is not in its root
  });
});

describe('StraceState: resumes what strace stopped at exec, and only that', () => {
  const exec = (pid: number, at: string, file: string) => `${pid} ${at} execve("${file}", ["${file}"], 0x1 /* 1 var */) = 0`;

  function machine() {
    const starts: ProcessStart[] = [];
    const gaps: string[] = [];
    const resumed: number[] = [];
    const hooks: ExecHooks = { capture: () => ({ exe: { path: '/usr/bin/x', sha256: 'a'.repeat(64), size: 1 } }), resume: (pid) => resumed.push(pid) };
    const state = new StraceState({ start: (p) => starts.push(p), exit: () => {}, gap: (r) => gaps.push(r) }, 900001, '/ws', 4242, hooks);
    return { state, starts, gaps, resumed };
  }

  it('resumes a process once strace reports it stopped by the kernel-sent SIGSTOP, never for the agent’s own SIGSTOP', () => {
    const { state, starts, resumed } = machine();
    state.line(exec(900001, '1.000000', '/bin/sh'));
    state.line('900001 1.000100 clone(child_stack=NULL, flags=SIGCHLD) = 900002');
    state.line(exec(900002, '1.000200', '/bin/x'));
    expect(resumed).toEqual([]); // captured, but not yet stopped
    state.line('900002 1.000300 --- SIGSTOP {si_signo=SIGSTOP, si_code=SI_KERNEL} ---');
    state.line('900002 1.000400 --- stopped by SIGSTOP ---');
    expect(resumed).toEqual([900002]);
    state.line('900002 1.000500 --- SIGSTOP {si_signo=SIGSTOP, si_code=SI_USER, si_pid=900001, si_uid=1000} ---');
    state.line('900002 1.000600 --- stopped by SIGSTOP ---');
    expect(resumed).toEqual([900002]); // the agent stopped it: not ours to undo
    expect(starts.map((s) => s.capture)).toEqual(['after-start', 'at-exec']);
  });

  it("takes an exec a2rl-trace let go at once from its `known exec` line, and only the exec right after it", () => {
    const known: string[] = [];
    const captured: number[] = [];
    const hooks: ExecHooks = {
      capture: (pid) => (captured.push(pid), { exe: { path: '/usr/bin/x', sha256: 'a'.repeat(64), size: 1 } }),
      captureKnown: (identity, exe) => (known.push(identity), { exe: { path: exe, sha256: 'b'.repeat(64), size: 2 } }),
      resume: () => {},
    };
    const starts: ProcessStart[] = [];
    const state = new StraceState({ start: (p) => starts.push(p), exit: () => {} }, 900001, '/ws', 4242, hooks, 'ptrace');
    state.line(exec(900001, '1.000000', '/bin/sh'));
    state.line('900001 1.000100 clone(flags=0) = 900002 /* 900002 in the tracer\'s PID NS */');
    state.line('900002 1.000200 --- known exec 2049 131 39000 1700000000 5 1700000001 6 "/usr/bin/git" ---');
    state.line(exec(900002, '1.000200', '/usr/bin/git'));
    // A `known exec` line not followed by its exec line names nothing for a later exec.
    state.line('900001 1.000300 clone(flags=0) = 900003 /* 900003 in the tracer\'s PID NS */');
    state.line('900003 1.000400 --- known exec 2049 131 39000 1700000000 5 1700000001 6 "/usr/bin/git" ---');
    state.line('900003 1.000410 chdir("/ws/code") = 0');
    state.line(exec(900003, '1.000500', '/usr/bin/git'));
    expect(known).toEqual(['2049 131 39000 1700000000 5 1700000001 6']);
    expect(captured).toEqual([900001, 900003]);
    expect(starts.find((s) => s.pid === 900002)).toMatchObject({ capture: 'at-exec', exe: { path: '/usr/bin/git', sha256: 'b'.repeat(64) } });
    expect(starts.find((s) => s.pid === 900003)).toMatchObject({ capture: 'at-exec', exe: { sha256: 'a'.repeat(64) } });
  });

  it('reports a gap when another process continued it before the capture was done', () => {
    const { state, gaps } = machine();
    state.line(exec(900001, '1.000000', '/bin/sh'));
    state.line('900001 1.000100 clone(child_stack=NULL, flags=SIGCHLD) = 900002');
    state.line(exec(900002, '1.000200', '/bin/x'));
    state.line('900002 1.000250 --- SIGCONT {si_signo=SIGCONT, si_code=SI_USER, si_pid=4242, si_uid=0} ---'); // ours
    state.line('900002 1.000260 --- SIGCONT {si_signo=SIGCONT, si_code=SI_USER, si_pid=0, si_uid=0} ---'); // ours, from outside its pid namespace
    expect(gaps).toEqual([]);
    state.line('900002 1.000300 --- SIGCONT {si_signo=SIGCONT, si_code=SI_USER, si_pid=900001, si_uid=1000} ---');
    expect(gaps).toEqual([expect.stringContaining('pid 900002 was continued by pid 900001 before the harness had read')]);
  });
});

describe('ExecCapturer: what it caches across execs', () => {
  let dir: string;
  const children: ChildProcess[] = [];
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'a2rl-exec-cache-'))));
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const running = async (file: string): Promise<number> => {
    const child = spawn(file, ['30'], { stdio: 'ignore' });
    children.push(child);
    await until(`${file} running`, () => readArgv(child.pid!)?.[0] === file);
    return child.pid!;
  };
  const cacheOf = (c: ExecCapturer) => (c as unknown as { cache: Map<string, { content?: Uint8Array }> }).cache;

  it('keeps the bytes of a small system executable once, and reads an executable of the agent at every exec', async () => {
    const capturer = new ExecCapturer();
    const system = await running('/usr/bin/sleep');
    const bytes = readFileSync('/usr/bin/sleep');
    const first = capturer.capture(system, '/usr/bin/sleep', ['/usr/bin/sleep', '30']);
    const again = capturer.capture(system, '/usr/bin/sleep', ['/usr/bin/sleep', '30']);
    expect(Buffer.from(first.exe!.content!).equals(bytes)).toBe(true);
    expect(Buffer.from(again.exe!.content!).equals(bytes)).toBe(true); // the cached capture still carries them
    expect(again.exe!.sha256).toBe(first.exe!.sha256);
    expect(cacheOf(capturer).size).toBe(1);
    // The same bytes outside the system directories: the agent could have written it, so never cached.
    const own = join(dir, 'sleep');
    writeFileSync(own, bytes, { mode: 0o755 });
    const pid = await running(own);
    const ownFacts = capturer.capture(pid, own, [own, '30']);
    expect(Buffer.from(ownFacts.exe!.content!).equals(bytes)).toBe(true);
    expect(cacheOf(capturer).size).toBe(1);
  });

  it('keeps the exact bytes of a script read in several pieces, and of one rewritten between two execs', async () => {
    const capturer = new ExecCapturer();
    const pid = await running('/usr/bin/sleep');
    const asScript = (path: string) => (capturer as unknown as { captureInRoot(pid: number, path: string): { sha256: string; size: number; content?: Uint8Array } }).captureInRoot(pid, path);
    const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    // 2.5 MiB: more than one 1 MiB piece, less than what is kept (16 MiB).
    const big = Buffer.from(Array.from({ length: 2.5 * 1024 * 1024 }, (_, i) => (i * 7919) % 251));
    writeFileSync(join(dir, 'big.py'), big);
    const read = asScript(join(dir, 'big.py'));
    expect([read.size, read.sha256, Buffer.from(read.content!).equals(big)]).toEqual([big.length, sha(big), true]);
    // Rewritten longer, then shorter: each capture has the bytes of the file as it then is.
    for (const text of ['print(1)\n', 'print("a longer script than the first one")\n', 'x\n']) {
      writeFileSync(join(dir, 'small.py'), text);
      const got = asScript(join(dir, 'small.py'));
      expect([got.size, got.sha256, Buffer.from(got.content!).toString()]).toEqual([text.length, sha(Buffer.from(text)), text]);
    }
  });

  it('names a system program it has read to a2rl-trace once, by its exact identity, and gives the same facts for its known execs', async () => {
    const capturer = new ExecCapturer();
    const pid = await running('/usr/bin/sleep');
    const first = capturer.capture(pid, '/usr/bin/sleep', ['/usr/bin/sleep', '30']);
    const st = statSync('/usr/bin/sleep', { bigint: true });
    const billion = 1_000_000_000n;
    const identity = [st.dev, st.ino, st.size, st.mtimeNs / billion, st.mtimeNs % billion, st.ctimeNs / billion, st.ctimeNs % billion].join(' ');
    expect(capturer.takeKnown()).toEqual([`K ${identity}\n`]);
    capturer.capture(pid, '/usr/bin/sleep', ['/usr/bin/sleep', '30']);
    expect(capturer.takeKnown()).toEqual([]); // named once
    expect(capturer.captureKnown(identity, '/usr/bin/sleep')).toEqual({ exe: first.exe });
    expect(capturer.captureKnown('1 2 3 4 5 6 7', '/usr/bin/sleep').exe).toMatchObject({ path: '/usr/bin/sleep', note: expect.stringMatching(/not captured/) });
    // Not named: an executable of the agent's (it could rewrite it).
    const own = join(dir, 'sleep');
    writeFileSync(own, readFileSync('/usr/bin/sleep'), { mode: 0o755 });
    capturer.capture(await running(own), own, [own, '30']);
    expect(capturer.takeKnown()).toEqual([]);
    // An interpreter is named with the first arguments that make it run inline code, not a script.
    const python = realpathSync('/usr/bin/python3');
    const child = spawn(python, ['-c', 'import time; time.sleep(30)'], { stdio: 'ignore' });
    children.push(child);
    await until('python running', () => readArgv(child.pid!)?.[1] === '-c');
    expect(capturer.capture(child.pid!, python, [python, '-c', '…']).exe!.path).toBe(python);
    expect(capturer.takeKnown()).toEqual([expect.stringMatching(/^K (\d+ ){6}\d+ -c -m -\n$/)]);
  });
});
