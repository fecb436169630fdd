import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { launchAgent } from '../runs/agent-process.js';
import type { ProcessExit, ProcessStart } from './process-monitor.js';
import { straceWorks } from './process-tracer.js';
import { sandboxCommand } from '../sandbox/sandbox.js';
import { fakeTask } from '../runs/testing/fake-task.js';
import { prepareWorkspace, type PreparedWorkspace } from '../runs/workspace.js';

/**
 * Host pids inside bwrap's pid namespace without strace's --pidns-translation (the worker maps
 * them: process-tracer-pids.ts): a burst of forks that never exec and exit at once — the case where
 * a child is gone before its parent's clone line is read — must be recorded with exact parents and
 * statuses, and what cannot be told apart must be a gap, never a wrong parent.
 */

const SUBSHELLS = 200;
const PIPES = 40;
const CHAINS = 30;
const CONCURRENT = 60;

// ( exit N ) subshells, pipelines whose left side is a fork running a builtin, sh -c chains, and two
// loops forking at the same time (their vanished subshells may not be told apart: a gap then).
const SCRIPT = [
  `for i in $(seq ${SUBSHELLS}); do ( exit $((i % 7)) ); done`,
  `for i in $(seq ${PIPES}); do echo x | cat >/dev/null; done`,
  `for i in $(seq ${CHAINS}); do sh -c 'sh -c "exit 2"; true'; done`,
  `(for i in $(seq ${CONCURRENT}); do ( : ); done) & (for i in $(seq ${CONCURRENT}); do ( : ); done) & wait`,
].join('\n');

