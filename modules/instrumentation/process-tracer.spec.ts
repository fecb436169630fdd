import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { chmodSync, copyFileSync, existsSync, fstatSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { launchAgent, type LaunchOptions } from '../runs/agent-process.js';
import { processStartedFact, readAllStats, readArgv, readProcStat, type ProcessExit, type ProcessStart } from './process-monitor.js';
import type { CapturedFile } from './exec-capture.js';
import { programKind } from '../../projections/run-analysis/process-kind.js';
import { parseExecArgs, StraceTracer, straceWorks, TracerUnavailableError } from './process-tracer.js';
import { ptraceTracerBinary } from './ptrace-tracer.js';
import { sandboxCommand } from '../sandbox/sandbox.js';
import { fakeTask } from '../runs/testing/fake-task.js';
import { prepareWorkspace, type PreparedWorkspace } from '../runs/workspace.js';
import { until } from '../../test/testing/helpers.js';

interface Trace {
  starts: ProcessStart[];
  exits: ProcessExit[];
  gaps: { reason: string; count?: number }[];
  tracer: string;
  exit: { exitCode?: number; signal?: string };
}

/** The tracer the specs below run under (each describe.each block sets it). */
let kind: 'ptrace' | 'strace' = 'strace';
const newTracer = (callbacks: ConstructorParameters<typeof StraceTracer>[1]) =>
  kind === 'ptrace' ? new StraceTracer(ptraceTracerBinary()!, callbacks, 'ptrace') : new StraceTracer('strace', callbacks);

async function trace(file: string, args: string[], extra: Partial<LaunchOptions> = {}, whileRunning?: (so: Pick<Trace, 'starts' | 'exits'>) => Promise<void>): Promise<Trace> {
  const starts: ProcessStart[] = [];
  const exits: ProcessExit[] = [];
  const gaps: Trace['gaps'] = [];
  const handle = await launchAgent({
    file,
    args,
    cwd: tmpdir(),
    env: process.env,
    budgetMs: 90_000, // only a backstop (under jest's limit): traced programs run far slower on a busy machine
    graceMs: 500,
    onOutput: () => {},
    tracer: kind,
    monitor: { onStart: (p) => starts.push(p), onExit: (p) => exits.push(p), onGap: (reason, count) => gaps.push({ reason, count }) },
    ...extra,
  });
  await whileRunning?.({ starts, exits });
  const { reason: _, endedAt: _endedAt, ...exit } = await handle.exited;
  return { starts, exits, gaps, tracer: handle.tracer, exit };
}

const bash = (script: string, extra?: Partial<LaunchOptions>) => trace('bash', ['-c', script], extra);
const exitOf = (t: Trace, start: ProcessStart | undefined) => t.exits.find((e) => e.pid === start?.pid);
const startWith = (t: Pick<Trace, 'starts'>, line: string) => t.starts.find((s) => s.argv.join(' ') === line);

/** Resolves with `found()`'s first truthy value (never a fixed sleep: a loaded machine is slow); fails after a generous deadline. */
/** The pids of live processes whose whole command line is `line`. */
const pidsOf = (line: string) => [...readAllStats().values()].filter((st) => st.state !== 'Z' && readArgv(st.pid)?.join(' ') === line).map((st) => st.pid);

/** Every reported program has exactly one start and one exit: no thread, no double report. */
function expectPaired(t: Trace): void {
  expect(t.exits.map((e) => e.pid).sort()).toEqual(t.starts.map((s) => s.pid).sort());
}

describe.each(['ptrace', 'strace'] as const)('%s process tracer', (tracerKind) => {
  beforeAll(() => {
    kind = tracerKind;
    expect(kind === 'ptrace' ? ptraceTracerBinary() : straceWorks()).toBeTruthy();
  });

  it('records a child that crashes within a few ms with its exact exit code, and the root exit status', async () => {
    const t = await bash('sh -c "exit 3" train_sft; (exit 5); exit 4');
    expect(t.tracer).toBe(tracerKind);
    expect(t.exit).toEqual({ exitCode: 4 });
    const crashed = startWith(t, 'sh -c exit 3 train_sft')!;
    expect(crashed.executable).toMatch(/\/sh$/); // the file execve ran, found on PATH
    expect(exitOf(t, crashed)).toMatchObject({ exitCode: 3 });
    const root = t.starts.find((s) => s.argv[1] === '-c' && s.argv[2]?.startsWith('sh -c'))!;
    expect(root).toMatchObject({ ppid: process.pid, cwd: tmpdir() });
    expect(crashed.ppid).toBe(root.pid);
    expect(exitOf(t, root)).toMatchObject({ exitCode: 4 });
    expect(exitOf(t, crashed)!.endedAt).toBeGreaterThanOrEqual(crashed.startedAt);
    expect(t.gaps).toEqual([]);
    // A fork that never exec'd (the subshell) is a process too, running its parent's argv.
    const subshell = t.starts.find((s) => s.pid !== root.pid && s.argv.join(' ') === root.argv.join(' '))!;
    expect(subshell.ppid).toBe(root.pid);
    expect(exitOf(t, subshell)).toMatchObject({ exitCode: 5 });
    expectPaired(t);
  });

  it('reports the signal of a process killed by SIGKILL', async () => {
    const t = await bash('sleep 5 & sleep 0.2; kill -KILL $!; wait; true');
    const sleeper = startWith(t, 'sleep 5')!;
    expect(exitOf(t, sleeper)).toMatchObject({ signal: 'SIGKILL' });
    expect(exitOf(t, sleeper)!.exitCode).toBeUndefined();
    expectPaired(t);
  });

  it('decodes argv exactly: quotes, backslashes, newlines, tabs, control bytes, unicode, empty args', async () => {
    const weird = ['a"b\'c', 'back\\slash\\', 'line1\nline2', 'tab\there', '\x01\x7f', 'ü 日本 😀', '', ' ', '\\x41\\101', '...'];
    // Long enough to be sampled by a tick after the tracer's first read of the image (node's is ~100 MB).
    const t = await trace(process.execPath, ['-e', 'setTimeout(() => {}, 1000)', ...weird]);
    expect(t.starts).toHaveLength(1);
    expect(t.starts[0].argv).toEqual([process.execPath, '-e', 'setTimeout(() => {}, 1000)', ...weird]);
    expect(t.exits).toEqual([expect.objectContaining({ pid: t.starts[0].pid, exitCode: 0 })]);
    expect(t.exits[0].peakRssKb).toBeGreaterThan(1000); // sampled while it ran
  });

  it('does not turn the failed execs of a PATH lookup into processes', async () => {
    const path = `/nonexistent/a:/nonexistent/b:${process.env.PATH}`;
    const t = await bash('env no_such_command_zz; exit 0', { env: { ...process.env, PATH: path } });
    expect(t.starts.filter((s) => s.argv[0] === 'no_such_command_zz')).toEqual([]);
    const env = startWith(t, 'env no_such_command_zz')!;
    expect(exitOf(t, env)).toMatchObject({ exitCode: 127 });
    expect(t.starts.filter((s) => s.pid === env.pid)).toHaveLength(1);
    expectPaired(t);
  });

  it('ends a program replaced by exec without a status and gives the status to the new program', async () => {
    const t = await bash('exec sh -c "exit 6"');
    const [shell, sh] = t.starts;
    expect(sh.pid).toBe(shell.pid);
    expect(sh.argv).toEqual(['sh', '-c', 'exit 6']);
    const exits = t.exits.filter((e) => e.pid === shell.pid);
    expect(exits).toHaveLength(2);
    expect(exits[0].exitCode).toBeUndefined();
    expect(exits[0].signal).toBeUndefined();
    expect(exits[1]).toMatchObject({ exitCode: 6 });
    expect(t.exit).toEqual({ exitCode: 6 });
  });

  it('does not report threads (node starts several) nor double-report a long-lived process', async () => {
    const t = await bash(`${JSON.stringify(process.execPath)} -e "setTimeout(() => {}, 400)"`);
    expect(t.starts.filter((s) => s.argv[0] === process.execPath)).toHaveLength(1);
    expectPaired(t);
  });

  describe('inside bwrap', () => {
    let home: string;
    let ws: PreparedWorkspace;
    beforeAll(async () => {
      home = mkdtempSync('/var/tmp/a2rl-tracer-ws-');
      const task = fakeTask();
      ws = await prepareWorkspace({ workspacesRoot: join(home, 'workspaces'), taskCacheDir: join(home, 'tasks'), task, instructions: 'go', runId: 'run-1' });
      mkdirSync(join(home, 'agents'), { recursive: true });
      writeFileSync(join(home, 'agents', 'start.sh'), 'true\n');
    });
    afterAll(() => rmSync(home, { recursive: true, force: true }));

    it('reports host pids, exact statuses and parentage, and not the bwrap wrapper', async () => {
      const script = 'sh -c "exit 3"; sleep 5 & sleep 0.2; kill -KILL $!; wait; exit 4';
      const cmd = sandboxCommand({ kind: 'bwrap', workspace: ws.layout, agentDir: join(home, 'agents'), command: ['bash', '-c', script], env: {} });
      const t = await trace(cmd.file, cmd.args, { cwd: ws.layout.root, env: {}, fds: cmd.fds });
      expect(t.exit).toEqual({ exitCode: 4 });
      expect(t.starts.map((s) => s.argv[0])).not.toContain('/usr/bin/bwrap');
      expect(t.starts.map((s) => s.argv[0])).not.toContain('bwrap');
      const root = startWith(t, `bash -c ${script}`)!;
      expect(root.cwd).toBe(ws.layout.root);
      expect(root.pid).toBeGreaterThan(2); // a host pid, not the namespace's
      const sh = startWith(t, 'sh -c exit 3')!;
      expect(sh.ppid).toBe(root.pid);
      expect(exitOf(t, sh)).toMatchObject({ exitCode: 3 });
      const sleeper = startWith(t, 'sleep 5')!;
      expect(sleeper.ppid).toBe(root.pid);
      expect(exitOf(t, sleeper)).toMatchObject({ signal: 'SIGKILL' });
      expect(exitOf(t, root)).toMatchObject({ exitCode: 4 });
      expectPaired(t);
    });

    it('records a program disguised as bwrap, and still not the real wrapper (root bwrap and its init)', async () => {
      const script = '(exec -a bwrap sleep 0.5); exec -a bwrap sleep 0.1';
      const cmd = sandboxCommand({ kind: 'bwrap', workspace: ws.layout, agentDir: join(home, 'agents'), command: ['bash', '-c', script], env: {} });
      const t = await trace(cmd.file, cmd.args, { cwd: ws.layout.root, env: {}, fds: cmd.fds });
      expect(t.exit).toEqual({ exitCode: 0 });
      const root = startWith(t, `bash -c ${script}`)!;
      const disguised = startWith(t, 'bwrap 0.5')!;
      expect(disguised.ppid).toBe(root.pid);
      expect(exitOf(t, disguised)).toMatchObject({ exitCode: 0 });
      expect(exitOf(t, disguised)!.durationMs).toBeGreaterThanOrEqual(400);
      // The agent's own process exec'ing under the name: same pid, a new program, reported too.
      const reexec = t.starts.filter((s) => s.pid === root.pid);
      expect(reexec.map((s) => s.argv)).toEqual([['bash', '-c', script], ['bwrap', '0.1']]);
      // Only the two disguised programs carry the name: the wrapper (root bwrap, its init) is not reported.
      expect(t.starts.filter((s) => s.argv[0].endsWith('bwrap')).map((s) => s.argv.join(' '))).toEqual(['bwrap 0.5', 'bwrap 0.1']);
      const wrapperInit = root.ppid;
      expect(t.starts.map((s) => s.pid)).not.toContain(wrapperInit);
      expectPaired(t);
    });
  });

  it('records a descendant started with exec -a bwrap outside a sandbox', async () => {
    const t = await bash('(exec -a bwrap sleep 0.5); true');
    const disguised = startWith(t, 'bwrap 0.5')!;
    expect(disguised.executable).toMatch(/\/sleep$/); // the name is a disguise, the file is not
    expect(exitOf(t, disguised)).toMatchObject({ exitCode: 0 });
    expectPaired(t);
  });

  it('records the file execve ran: resolved against the cwd when relative, the script for a #! script', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'a2rl-tracer-exe-'));
    try {
      mkdirSync(join(dir, 'code'));
      writeFileSync(join(dir, 'code', 'train.sh'), '#!/bin/sh\nexit 0\n');
      chmodSync(join(dir, 'code', 'train.sh'), 0o755);
      const t = await bash('./code/train.sh; cd code && ./train.sh', { cwd: dir });
      const scripts = t.starts.filter((s) => s.argv[0] === './code/train.sh' || s.argv[0] === './train.sh');
      expect(scripts.map((s) => s.executable)).toEqual([join(dir, 'code', 'train.sh'), join(dir, 'code', 'train.sh')]);
      // The cwd at the time of each exec (followed through chdir), even for programs gone in a few ms.
      expect(scripts.map((s) => s.cwd)).toEqual([dir, join(dir, 'code')]);
      expect(t.starts[0]).toMatchObject({ argv: [expect.stringMatching(/bash$/), '-c', './code/train.sh; cd code && ./train.sh'], cwd: dir });
      expectPaired(t);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('exec-time capture: what a program really runs is read while it waits at its exec', () => {
    let dir: string;
    beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'a2rl-tracer-capture-'))));
    afterEach(() => rmSync(dir, { recursive: true, force: true }));
    const text = (f: CapturedFile | undefined) => (f?.content ? Buffer.from(f.content).toString('utf8') : undefined);
    const sha256 = (bytes: string | Buffer) => createHash('sha256').update(bytes).digest('hex');

    it('keeps a #! script created, run and deleted within milliseconds, and its interpreter image', async () => {
      const body = '#!/bin/sh\necho "hidden $$" > /dev/null\n';
      const t = await bash(`printf '${body.replace(/\n/g, '\\n')}' > x.sh; chmod +x x.sh; ./x.sh; rm x.sh`, { cwd: dir });
      const run = startWith(t, './x.sh')!;
      expect(run.capture).toBe('at-exec');
      expect(run.script).toMatchObject({ path: join(dir, 'x.sh'), via: 'shebang', sha256: sha256(body), size: body.length });
      expect(text(run.script)).toBe(body);
      expect(run.exe!.path).toMatch(/\/(dash|bash|sh)$/);
      expect(run.exe!.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(existsSync(join(dir, 'x.sh'))).toBe(false);
      expect(t.gaps).toEqual([]);
      expectPaired(t);
    });

    it('keeps a script run by an interpreter from outside any watched folder, deleted at once', async () => {
      const outside = join(dir, 'elsewhere.py');
      const body = 'import sys\nsys.exit(0)  # code kept out of the workspace\n';
      writeFileSync(outside, body);
      const t = await bash(`python3 ${outside}; rm ${outside}`);
      // python3 may be a shim (pyenv: a #! script that execs the real one): the interpreter's own start.
      const run = t.starts.find((s) => s.script?.path === outside)!;
      expect(run.script).toMatchObject({ path: outside, via: 'argument', sha256: sha256(body) });
      expect(text(run.script)).toBe(body);
      expect(run.exe!.path).toMatch(/\/python3(\.\d+)?$/);
    });

    it('records the real image behind a link named torchrun, and the bytes of a deleted binary', async () => {
      copyFileSync('/bin/sleep', join(dir, 'mysleep'));
      chmodSync(join(dir, 'mysleep'), 0o755);
      // Removed once it runs (its exec done: /proc shows its own argv[0], builtins only), not before: an rm that won the race made the exec fail.
      const started = `until { read -r -d '' a0 < /proc/$!/cmdline; [ "$a0" = ./mysleep ]; } 2>/dev/null || ! kill -0 $! 2>/dev/null; do :; done`;
      const t = await bash(`ln -s /bin/sleep torchrun; ./torchrun 0.05; ./mysleep 0.3 & ${started}; rm mysleep; wait`, { cwd: dir });
      const link = startWith(t, './torchrun 0.05')!;
      expect(link.executable).toBe(join(dir, 'torchrun')); // the name it was invoked by...
      expect(link.exe!.path).toBe(realpathSync('/bin/sleep')); // ...and what really ran
      expect(programKind(processStartedFact(link))).toBe('other');
      const copy = startWith(t, './mysleep 0.3')!;
      expect(copy.exe).toMatchObject({ path: join(dir, 'mysleep'), sha256: sha256(readFileSync('/bin/sleep')) });
      // Not a system file: kept (its bytes already went with the link's start: same content).
      expect(copy.exe!.content?.byteLength === statSync('/bin/sleep').size || copy.exe!.keptEarlier).toBe(true);
    });

    it('still counts an honest #! torchrun-style launcher as a training launch', async () => {
      mkdirSync(join(dir, 'bin'));
      writeFileSync(join(dir, 'bin', 'torchrun'), '#!/usr/bin/env python3\nimport sys\nfor i in range(3):\n    pass\n');
      chmodSync(join(dir, 'bin', 'torchrun'), 0o755);
      const t = await bash('torchrun code/train.py', { cwd: dir, env: { ...process.env, PATH: `${join(dir, 'bin')}:${process.env.PATH}` } });
      const launch = startWith(t, 'torchrun code/train.py')!;
      expect(launch.script).toMatchObject({ path: join(dir, 'bin', 'torchrun'), via: 'shebang' });
      expect(programKind(processStartedFact(launch))).toBe('training');
    });

    // OpenHands runs the agent's commands in an interactive bash: a shell with job control that sees
    // each command's exec-time SIGSTOP (strace) as its foreground job being suspended, and moves on.
    const jobControlScript = (body: string) => `set -m; printf '${body.replace(/\n/g, '\\n')}' > x.sh; chmod +x x.sh; ./x.sh; echo $? > rc; rm x.sh`;
    if (tracerKind === 'strace') {
      it('with a hold instead of SIGSTOP, a job-control shell never sees its command stop; the capture is still at exec', async () => {
        const body = '#!/bin/sh\nexit 0\n';
        const stopped = await bash(jobControlScript(body), { cwd: dir });
        // 147 (128 + SIGSTOP: the shell took the stop for a suspend) unless the worker's SIGCONT came
        // before the shell looked: a race, so either is accepted here; only the hold below is promised.
        expect(['0', '147']).toContain(readFileSync(join(dir, 'rc'), 'utf8').trim());
        expect(stopped.gaps).toEqual([]);

        const held = await bash(jobControlScript(body), { cwd: dir, execHoldMs: 2000 });
        expect(readFileSync(join(dir, 'rc'), 'utf8').trim()).toBe('0');
        const run = startWith(held, './x.sh')!;
        expect(run.capture).toBe('at-exec');
        expect(run.script).toMatchObject({ via: 'shebang', sha256: sha256(body) });
        expect(held.gaps).toEqual([]);
        expectPaired(held);
      });

      it('marks the launched root as captured after its start (strace starts it before it can stop it)', async () => {
        const t = await bash('true');
        expect(t.starts[0].capture).toBe('after-start');
        expect(t.starts.slice(1).every((s) => s.capture === 'at-exec')).toBe(true);
      });
    } else {
      it('holds an exec in a ptrace stop a job-control shell never sees; the capture is at exec', async () => {
        const body = '#!/bin/sh\nexit 0\n';
        const t = await bash(jobControlScript(body), { cwd: dir });
        expect(readFileSync(join(dir, 'rc'), 'utf8').trim()).toBe('0');
        const run = startWith(t, './x.sh')!;
        expect(run.capture).toBe('at-exec');
        expect(run.script).toMatchObject({ via: 'shebang', sha256: sha256(body) });
        expect(t.gaps).toEqual([]);
        expectPaired(t);
      });

      it('keeps every #! script that ran, deleted at once by a known program (rm, let go at its exec)', async () => {
        // rm is a known program after its first exec: a2rl-trace lets it go at once, so it can delete a
        // script before the harness has read it. The script's interpreter is still held then, and
        // reads it by the same path once let go: it finds nothing and runs nothing (sh: exit 2). Every
        // script whose code ran (exit 0) was read before it ran.
        const runs = 40;
        const body = '#!/bin/sh\nexit 0\n';
        const t = await bash(`for ((i = 0; i < ${runs}; i++)); do printf '${body.replace(/\n/g, '\\n')}' > s$i.sh; chmod +x s$i.sh; ./s$i.sh & rm -f s$i.sh; wait; done`, { cwd: dir });
        const scripts = t.starts.filter((s) => /^\.\/s\d+\.sh$/.test(s.argv[0]));
        const ran = scripts.filter((s) => exitOf(t, s)?.exitCode === 0);
        expect(ran.length).toBeGreaterThan(0);
        expect(ran.filter((s) => s.script?.sha256 !== sha256(body)).map((s) => s.argv[0])).toEqual([]);
        // The others found no script to run (whether or not the harness read it before rm).
        for (const s of scripts.filter((s) => !ran.includes(s))) expect(exitOf(t, s)?.exitCode).toBe(2);
        expect(t.starts.filter((s) => s.argv[0] === 'rm').every((s) => s.exe?.sha256 && s.capture === 'at-exec')).toBe(true);
        expect(t.gaps).toEqual([]);
      });

      it('holds every exec, the launched root and a second exec of one process included', async () => {
        // strace's SIGSTOP did not hold an exec by a process that had exec'd before (a shell's exec):
        // a script that deletes itself at once then escaped its capture.
        const body = '#!/usr/bin/python3\nimport os, sys\nos.unlink(sys.argv[0])\n';
        writeFileSync(join(dir, 'y.py'), body, { mode: 0o755 });
        const t = await bash('exec ./y.py', { cwd: dir });
        expect(existsSync(join(dir, 'y.py'))).toBe(false);
        expect(t.starts[0].capture).toBe('at-exec');
        const run = startWith(t, './y.py')!;
        expect(run.pid).toBe(t.starts[0].pid);
        expect(run.capture).toBe('at-exec');
        expect(run.script).toMatchObject({ path: join(dir, 'y.py'), via: 'shebang', sha256: sha256(body) });
        expect(text(run.script)).toBe(body);
        expect(t.gaps).toEqual([]);
        expectPaired(t);
      });
    }
  });

  it('keeps the traced agent running at full speed while the harness main thread is blocked', async () => {
    // Each exec line is long, so 300 of them overflow a pipe (64 KiB) many times over: a reader on
    // the main thread would leave strace — and with it the agent — blocked until the loop is free.
    const dir = mkdtempSync(join(tmpdir(), 'a2rl-tracer-block-'));
    const go = join(dir, 'go');
    const finished = join(dir, 'finished');
    const pad = 'x'.repeat(400);
    let blocked = { from: 0, to: 0 };
    let agentFinishedWhileBlocked = false;
    try {
      const script = `while [ ! -e ${go} ]; do sleep 0.01; done; for i in $(seq 300); do /bin/true ${pad}; done; : > ${finished}`;
      const t = await trace('bash', ['-c', script], {}, async () => {
        const from = Date.now();
        writeFileSync(go, '');
        // The harness event loop stays busy (a watcher burst, ledger I/O) until the agent has run
        // all 300 execs — which it can only do if nothing waits for this thread. The 120 s cap only
        // keeps a broken tracer from hanging the test.
        while (!(agentFinishedWhileBlocked = existsSync(finished)) && Date.now() - from < 120_000);
        blocked = { from, to: Date.now() };
      });
      expect(agentFinishedWhileBlocked).toBe(true);
      const execs = t.starts.filter((s) => s.argv[0] === '/bin/true').map((s) => s.startedAt);
      expect(execs).toHaveLength(300);
      const first = Math.min(...execs);
      const last = Math.max(...execs);
      // strace's own timestamps: the whole burst ran inside the blocked window.
      expect(first).toBeGreaterThanOrEqual(blocked.from);
      expect(last).toBeLessThanOrEqual(blocked.to);
      expectPaired(t);
      expect(t.gaps).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000); // the blocked loop itself may last up to 120 s on a loaded machine

  it('with a tiny pending bound, pauses reading until facts are taken instead of dropping any', async () => {
    // A bound of one byte: after every batch the worker stops reading until the (slow, async)
    // callbacks of what it posted have settled.
    const starts: ProcessStart[] = [];
    const exits: ProcessExit[] = [];
    const gaps: string[] = [];
    const slowly = (list: unknown[]) => async (p: unknown) => {
      await new Promise((r) => setTimeout(r, 1));
      list.push(p);
    };
    const handle = await launchAgent({
      file: 'bash',
      args: ['-c', 'for i in $(seq 200); do /bin/true; done'],
      cwd: tmpdir(),
      env: process.env,
      budgetMs: 90_000,
      onOutput: () => {},
      tracer: kind,
      monitor: { maxPendingBytes: 1, onStart: slowly(starts), onExit: slowly(exits), onGap: (r) => gaps.push(r) },
    });
    await handle.exited;
    await new Promise((r) => setTimeout(r, 20)); // the last callbacks' timers
    expect(starts.filter((s) => s.argv[0] === '/bin/true')).toHaveLength(200);
    expect(exits.map((e) => e.pid).sort()).toEqual(starts.map((s) => s.pid).sort());
    expect(gaps).toEqual([]);
  });

  it('reports a gap when the tracer dies before the traced programs end, and ends them without status', async () => {
    // The sleeper outlives the tracer whatever the load: the spec ends it only once the tracer is gone.
    const marker = `${100 + Math.random()}`.slice(0, 12);
    const t = await trace('bash', ['-c', `sleep ${marker}; true`], {}, async () => {
      const sleepPid = await until('the sleeper', () => pidsOf(`sleep ${marker}`)[0]);
      const isTracer = (argv0 = '') => argv0 === 'strace' || basename(argv0).startsWith('a2rl-trace');
      const strace = [...readAllStats().keys()].filter((pid) => isTracer((readArgv(pid) ?? [])[0]) && readArgv(pid)!.includes(`sleep ${marker}; true`));
      for (const pid of strace) process.kill(pid, 'SIGKILL');
      await until('strace gone', () => strace.every((pid) => readProcStat(pid)?.state === undefined || readProcStat(pid)?.state === 'Z'));
      try {
        process.kill(sleepPid);
      } catch {
        // the tracer took its tracees with it (a2rl-trace always: PTRACE_O_EXITKILL)
      }
    });
    const sleeper = startWith(t, `sleep ${marker}`)!;
    expect(exitOf(t, sleeper)).toBeDefined();
    expect(exitOf(t, sleeper)!.exitCode).toBeUndefined();
    expect(exitOf(t, sleeper)!.signal).toBeUndefined();
    expect(t.gaps).toEqual([expect.objectContaining({ reason: expect.stringMatching(/process tracer stopped before reporting how 2 program/), count: 2 })]);
    expectPaired(t);
  });

  it('gives up at once on a tracer whose command never started (finish(0), as the launcher does when a launch fails)', async () => {
    const gaps: string[] = [];
    const tracer = newTracer({ onGap: (reason) => gaps.push(reason) });
    await tracer.ready;
    await expect(tracer.finish(0)).resolves.toBeUndefined();
    expect(gaps).toEqual([]);
  });

  // strace only: a2rl-trace holds every exec until the worker, which needs the root, lets it go. With
  // strace a job-control shell takes its command's exec-time stop for a suspend and goes on, and at
  // its exit continues the stopped job: the whole launch can be over before the worker reads the root.
  (tracerKind === 'strace' ? it : it.skip)("keeps the lines of a launch whose output ended before the worker read its root (a descheduled harness): no gap", async () => {
    const starts: ProcessStart[] = [];
    const gaps: string[] = [];
    const tracer = newTracer({ onStart: (p) => starts.push(p), onGap: (reason) => gaps.push(reason) });
    await tracer.ready;
    const { file, args } = tracer.wrap('/bin/bash', ['-c', 'set -m; /bin/true; /bin/true']);
    const child = spawn(file, args, { stdio: 'ignore' });
    await new Promise((resolve) => child.on('exit', resolve));
    // The root is told late, as when the harness's thread was descheduled between the spawn and the
    // worker's read of it: by then the worker has read the tracer's whole output and its end.
    await new Promise((resolve) => setTimeout(resolve, 300));
    tracer.start(child.pid!);
    await tracer.finish(10_000);
    expect(gaps).toEqual([]);
    expect(starts.filter((p) => p.argv.join(' ') === '/bin/true')).toHaveLength(2);
  });

  it("closes the tracer's output once: a descriptor the harness opened after it is still open once the tracer has finished", async () => {
    const tracer = newTracer({});
    await tracer.ready;
    const { file, args } = tracer.wrap('/bin/true', []);
    const child = spawn(file, args, { stdio: 'ignore' });
    tracer.start(child.pid!);
    await new Promise((resolve) => child.on('exit', resolve));
    // strace's output read to its end and its descriptor closed by the worker's socket ...
    await (tracer as unknown as { done: Promise<void> }).done;
    // ... so the lowest free numbers, that one among them, go to the harness's next files ...
    const handles = await Promise.all(Array.from({ length: 16 }, () => open('/etc/hostname', 'r')));
    // ... and the worker's end must not close it again (a worker thread's exit closes what it opened).
    await tracer.finish(10_000);
    const closed = handles.filter((h) => {
      try {
        fstatSync(h.fd);
        return false;
      } catch {
        return true;
      }
    });
    await Promise.allSettled(handles.map((h) => h.close()));
    expect(closed.map((h) => h.fd)).toEqual([]);
  });

  it('marks what strace truncated', () => {
    const line = 'execve("/bin/x", ["x", "abc"..., "d\\303\\274\\x41\\0"...], 0x1 /* 3 vars */) = 0';
    expect(parseExecArgs(line, 'execve('.length)).toEqual({
      argv: ['x', 'abc...', 'düA\0...'],
      truncated: true,
      tail: ', 0x1 /* 3 vars */) = 0',
    });
    const many = 'execveat(AT_FDCWD, "/bin/x", ["x", "1", ...], 0x1 /* 3 vars */, 0) = 0';
    expect(parseExecArgs(many, 'execveat('.length)).toMatchObject({ argv: ['x', '1', '...'], truncated: true });
    expect(parseExecArgs('execve("/x", ["a", "b"], 0x1 /* 1 var */) = 0', 7)).toMatchObject({ argv: ['a', 'b'], truncated: false });
  });
});

