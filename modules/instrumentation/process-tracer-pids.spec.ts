import type { ProcessExit, ProcessStart } from './process-monitor.js';
import { StraceState } from './process-tracer-state.js';
import { pairInOrder, type OpenClone, type PidInfo, type ProcPids } from './process-tracer-pids.js';

/**
 * Pid translation without strace's --pidns-translation: lines carry host pids, clone results are
 * pids of the caller's namespace. A fake /proc stands in for the kernel's view, changed between
 * lines as processes come and go (see process-tracer-pidns.spec.ts for the real thing in bwrap).
 */

const HARNESS = 4242;
const ROOT = 1000; // bwrap, in the harness's namespace

/** A fake /proc: processes by host pid, with their threads and children. */
class FakeProc implements ProcPids {
  readonly procs = new Map<number, PidInfo & { tid: number }>();
  add(tid: number, ppid: number, nspid: number[], tgid = tid): void {
    this.procs.set(tid, { tid, tgid, ppid, nspid: [tid, ...nspid] });
  }
  remove(tid: number): void {
    this.procs.delete(tid);
  }
  status(tid: number): PidInfo | null {
    const p = this.procs.get(tid);
    return p ? { tgid: p.tgid, ppid: p.ppid, nspid: p.nspid } : null;
  }
  children(tgid: number, tid: number): number[] | null {
    if (!this.procs.has(tid)) return null;
    return [...this.procs.values()].filter((p) => p.tgid === p.tid && p.ppid === tgid).map((p) => p.tid);
  }
  tasks(tgid: number): number[] | null {
    if (!this.procs.has(tgid)) return null;
    return [...this.procs.values()].filter((p) => p.tgid === tgid).map((p) => p.tid);
  }
}

function setup() {
  const proc = new FakeProc();
  proc.add(ROOT, HARNESS, []);
  const starts: ProcessStart[] = [];
  const exits: ProcessExit[] = [];
  const gaps: string[] = [];
  const state = new StraceState({ start: (p) => starts.push(p), exit: (p) => exits.push(p), gap: (r) => gaps.push(r) }, ROOT, '/ws', HARNESS, undefined, undefined, proc);
  let t = 1_700_000_000;
  /** One strace line from `pid`, a millisecond after the previous one. */
  const line = (pid: number, text: string) => state.line(`${pid} ${(t += 0.001).toFixed(6)} ${text}`);
  const exec = (pid: number, argv: string[]) => line(pid, `execve("/usr/bin/${argv[0]}", ${JSON.stringify(argv).replace(/,/g, ', ')}, 0x7ffd /* 3 vars */) = 0`);
  const fork = (pid: number, ret: number, flags = 'CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD') => line(pid, `clone(child_stack=NULL, flags=${flags}, child_tidptr=0x7f) = ${ret}`);
  const exit = (pid: number, code = 0) => line(pid, `+++ exited with ${code} +++`);
  /** The wrapper's sandbox: bwrap (ROOT) clones its init (host 1001, pid 1 inside), the init the agent's shell (host 1002, pid 2). */
  const sandbox = () => {
    exec(ROOT, ['bwrap', '--args', '3', '--', 'bash', 'agent.sh']);
    proc.add(1001, ROOT, [1]);
    fork(ROOT, 1001, 'CLONE_NEWNS|CLONE_NEWPID|SIGCHLD');
    proc.add(1002, 1001, [2]);
    fork(1001, 2);
    exec(1002, ['bash', 'agent.sh']);
  };
  const settle = () => {
    state.tick(Date.now() + 60_000);
    state.drained(Date.now() + 60_000);
  };
  return { proc, state, starts, exits, gaps, line, exec, fork, exit, sandbox, settle, startOf: (pid: number) => starts.find((s) => s.pid === pid) };
}