describe('strace process tracer inside bwrap, pids translated by the worker', () => {
  let home: string;
  let ws: PreparedWorkspace;
  beforeAll(async () => {
    expect(straceWorks()).toBe(true);
    home = mkdtempSync('/var/tmp/a2rl-pidns-ws-');
    ws = await prepareWorkspace({ workspacesRoot: join(home, 'workspaces'), taskCacheDir: join(home, 'tasks'), task: fakeTask(), instructions: 'go', runId: 'run-1' });
    mkdirSync(join(home, 'agents'), { recursive: true });
    writeFileSync(join(home, 'agents', 'start.sh'), 'true\n');
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('records a burst of short forks, pipelines and sh -c chains with exact parents and statuses; only concurrent vanished forks may be a gap', async () => {
    const starts: ProcessStart[] = [];
    const exits: ProcessExit[] = [];
    const gaps: { reason: string; count?: number }[] = [];
    const cmd = sandboxCommand({ kind: 'bwrap', workspace: ws.layout, agentDir: join(home, 'agents'), command: ['bash', '-c', SCRIPT], env: {} });
    const handle = await launchAgent({
      file: cmd.file,
      args: cmd.args,
      fds: cmd.fds,
      cwd: ws.layout.root,
      env: {},
      budgetMs: 150_000,
      graceMs: 500,
      onOutput: () => {},
      tracer: 'strace',
      monitor: { onStart: (p) => starts.push(p), onExit: (p) => exits.push(p), onGap: (reason, count) => gaps.push({ reason, count }) },
    });
    expect((await handle.exited).exitCode).toBe(0);
    const root = starts.find((s) => s.argv.join(' ') === `bash -c ${SCRIPT}`)!;
    expect(root.pid).toBeGreaterThan(2); // a host pid
    const exitOf = (pid: number) => exits.find((e) => e.pid === pid);
    const pids = new Set(starts.map((s) => s.pid));

    // Every recorded parent is the root's (the wrapper) or a recorded process: no pid of the namespace.
    // A fork paired late still runs what its parent ran when it forked (the parent may be gone by then).
    for (const s of starts) if (s !== root) expect({ argv: s.argv, parentRecorded: pids.has(s.ppid) }).toEqual({ argv: s.argv, parentRecorded: true });
    expect(starts.filter((s) => s.argv.length === 0)).toEqual([]);

    // The root's own forks: the ( exit N ) subshells in order, the pipelines' left sides, the two loops.
    const forks = starts.filter((s) => s.ppid === root.pid && s.argv.join(' ') === root.argv.join(' ')).sort((a, b) => a.startedAt - b.startedAt);
    expect(forks).toHaveLength(SUBSHELLS + PIPES + 2);
    // Statuses as a multiset: a fork paired with its clone late (gone before its clone line was read)
    // is dated then, so two neighbours may swap places; each status must still be exact.
    const bySize = (a: number | undefined, b: number | undefined) => (a ?? -1) - (b ?? -1);
    const codes = forks.slice(0, SUBSHELLS + PIPES).map((s) => exitOf(s.pid)?.exitCode);
    const expected = [...Array.from({ length: SUBSHELLS }, (_, i) => (i + 1) % 7), ...Array.from({ length: PIPES }, () => 0)]; // a pipeline's left side: echo, exit 0
    expect(codes.sort(bySize)).toEqual(expected.sort(bySize));
    expect(starts.filter((s) => s.argv.join(' ') === 'cat' && s.ppid === root.pid)).toHaveLength(PIPES);

    // sh -c chains: the inner sh's parent is the outer sh, its status exact.
    const outer = starts.filter((s) => s.argv.join(' ') === `sh -c sh -c "exit 2"; true`);
    const inner = starts.filter((s) => s.argv.join(' ') === 'sh -c exit 2');
    expect(outer).toHaveLength(CHAINS);
    expect(inner).toHaveLength(CHAINS);
    for (const s of outer) expect(s.ppid).toBe(root.pid);
    expect(inner.map((s) => outer.some((o) => o.pid === s.ppid) && exitOf(s.pid)?.exitCode)).toEqual(inner.map(() => 2));

    // The two concurrent loops: each subshell recorded under its loop, or counted in a gap.
    const loops = forks.slice(SUBSHELLS + PIPES).map((s) => s.pid);
    const underLoops = starts.filter((s) => loops.includes(s.ppid) && s.argv.join(' ') === root.argv.join(' ')).length;
    const lost = gaps.filter((g) => /pid namespace/.test(g.reason)).reduce((n, g) => n + Number(/^(\d+) process/.exec(g.reason)?.[1] ?? 0), 0);
    expect(underLoops + lost).toBe(2 * CONCURRENT);
    expect(gaps.filter((g) => !/pid namespace/.test(g.reason))).toEqual([]);
    console.log(`pidns stress: ${starts.length} starts, ${underLoops} of ${2 * CONCURRENT} concurrent subshells attributed, ${lost} in gaps`);
    expect(exits.map((e) => e.pid).sort()).toEqual(starts.map((s) => s.pid).sort());
  }, 180_000);

  it.each([
    ['inside bwrap', ['bwrap', '--unshare-pid', '--dev-bind', '/', '/', '--proc', '/proc', '--', 'bash']],
    ['without a sandbox (unshare(CLONE_NEWPID) in the harness\'s namespace, then fork)', ['bash']],
  ])('follows pids through nested namespaces the agent makes (bwrap in bwrap, unshare -p -f), %s: exact parents and statuses', async (_, [file, ...pre]) => {
    const inner = `(exit 3); sh -c "exit 4"; for i in 1 2 3 4 5; do ( exit 5 ); done`;
    const script = `bwrap --unshare-pid --dev-bind / / --proc /proc -- bash -c '${inner}'; unshare -p -f bash -c '${inner}'; true`;
    const starts: ProcessStart[] = [];
    const exits: ProcessExit[] = [];
    const gaps: string[] = [];
    const handle = await launchAgent({
      file,
      args: [...pre, '-c', script],
      cwd: home,
      env: process.env,
      budgetMs: 90_000,
      graceMs: 500,
      onOutput: () => {},
      tracer: 'strace',
      monitor: { onStart: (p) => starts.push(p), onExit: (p) => exits.push(p), onGap: (reason) => gaps.push(reason) },
    });
    expect((await handle.exited).exitCode).toBe(0);
    const exitOf = (pid: number) => exits.find((e) => e.pid === pid);
    // Each nested shell (levels 2 and 3 below the harness) and what it ran.
    const shells = starts.filter((s) => s.argv.join(' ') === `bash -c ${inner}` && !starts.some((o) => o.pid === s.ppid && o.argv.join(' ') === s.argv.join(' ')));
    expect(shells).toHaveLength(2);
    for (const shell of shells) {
      const children = starts.filter((s) => s.ppid === shell.pid).sort((a, b) => a.startedAt - b.startedAt || a.pid - b.pid);
      expect(children.map((s) => [s.argv[0], exitOf(s.pid)?.exitCode])).toEqual([['bash', 3], ['sh', 4], ...Array.from({ length: 5 }, () => ['bash', 5])]);
    }
    expect(gaps).toEqual([]);
  }, 120_000);
});