describe('choosing a tracer', () => {
  const sleeper = (extra: Partial<LaunchOptions>) =>
    trace('bash', ['-c', 'sleep 120'], extra, async (so) => {
      // A poller may miss a process shorter than its interval: this one lives until it is reported.
      process.kill((await until('sleep 120 reported', () => startWith(so, 'sleep 120'))).pid);
    });

  it('prefers a2rl-trace, falls back to strace, then to the /proc poller, and refuses a tracer that was required but does not work', async () => {
    expect((await bash('true', { tracer: 'auto' })).tracer).toBe('ptrace');
    expect((await sleeper({ tracer: 'auto', ptraceBinary: '/nonexistent/a2rl-trace' })).tracer).toBe('strace');
    const polled = await sleeper({ tracer: 'auto', ptraceBinary: '/nonexistent/a2rl-trace', straceBinary: '/nonexistent/strace' });
    expect(polled.tracer).toBe('proc');
    expect(startWith(polled, 'sleep 120')).toBeDefined();
    await expect(bash('true', { tracer: 'strace', straceBinary: '/nonexistent/strace' })).rejects.toThrow(TracerUnavailableError);
    await expect(bash('true', { tracer: 'ptrace', ptraceBinary: '/nonexistent/a2rl-trace' })).rejects.toThrow(TracerUnavailableError);
  });
});
