import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, constants, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ptraceTracerBinary, ptraceTracerProblem } from './ptrace-tracer.js';
import { until } from '../../test/testing/helpers.js';

/** a2rl-trace on its own, driven as the worker drives it: its output a file read here, its control FIFO written here. */
describe('a2rl-trace (native/a2rl-trace.c)', () => {
  let dir: string;
  let binary: string;
  beforeAll(() => {
    binary = ptraceTracerBinary()!;
    expect(ptraceTracerProblem()).toBeUndefined();
  });
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'a2rl-trace-spec-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  function start(command: string[]): { pid: number; exited: Promise<unknown[]>; control: number; trace: () => string } {
    const out = join(dir, 'trace');
    const control = join(dir, 'control');
    writeFileSync(out, '');
    execFileSync('mkfifo', [control]);
    // Read-write and non-blocking, as the worker opens it: the tracer sees EOF once this is closed.
    const fd = openSync(control, constants.O_RDWR | constants.O_NONBLOCK);
    const child = spawn(binary, ['-o', out, '-c', control, '--', ...command], { stdio: 'ignore' });
    return { pid: child.pid!, exited: once(child, 'exit'), control: fd, trace: () => readFileSync(out, 'utf8') };
  }

  const state = (pid: number) => /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];

  it('is built from its source into a file named by the source hash, and probed', () => {
    expect(existsSync(binary)).toBe(true);
    expect(binary).toMatch(/a2rl-trace-[0-9a-f]{16}$/);
    expect(ptraceTracerBinary('/nonexistent/a2rl-trace')).toBeUndefined();
    expect(ptraceTracerProblem('/nonexistent/a2rl-trace')).toMatch(/does not work here/);
  });

  it('holds an exec until its pid and hold number are written to the control FIFO', async () => {
    const t = start(['sh', '-c', 'exec /bin/true']);
    const first = await until('the first exec held', () => /^(\d+) \S+ --- held at exec (\d+) ---$/m.exec(t.trace()));
    expect(Number(first[1])).toBe(t.pid);
    expect(state(t.pid)).toBe('t'); // in a ptrace stop: nothing of sh has run
    writeSync(t.control, `${first[1]} ${first[2]}\n`);
    // sh runs and execs /bin/true, which is held in turn (hold 2), still the same process.
    const second = await until('the second exec held', () => /^(\d+) \S+ --- held at exec 2 ---$/m.exec(t.trace()));
    expect(Number(second[1])).toBe(t.pid);
    expect(t.trace()).toMatch(/execve\("\/bin\/true", \["\/bin\/true"\], envp\) = 0/);
    writeSync(t.control, `${t.pid} 2\n`);
    const [code] = await t.exited;
    expect(code).toBe(0);
    await until('the exit line', () => t.trace().includes(`${t.pid} `) && /\+\+\+ exited with 0 \+\+\+/.test(t.trace()));
    closeSync(t.control);
  });

  it('lets every held process go once the harness is gone (its end of the control FIFO closed), and holds no more', async () => {
    const t = start(['sh', '-c', 'exec /bin/true']);
    await until('the first exec held', () => /--- held at exec 1 ---/.test(t.trace()));
    expect(state(t.pid)).toBe('t');
    closeSync(t.control);
    const [code] = await t.exited;
    expect(code).toBe(0);
    // The second exec was reported but not held.
    await until('the exit line', () => /\+\+\+ exited with 0 \+\+\+/.test(t.trace()));
    expect(t.trace()).toMatch(/execve\("\/bin\/true"/);
    expect(t.trace()).not.toMatch(/held at exec 2/);
  });
});
