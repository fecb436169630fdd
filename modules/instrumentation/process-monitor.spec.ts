import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execedSince, ProcessMonitor, processExitedFact, processStartedFact, readProcStat, type ProcessExit, type ProcessStart } from './process-monitor.js';
import { writeExtraFds } from '../sandbox/extra-fds.js';
import { sandboxCommand } from '../sandbox/sandbox.js';
import { fakeTask } from '../runs/testing/fake-task.js';
import { prepareWorkspace } from '../runs/workspace.js';
import { until } from '../../test/testing/helpers.js';

// A poller may miss a process that lives less than an interval, and a loaded machine stretches
// intervals: the processes these specs look for live until the spec has seen them reported, then
// the spec ends them. Nothing here waits a fixed time.

/** Resolves with `found()`'s first truthy value; fails after a generous deadline. */
const gone = (pid: number) => {
  const st = readProcStat(pid);
  return !st || st.state === 'Z';
};
const kill = (pid: number | undefined, signal: NodeJS.Signals = 'SIGTERM') => {
  try {
    if (pid) process.kill(pid, signal);
  } catch {
    // already gone
  }
};

describe('ProcessMonitor', () => {
  it('reports every process of a tree once, with argv, executable, exit status and resource use', async () => {
    const script = [
      `node -e "setInterval(() => {}, 1000)" train_sft.mjs &`, // a training child
      // A child that exits 7 once its parent has exec'd sleep (which never reaps it): a zombie until the sleeper ends.
      `bash -c '(until read -r c < /proc/$$/comm && [ "$c" = sleep ]; do sleep 0.05; done; exit 7) & exec sleep 120' &`,
      'wait',
      'exit 3',
    ].join('\n');
    const root = spawn('bash', ['-c', script], { cwd: '/tmp', stdio: 'ignore', detached: true });
    const exited = once(root, 'exit');
    const starts: ProcessStart[] = [];
    const exits: ProcessExit[] = [];
    const monitor = new ProcessMonitor({
      rootPid: root.pid!,
      intervalMs: 50,
      onStart: (p) => starts.push(p),
      onExit: (p) => exits.push(p),
    }).start();
    root.on('exit', (code) => monitor.noteExit(root.pid!, { exitCode: code ?? undefined }));
    try {
      const trainer = await until('the training child', () => starts.find((s) => s.argv[0] === 'node'));
      const sleeper = await until('the sleeper', () => starts.find((s) => s.argv.join(' ') === 'sleep 120'));
      const zombie = await until('the zombie', () => starts.find((s) => s.ppid === sleeper.pid && exits.some((e) => e.pid === s.pid)));
      // The poll after the trainer has used CPU samples it: cpuMs is the last sample before it vanished.
      await until('the trainer using CPU', () => (readProcStat(trainer.pid)?.cpuTicks ?? 0) > 0);
      monitor.livePids();
      const killedAt = Date.now();
      kill(trainer.pid);
      kill(sleeper.pid);
      await exited;
      monitor.stop();

      // Once per program: a child first seen as its parent's copy and exec'ing later (a busy machine)
      // is two programs on one pid, each started and ended once.
      const byPid = new Map(starts.map((s) => [s.pid, s]));
      expect(new Set(starts.map((s) => `${s.pid} ${s.startedAt}`)).size).toBe(starts.length);
      expect(exits.map((e) => e.pid).sort()).toEqual(starts.map((s) => s.pid).sort());

      const rootStart = byPid.get(root.pid!)!;
      expect(rootStart.argv.slice(0, 2)).toEqual(['bash', '-c']);
      expect(rootStart.cwd).toBe('/tmp');
      expect(exits.find((e) => e.pid === root.pid)).toMatchObject({ exitCode: 3 });

      expect(trainer.ppid).toBe(root.pid);
      expect(trainer.executable).toMatch(/\/node[^/]*$/); // /proc/<pid>/exe: the binary, whatever argv[0] says
      expect(trainer.argv).toContain('train_sft.mjs');
      const trainerExit = exits.find((e) => e.pid === trainer.pid)!;
      expect(trainerExit.durationMs).toBeGreaterThanOrEqual(killedAt - trainer.startedAt);
      expect(trainerExit.peakRssKb).toBeGreaterThan(1000);
      expect(trainerExit.cpuMs).toBeGreaterThan(0);
      expect(trainerExit.endedAt).toBeGreaterThanOrEqual(trainer.startedAt + trainerExit.durationMs);

      expect(sleeper.ppid).toBe(root.pid);
      expect(exits.find((e) => e.pid === zombie.pid)).toMatchObject({ exitCode: 7 });
    } finally {
      monitor.stop();
      kill(-root.pid!, 'SIGKILL');
    }
  }, 60_000);

  it('keeps following a descendant after its parent exits and it is reparented', async () => {
    const root = spawn('bash', ['-c', 'setsid sleep 121 & exec sleep 120'], { stdio: 'ignore' });
    const exited = once(root, 'exit');
    const starts: ProcessStart[] = [];
    const exits: ProcessExit[] = [];
    const monitor = new ProcessMonitor({ rootPid: root.pid!, intervalMs: 50, onStart: (p) => starts.push(p), onExit: (p) => exits.push(p) }).start();
    let orphan: ProcessStart | undefined;
    try {
      orphan = await until('the setsid child', () => starts.find((s) => s.argv.join(' ') === 'sleep 121'));
      root.kill('SIGKILL');
      await exited;
      expect(readProcStat(orphan.pid)?.ppid).not.toBe(root.pid); // reparented
      expect(monitor.livePids().map((p) => p.pid)).toContain(orphan.pid);
      kill(orphan.pid);
      await until('the orphan exiting', () => exits.some((e) => e.pid === orphan!.pid));
    } finally {
      monitor.stop();
      root.kill('SIGKILL');
      kill(orphan?.pid, 'SIGKILL');
    }
  }, 60_000);

  it('adopts a process the tracer reported, however it left the tree, but not a pid that names a later process', async () => {
    const root = spawn('sleep', ['120'], { stdio: 'ignore' });
    const stranger = spawn('sleep', ['122'], { stdio: 'ignore' }); // not the root's descendant: only adoption makes it a member
    const monitor = new ProcessMonitor({ rootPid: root.pid!, intervalMs: 60_000 }).start();
    try {
      const members = () => monitor.livePids().map((p) => p.pid);
      expect(members()).not.toContain(stranger.pid);
      monitor.adopt(stranger.pid!, Date.now() - 120_000); // reported as started before this process was forked: a reused pid
      expect(members()).not.toContain(stranger.pid);
      monitor.adopt(stranger.pid!, Date.now());
      expect(members()).toContain(stranger.pid);
      stranger.kill('SIGKILL');
      await once(stranger, 'exit');
      expect(members()).not.toContain(stranger.pid);
    } finally {
      monitor.stop();
      root.kill('SIGKILL');
      stranger.kill('SIGKILL');
    }
  });

  it('does not report the bwrap wrapper but reports what runs inside it', async () => {
    const args = ['--die-with-parent', '--unshare-pid', '--ro-bind', '/', '/', '--proc', '/proc', 'bash', '-c', 'sleep 120; true'];
    const t = await watch('bwrap', args, 'sleep 120');
    expect(t.starts.map((s) => s.argv[0])).not.toContain('bwrap');
    expect(t.starts.map((s) => s.argv.join(' '))).toContain('sleep 120');
  }, 60_000);

  /**
   * Runs `file args` under a 50 ms poller until it has reported a process whose command line is
   * `target`, ends that process (SIGTERM), and returns what the poller reported once the tree has exited.
   */
  async function watch(file: string, args: string[], target: string, cwd = '/tmp', fds: Buffer[] = []) {
    const root = spawn(file, args, { cwd, stdio: ['ignore', 'ignore', 'ignore', ...fds.map(() => 'pipe' as const)], env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, detached: true });
    const exited = once(root, 'exit');
    writeExtraFds(root.stdio, fds);
    const starts: ProcessStart[] = [];
    const exits: ProcessExit[] = [];
    const monitor = new ProcessMonitor({ rootPid: root.pid!, intervalMs: 50, onStart: (p) => starts.push(p), onExit: (p) => exits.push(p) }).start();
    try {
      const found = await until(target, () => starts.find((s) => s.argv.join(' ') === target));
      kill(found.pid);
      await until(`${target} ending`, () => gone(found.pid));
      await exited;
      monitor.stop();
      return { root: root.pid!, starts, exits };
    } finally {
      monitor.stop();
      kill(-root.pid!, 'SIGKILL');
    }
  }

  it('records a descendant started with exec -a bwrap (the name alone hides nothing)', async () => {
    const t = await watch('/bin/bash', ['-c', '(exec -a bwrap sleep 120); true'], 'bwrap 120');
    const disguised = t.starts.find((s) => s.argv.join(' ') === 'bwrap 120')!;
    expect(disguised.ppid).toBe(t.root);
    expect(t.exits.map((e) => e.pid)).toContain(disguised.pid);
  }, 150_000);

  it('reports a program a process execs after it was first reported, as the tracer does (a subshell slow to exec on a busy machine)', async () => {
    const dir = mkdtempSync('/tmp/a2rl-monitor-exec-');
    // The subshell waits for the spec's go before it execs: it is surely reported first as its parent's copy.
    const script = `(until [ -e ${dir}/go ]; do sleep 0.05; done; exec -a bwrap sleep 120); true`;
    const root = spawn('bash', ['-c', script], { cwd: '/tmp', stdio: 'ignore', detached: true });
    const exited = once(root, 'exit');
    const starts: ProcessStart[] = [];
    const exits: ProcessExit[] = [];
    const monitor = new ProcessMonitor({ rootPid: root.pid!, intervalMs: 50, onStart: (p) => starts.push(p), onExit: (p) => exits.push(p) }).start();
    try {
      const subshell = await until('the subshell', () => starts.find((s) => s.ppid === root.pid && s.argv.join(' ') === `bash -c ${script}`));
      writeFileSync(join(dir, 'go'), '');
      const disguised = await until('the program it execs', () => starts.find((s) => s.argv.join(' ') === 'bwrap 120'));
      expect([disguised.pid, disguised.ppid]).toEqual([subshell.pid, root.pid]);
      // Its first program ended at the exec, without a status (the exit status is the last program's).
      const first = exits.find((e) => e.pid === subshell.pid)!;
      expect(first).not.toHaveProperty('exitCode');
      expect(first).not.toHaveProperty('signal');
      expect(first.endedAt).toBe(disguised.startedAt); // one time for both: readers follow the exec by it (docs/analysis.md)
      kill(disguised.pid);
      await exited;
      monitor.stop();
      expect(exits.filter((e) => e.pid === subshell.pid)).toHaveLength(2); // each program ended once
    } finally {
      monitor.stop();
      kill(-root.pid!, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 150_000);

  it('inside the real sandbox, skips only the wrapper (prlimit, setpriv, bwrap and its init) and records a disguised bwrap', async () => {
    const home = mkdtempSync('/var/tmp/a2rl-monitor-ws-');
    try {
      const ws = await prepareWorkspace({ workspacesRoot: join(home, 'workspaces'), taskCacheDir: join(home, 'tasks'), task: fakeTask(), instructions: 'go', runId: 'run-1' });
      mkdirSync(join(home, 'agents'), { recursive: true });
      writeFileSync(join(home, 'agents', 'start.sh'), 'true\n');
      const script = '(exec -a bwrap sleep 120); true';
      const cmd = sandboxCommand({ kind: 'bwrap', workspace: ws.layout, agentDir: join(home, 'agents'), command: ['bash', '-c', script], env: {} });
      const t = await watch(cmd.file, cmd.args, 'bwrap 120', ws.layout.root, cmd.fds);
      const disguised = t.starts.find((s) => s.argv.join(' ') === 'bwrap 120')!;
      // (The subshell that execs it may be reported first under the agent's argv: a busy machine.)
      const agent = t.starts.find((s) => s.argv.join(' ') === `bash -c ${script}` && s.pid !== disguised.pid)!;
      expect(disguised.ppid).toBe(agent.pid);
      expect(t.exits.map((e) => e.pid)).toContain(disguised.pid);
      const reported = t.starts.map((s) => s.pid);
      expect(reported).not.toContain(t.root);
      expect(reported).not.toContain(agent.ppid); // bwrap's namespace init
      expect(t.starts.filter((s) => s.argv[0].endsWith('bwrap'))).toEqual([disguised]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }, 150_000); // the waits inside are capped at 60 s each: on a machine with both cores busy a poll can lag far behind

  it('takes moved arguments for an exec, and a new name only where /proc hides where the arguments are', () => {
    expect(execedSince({ comm: 'bash', argStart: 0x7ffd1000 }, { comm: 'bash', argStart: 0x7ffe2000 })).toBe(true); // exec of the same program
    expect(execedSince({ comm: 'python3', argStart: 0x7ffd1000 }, { comm: 'trainer', argStart: 0x7ffd1000 })).toBe(false); // renamed itself
    expect(execedSince({ comm: 'bash', argStart: 0 }, { comm: 'sleep', argStart: 0 })).toBe(true);
    expect(execedSince({ comm: 'bash', argStart: 0x7ffd1000 }, { comm: 'bash', argStart: 0 })).toBe(false); // exiting: its memory is gone
  });

  it('maps starts and exits to ProcessStarted/ProcessExited facts observed at their own times', () => {
    const start: ProcessStart = { pid: 9, ppid: 1, argv: ['python3', 'train.py'], cwd: '/w', executable: '/usr/bin/python3', startedAt: Date.UTC(2026, 0, 2, 3, 4, 5, 678) };
    expect(processStartedFact(start)).toEqual({ pid: 9, ppid: 1, argv: ['python3', 'train.py'], cwd: '/w', executable: '/usr/bin/python3', observedAt: '2026-01-02T03:04:05.678Z' });
    expect(processStartedFact({ ...start, executable: undefined })).not.toHaveProperty('executable');
    const exit: ProcessExit = { pid: 9, signal: 'SIGKILL', durationMs: 1.5, cpuMs: 10, peakRssKb: 2000, endedAt: Date.UTC(2026, 0, 2, 3, 4, 6, 1) };
    expect(processExitedFact(exit)).toEqual({ pid: 9, signal: 'SIGKILL', durationMs: 1.5, cpuMs: 10, peakRssKb: 2000, observedAt: '2026-01-02T03:04:06.001Z' });
    expect(processExitedFact({ ...exit, signal: undefined, exitCode: 0 })).toMatchObject({ exitCode: 0 });
    expect(processExitedFact({ ...exit, signal: undefined })).not.toHaveProperty('signal');
  });

  it('bounds argv the way strace shortens it: at most 4096 entries and 64 KiB, marked with "..."', () => {
    const base: ProcessStart = { pid: 1, ppid: 0, argv: [], cwd: '/', startedAt: 0 };
    const many = processStartedFact({ ...base, argv: Array.from({ length: 5000 }, (_, i) => `a${i}`) }).argv;
    expect(many).toHaveLength(4096);
    expect(many.slice(-2)).toEqual(['a4094', '...']);
    const exact = processStartedFact({ ...base, argv: Array.from({ length: 4096 }, (_, i) => `a${i}`) }).argv;
    expect(exact.at(-1)).toBe('a4095');
    // A 300 KiB `bash -c` script (an agent's heredoc) would not fit in an event.
    const huge = processStartedFact({ ...base, argv: ['bash', '-c', `${'é'.repeat(150_000)}`, 'tail'] }).argv;
    expect(huge).toHaveLength(4);
    expect(huge[2].endsWith('...')).toBe(true);
    expect(huge[3]).toBe('...');
    expect(Buffer.byteLength(huge.join(''))).toBeLessThanOrEqual(64 * 1024 + 6);
    expect(huge[2].slice(0, -3)).toMatch(/^é+$/); // not cut inside a character
  });
});
