import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ProcessMonitor, processExitedFact, processStartedFact, type ProcessExit, type ProcessStart } from './process-monitor.js';
import { writeExtraFds } from '../runs/agent-process.js';
import { sandboxCommand } from '../runs/sandbox/sandbox.js';
import { fakeTask } from '../runs/testing/fake-task.js';
import { prepareWorkspace } from '../runs/workspace.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('ProcessMonitor', () => {
  it('reports every process of a short tree once, with argv, executable, exit status and resource use', async () => {
    const script = [
      `node -e "setTimeout(() => {}, 500)" train_sft.mjs &`, // a training child
      `bash -c '(sleep 0.3; exit 7) & exec sleep 1.2' &`, // leaves an unreaped zombie exiting 7
      'wait',
      'exit 3',
    ].join('\n');
    const root = spawn('bash', ['-c', script], { cwd: '/tmp', stdio: 'ignore' });
    const starts: ProcessStart[] = [];
    const exits: ProcessExit[] = [];
    const monitor = new ProcessMonitor({
      rootPid: root.pid!,
      intervalMs: 50,
      onStart: (p) => starts.push(p),
      onExit: (p) => exits.push(p),
    }).start();
    root.on('exit', (code) => monitor.noteExit(root.pid!, { exitCode: code ?? undefined }));
    await once(root, 'exit');
    await sleep(100);
    monitor.stop();

    const byPid = new Map(starts.map((s) => [s.pid, s]));
    expect(byPid.size).toBe(starts.length); // once per process
    expect(new Set(exits.map((e) => e.pid)).size).toBe(exits.length);
    expect(exits.map((e) => e.pid).sort()).toEqual(starts.map((s) => s.pid).sort());

    const rootStart = byPid.get(root.pid!)!;
    expect(rootStart.argv.slice(0, 2)).toEqual(['bash', '-c']);
    expect(rootStart.cwd).toBe('/tmp');
    expect(exits.find((e) => e.pid === root.pid)).toMatchObject({ exitCode: 3 });

    const trainer = starts.find((s) => s.argv[0] === 'node')!;
    expect(trainer.ppid).toBe(root.pid);
    expect(trainer.executable).toMatch(/\/node[^/]*$/); // /proc/<pid>/exe: the binary, whatever argv[0] says
    expect(trainer.argv).toContain('train_sft.mjs');
    const trainerExit = exits.find((e) => e.pid === trainer.pid)!;
    expect(trainerExit.durationMs).toBeGreaterThanOrEqual(400);
    expect(trainerExit.peakRssKb).toBeGreaterThan(1000);
    expect(trainerExit.cpuMs).toBeGreaterThan(0);
    expect(trainerExit.endedAt).toBeGreaterThanOrEqual(trainer.startedAt + trainerExit.durationMs);

    const sleeper = starts.find((s) => s.argv.join(' ') === 'sleep 1.2')!;
    expect(sleeper.ppid).toBe(root.pid);
    const zombie = starts.find((s) => s.ppid === sleeper.pid)!;
    expect(exits.find((e) => e.pid === zombie.pid)).toMatchObject({ exitCode: 7 });
  });

  it('keeps following a descendant after its parent exits and it is reparented', async () => {
    const root = spawn('bash', ['-c', 'setsid sleep 0.6 & sleep 0.2'], { stdio: 'ignore' });
    const starts: ProcessStart[] = [];
    const exits: ProcessExit[] = [];
    const monitor = new ProcessMonitor({ rootPid: root.pid!, intervalMs: 50, onStart: (p) => starts.push(p), onExit: (p) => exits.push(p) }).start();
    await once(root, 'exit');
    await sleep(150);
    const orphan = starts.find((s) => s.argv.join(' ') === 'sleep 0.6')!;
    expect(orphan).toBeDefined();
    expect(monitor.livePids().map((p) => p.pid)).toContain(orphan.pid);
    await sleep(600);
    monitor.stop();
    expect(exits.map((e) => e.pid)).toContain(orphan.pid);
  });

  it('does not report the bwrap wrapper but reports what runs inside it', async () => {
    const args = ['--die-with-parent', '--unshare-pid', '--ro-bind', '/', '/', '--proc', '/proc', 'bash', '-c', 'sleep 0.3; true'];
    const root = spawn('bwrap', args, { stdio: 'ignore' });
    const starts: ProcessStart[] = [];
    const monitor = new ProcessMonitor({ rootPid: root.pid!, intervalMs: 50, onStart: (p) => starts.push(p) }).start();
    await once(root, 'exit');
    monitor.stop();
    expect(starts.map((s) => s.argv[0])).not.toContain('bwrap');
    expect(starts.map((s) => s.argv.join(' '))).toContain('sleep 0.3');
  });

  /** Runs `file args` to its end under a 50 ms poller; returns what it reported. */
  async function watch(file: string, args: string[], cwd = '/tmp', fds: Buffer[] = []) {
    const root = spawn(file, args, { cwd, stdio: ['ignore', 'ignore', 'ignore', ...fds.map(() => 'pipe' as const)], env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } });
    writeExtraFds(root.stdio, fds);
    const starts: ProcessStart[] = [];
    const exits: ProcessExit[] = [];
    const monitor = new ProcessMonitor({ rootPid: root.pid!, intervalMs: 50, onStart: (p) => starts.push(p), onExit: (p) => exits.push(p) }).start();
    await once(root, 'exit');
    await sleep(100);
    monitor.stop();
    return { root: root.pid!, starts, exits };
  }

  it('records a descendant started with exec -a bwrap (the name alone hides nothing)', async () => {
    const t = await watch('/bin/bash', ['-c', '(exec -a bwrap sleep 0.5); true']);
    const disguised = t.starts.find((s) => s.argv.join(' ') === 'bwrap 0.5')!;
    expect(disguised.ppid).toBe(t.root);
    expect(t.exits.map((e) => e.pid)).toContain(disguised.pid);
  });

  it('inside the real sandbox, skips only the wrapper (prlimit, setpriv, bwrap and its init) and records a disguised bwrap', async () => {
    const home = mkdtempSync('/var/tmp/a2rl-monitor-ws-');
    try {
      const ws = await prepareWorkspace({ workspacesRoot: join(home, 'workspaces'), taskCacheDir: join(home, 'tasks'), task: fakeTask(), instructions: 'go', runId: 'run-1' });
      mkdirSync(join(home, 'agents'), { recursive: true });
      writeFileSync(join(home, 'agents', 'start.sh'), 'true\n');
      const script = '(exec -a bwrap sleep 0.5); true';
      const cmd = sandboxCommand({ kind: 'bwrap', workspace: ws.layout, agentDir: join(home, 'agents'), command: ['bash', '-c', script], env: {} });
      const t = await watch(cmd.file, cmd.args, ws.layout.root, cmd.fds);
      const agent = t.starts.find((s) => s.argv.join(' ') === `bash -c ${script}`)!;
      const disguised = t.starts.find((s) => s.argv.join(' ') === 'bwrap 0.5')!;
      expect(disguised.ppid).toBe(agent.pid);
      expect(t.exits.map((e) => e.pid)).toContain(disguised.pid);
      const reported = t.starts.map((s) => s.pid);
      expect(reported).not.toContain(t.root);
      expect(reported).not.toContain(agent.ppid); // bwrap's namespace init
      expect(t.starts.filter((s) => s.argv[0].endsWith('bwrap'))).toEqual([disguised]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
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