describe('StraceState inside a pid namespace (no --pidns-translation)', () => {
  it("finds a child's host pid among the caller's children, by the pid the clone returned in the namespace", () => {
    const s = setup();
    s.sandbox();
    s.proc.add(1003, 1002, [3]);
    s.proc.add(1004, 1002, [4]); // a sibling, not the one this clone made
    s.fork(1002, 4);
    s.fork(1002, 3);
    s.exec(1003, ['sh', '-c', 'exit 3']);
    s.exec(1004, ['true']);
    s.exit(1003, 3);
    s.exit(1004);
    s.settle();
    expect(s.startOf(1002)).toMatchObject({ ppid: 1001, argv: ['bash', 'agent.sh'] });
    expect(s.startOf(1003)).toMatchObject({ ppid: 1002, argv: ['sh', '-c', 'exit 3'] });
    expect(s.startOf(1004)).toMatchObject({ ppid: 1002, argv: ['true'] });
    expect(s.exits.find((e) => e.pid === 1003)).toMatchObject({ exitCode: 3 });
    expect(s.gaps).toEqual([]);
    expect(s.state.pidStats).toMatchObject({ direct: 1, listed: 3, paired: 0, lost: 0 });
  });

  it("matches a child whose exec line came before its parent's clone line", () => {
    const s = setup();
    s.sandbox();
    s.proc.add(1005, 1002, [5]);
    s.exec(1005, ['make']); // held at its exec: /proc is read now
    s.proc.remove(1005); // gone by the time the clone line is read
    s.fork(1002, 5);
    s.exit(1005, 2);
    s.settle();
    expect(s.startOf(1005)).toMatchObject({ ppid: 1002, argv: ['make'] });
    expect(s.exits.find((e) => e.pid === 1005)).toMatchObject({ exitCode: 2 });
  });

  it("waits for a reader that fell behind to read the parent's clone line before asking /proc for the parent", () => {
    const s = setup(); // the lines' timestamps are years old: this reader is far behind strace
    s.sandbox();
    s.proc.add(1005, 1002, [5]);
    s.exec(1005, ['sh', '-c', 'exit 4']);
    s.proc.remove(1005); // gone before the reader gets further: /proc would say its parent is 0
    s.state.tick(Date.now() + 1000); // the FIFO has not been drained since the exec line: keep waiting
    expect(s.startOf(1005)).toBeUndefined();
    s.fork(1002, 5);
    s.exit(1005, 4);
    s.settle();
    expect(s.startOf(1005)).toMatchObject({ ppid: 1002, argv: ['sh', '-c', 'exit 4'] });
    expect(s.gaps).toEqual([]);
  });

  it('gives up on the clone line once the FIFO was drained after the exec line and the wait is over', () => {
    const s = setup();
    s.sandbox();
    s.exec(1006, ['true']); // no clone line will come; the process is gone (not in the real /proc)
    s.state.tick(Date.now() + 1000);
    expect(s.startOf(1006)).toBeUndefined(); // not drained since
    s.state.drained(Date.now());
    expect(s.startOf(1006)).toMatchObject({ ppid: 0, argv: ['true'] });
  });

  it('pairs forks of one caller that were reaped before they could be read, in order, with exact statuses', () => {
    const s = setup();
    s.sandbox();
    // ( exit 1 ); ( exit 2 ); ( exit 3 ): each subshell gone before its clone line is read.
    for (const [host, ns, code] of [
      [1010, 10, 1],
      [1013, 11, 2],
      [1020, 12, 3],
    ]) {
      s.fork(1002, ns);
      s.exit(host, code);
    }
    expect(s.starts.filter((p) => p.pid >= 1010)).toEqual([]); // not yet: open until settled
    s.settle();
    const forks = s.starts.filter((p) => p.pid >= 1010);
    expect(forks.map((p) => [p.pid, p.ppid, p.argv.join(' ')])).toEqual([
      [1010, 1002, 'bash agent.sh'],
      [1013, 1002, 'bash agent.sh'],
      [1020, 1002, 'bash agent.sh'],
    ]);
    expect(s.exits.filter((e) => e.pid >= 1010).map((e) => [e.pid, e.exitCode])).toEqual([
      [1010, 1],
      [1013, 2],
      [1020, 3],
    ]);
    expect(s.gaps).toEqual([]);
    expect(s.state.pidStats).toMatchObject({ paired: 3, lost: 0 });
  });

  it('gives a fork paired late what its parent ran when it forked, even if the parent exec\'d and ended since', () => {
    const s = setup();
    s.sandbox();
    s.proc.add(1003, 1002, [3]);
    s.fork(1002, 3);
    s.exec(1003, ['bash', 'loop.sh']);
    s.line(1003, 'chdir("/ws/sub") = 0');
    s.fork(1003, 30); // reaped before it could be read
    s.exit(1040, 0);
    s.exec(1003, ['sleep', '1']);
    s.exit(1003);
    s.settle();
    expect(s.startOf(1040)).toMatchObject({ ppid: 1003, argv: ['bash', 'loop.sh'] });
    expect(s.exits.find((e) => e.pid === 1040)).toMatchObject({ exitCode: 0 });
  });

  it('reports a gap, and records nothing wrong, when vanished forks of two callers cannot be told apart', () => {
    const s = setup();
    s.sandbox();
    s.proc.add(1003, 1002, [3]);
    s.fork(1002, 3);
    s.exec(1003, ['bash', 'other.sh']);
    s.fork(1002, 20);
    s.fork(1003, 21);
    s.exit(1030, 0);
    s.exit(1031, 1);
    s.settle(); // same count, two callers: pairing would be a guess
    s.state.finish(Date.now());
    expect(s.starts.map((p) => p.pid)).toEqual([1002, 1003]);
    expect(s.gaps).toEqual([expect.stringMatching(/^2 process\(es\) forked inside a pid namespace \(by 2 caller\(s\)\) ended before the tracer could tell their host pids apart/)]);
  });

  it('never pairs a late exit of a clone given up with a later fork: both are a gap', () => {
    const s = setup();
    s.sandbox();
    s.proc.add(1003, 1002, [3]);
    s.fork(1002, 3);
    s.exec(1003, ['bash', 'other.sh']);
    s.fork(1002, 20);
    s.fork(1003, 21);
    s.exit(1030, 0);
    s.settle(); // given up: one exit (of clone 21 or 20) still owed
    s.fork(1002, 22);
    s.exit(1031, 0); // the owed exit, late
    s.state.drained(Date.now());
    s.exit(1032, 0); // clone 22's child
    s.state.drained(Date.now());
    s.state.finish(Date.now());
    expect(s.starts.map((p) => p.pid)).toEqual([1002, 1003]);
    expect(s.gaps).toEqual([expect.stringMatching(/^2 process/), expect.stringMatching(/^1 process/)]);
  });

  it('translates at every level of nested namespaces, and keeps same-numbered pids of sibling namespaces apart', () => {
    const s = setup();
    s.sandbox();
    // The agent runs two nested sandboxes (host 1040 and 1050, pid 1 in each of their namespaces):
    s.proc.add(1040, 1002, [40, 1]);
    s.fork(1002, 40, 'CLONE_NEWPID|SIGCHLD');
    s.proc.add(1050, 1002, [50, 1]);
    s.fork(1002, 50, 'CLONE_NEWPID|SIGCHLD');
    // Each forks its pid 2; the second one's child appears first in the trace.
    s.proc.add(1041, 1040, [41, 2]);
    s.proc.add(1051, 1050, [51, 2]);
    s.exec(1051, ['b']);
    s.fork(1040, 2);
    s.fork(1050, 2);
    s.exec(1041, ['a']);
    for (const pid of [1041, 1051, 1040, 1050]) s.exit(pid);
    s.settle();
    expect(s.startOf(1041)).toMatchObject({ ppid: 1040, argv: ['a'] });
    expect(s.startOf(1051)).toMatchObject({ ppid: 1050, argv: ['b'] });
    expect(s.startOf(1040)).toMatchObject({ ppid: 1002 });
    expect(s.gaps).toEqual([]);
  });

  it('does not report threads, found among the tasks or paired when gone', () => {
    const s = setup();
    s.sandbox();
    s.proc.add(1060, 1002, [60]);
    s.fork(1002, 60);
    s.exec(1060, ['python3', 'x.py']);
    const thread = 'CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM';
    s.proc.add(1061, 1002, [61], 1060);
    s.fork(1060, 61, thread);
    s.fork(1060, 62, thread); // gone before it was read
    s.exit(1062);
    s.exit(1061);
    s.exit(1060);
    s.settle();
    expect(s.starts.map((p) => p.pid)).toEqual([1002, 1060]);
    expect(s.exits.map((p) => p.pid)).toEqual([1060]);
    expect(s.gaps).toEqual([]);
  });

  it('needs no /proc read at all outside a namespace', () => {
    const s = setup();
    let reads = 0;
    const status = s.proc.status.bind(s.proc);
    s.proc.status = (tid) => (reads++, status(tid));
    s.exec(ROOT, ['bash', '-c', '( : ); true']);
    s.fork(ROOT, 1070);
    s.exit(1070);
    s.fork(ROOT, 1071);
    s.exec(1071, ['true']);
    s.exit(1071);
    s.settle();
    expect(s.starts.map((p) => [p.pid, p.ppid])).toEqual([
      [ROOT, HARNESS],
      [1070, ROOT],
      [1071, ROOT],
    ]);
    expect(reads).toBe(0);
  });
});

describe('pairInOrder', () => {
  const open = (caller: number, nsPid: number, at = nsPid): OpenClone => ({ caller, leader: caller, nsPid, level: 1, isThread: false, at, chosenPid: false });
  it('pairs one caller in order, refuses several callers, unequal counts, wrapped or chosen pids', () => {
    expect(pairInOrder([open(5, 7), open(5, 9)], [2003, 2001])?.map(([c, h]) => [c.nsPid, h])).toEqual([
      [7, 2001],
      [9, 2003],
    ]);
    expect(pairInOrder([open(5, 7), open(6, 9)], [2001, 2003])).toBeNull();
    expect(pairInOrder([open(5, 7)], [2001, 2003])).toBeNull();
    expect(pairInOrder([open(5, 32767), open(5, 300)], [2001, 2003])).toBeNull(); // the namespace's pids wrapped
    expect(pairInOrder([open(5, 7), open(5, 9)], [32760, 301])).toBeNull(); // the host's
    expect(pairInOrder([{ ...open(5, 7), chosenPid: true }], [2001])).toBeNull();
  });
});
