import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, constants, existsSync, mkdtempSync, openSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
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

  it('lets an exec of a program the harness named go at once, and still holds a #! script whose interpreter it is', async () => {
    const image = realpathSync('/bin/true');
    const identity = identityOf(image);
    const script = join(dir, 's');
    writeFileSync(script, `#!${image}\n`, { mode: 0o755 });
    const t = start(['sh', '-c', `/bin/true; ${script}; exec /bin/true`]);
    await until('sh held', () => /--- held at exec 1 ---/.test(t.trace()));
    writeSync(t.control, `K ${identity}\n${t.pid} 1\n`);
    // The #! script runs true too, but it is not true: held, so that the harness reads the script.
    const held = await until('the script held', () => /^(\d+) \S+ --- held at exec 2 ---$/m.exec(t.trace()));
    const lines = t.trace().split('\n');
    const known = lines.findIndex((l) => l.endsWith(`--- known exec ${identity} "${image}" ---`));
    expect(known).toBeGreaterThan(0);
    expect(lines[known + 1]).toMatch(/execve\("\/bin\/true", \["\/bin\/true"\], envp\) = 0$/);
    expect(lines.filter((l) => l.includes('--- known exec'))).toHaveLength(1);
    expect(t.trace()).toMatch(new RegExp(`execve\\("${script}", .*\\) = 0\n${held[1]} \\S+ --- held at exec 2 ---`));
    writeSync(t.control, `${held[1]} 2\n`);
    const [code] = await t.exited;
    expect(code).toBe(0);
    // The last exec, of true by the same process, went at once too: held twice in all.
    expect(t.trace().match(/--- known exec/g)).toHaveLength(2);
    expect(t.trace()).not.toMatch(/held at exec 3/);
    closeSync(t.control);
  });

  it('lets a known interpreter go only when its first argument runs inline code, never when it names a script', async () => {
    const image = realpathSync('/bin/sh');
    const identity = identityOf(image);
    writeFileSync(join(dir, 'run.sh'), 'exit 0\n');
    // sh's own first exec is held (not named yet); then sh -c (inline) goes at once, sh run.sh is held.
    const t = start(['sh', '-c', `sh -c 'exit 0'; sh ${join(dir, 'run.sh')}; sh -e -c 'exit 0'`]);
    await until('sh held', () => /--- held at exec 1 ---/.test(t.trace()));
    writeSync(t.control, `K ${identity} -c -s -\n${t.pid} 1\n`);
    const second = await until('the script run held', () => /^(\d+) \S+ --- held at exec 2 ---$/m.exec(t.trace()));
    expect(t.trace()).toMatch(new RegExp(`--- known exec ${identity} "${image}" ---\n\\d+ \\S+ execve\\("[^"]*/sh", \\["sh", "-c", "exit 0"\\]`));
    expect(t.trace()).toMatch(new RegExp(`execve\\("[^"]*/sh", \\["sh", "${join(dir, 'run.sh')}"\\], envp\\) = 0\n${second[1]} \\S+ --- held at exec 2 ---`));
    writeSync(t.control, `${second[1]} 2\n`);
    // An option before -c is not read: held (the harness reads its arguments as usual).
    const third = await until('sh -e -c held', () => /^(\d+) \S+ --- held at exec 3 ---$/m.exec(t.trace()));
    writeSync(t.control, `${third[1]} 3\n`);
    const [code] = await t.exited;
    expect(code).toBe(0);
    expect(t.trace().match(/--- known exec/g)).toHaveLength(1);
    closeSync(t.control);
  });
});

/** A file's exact stat identity as a2rl-trace reads and prints it. */
function identityOf(file: string): string {
  const st = statSync(file, { bigint: true });
  const billion = 1_000_000_000n;
  return [st.dev, st.ino, st.size, st.mtimeNs / billion, st.mtimeNs % billion, st.ctimeNs / billion, st.ctimeNs % billion].join(' ');
}
