import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { packageRoot } from '../settings/package-root.js';

/**
 * a2rl's own process tracer (native/a2rl-trace.c), built from its source with the machine's C
 * compiler the first time a run needs it — there is no prebuilt binary to trust or to go stale — and
 * kept under dist/native (or ~/.cache/a2rl/native) by the hash of its source. `ptraceTracerBinary()`
 * is the binary when it builds and traces here, else undefined with `ptraceTracerProblem()` saying
 * why; the launcher then falls back to strace (agent-process.ts).
 */

type Found = { binary: string; problem?: undefined } | { binary?: undefined; problem: string };

/** By the binary asked for; '' is the one built from source. */
const found = new Map<string, Found>();

/**
 * The working tracer: the one built from source, or `binary` when given (a build of one's own);
 * undefined where it does not build or trace here. Built and probed once per process.
 */
export function ptraceTracerBinary(binary?: string): string | undefined {
  return lookup(binary).binary;
}

/** Why there is no working ptrace tracer here (after ptraceTracerBinary() returned undefined). */
export function ptraceTracerProblem(binary?: string): string | undefined {
  return lookup(binary).problem;
}

function lookup(binary: string | undefined): Found {
  let result = found.get(binary ?? '');
  if (!result) {
    result = binary === undefined ? build() : probed(binary);
    found.set(binary ?? '', result);
  }
  return result;
}

function build(): Found {
  const source = path.join(packageRoot(), 'modules', 'instrumentation', 'native', 'a2rl-trace.c');
  if (!existsSync(source)) return { problem: `${source} is missing` };
  const version = createHash('sha256').update(readFileSync(source)).update(process.arch).digest('hex').slice(0, 16);
  const binary = builtBinary(source, version);
  return typeof binary === 'string' ? probed(binary) : binary;
}

function probed(binary: string): Found {
  const problem = probe(binary);
  return problem ? { problem } : { binary };
}

/** Where the binary for this source version is, building it there first if needed. */
function builtBinary(source: string, version: string): string | { problem: string } {
  const dirs = [path.join(packageRoot(), 'dist', 'native'), path.join(homedir(), '.cache', 'a2rl', 'native')];
  let lastProblem = 'no writable directory for it';
  for (const dir of dirs) {
    const target = path.join(dir, `a2rl-trace-${version}`);
    if (existsSync(target)) return target;
    try {
      mkdirSync(dir, { recursive: true, mode: 0o755 });
    } catch (err) {
      lastProblem = `cannot create ${dir}: ${(err as Error).message}`;
      continue;
    }
    // Built under a temporary name and renamed: test workers and parallel runs may build at once.
    const partial = `${target}.${process.pid}.partial`;
    const cc = process.env.CC || 'cc';
    const r = spawnSync(cc, ['-O2', '-Wall', '-o', partial, source], { encoding: 'utf8', timeout: 120_000 });
    if (r.error || r.status !== 0) {
      rmSync(partial, { force: true });
      const why = r.error ? r.error.message : (r.stderr || '').trim().split('\n').slice(-3).join(' ');
      return { problem: `cannot build the ptrace tracer with ${cc}: ${why}` };
    }
    chmodSync(partial, 0o755);
    renameSync(partial, target);
    return target;
  }
  return { problem: lastProblem };
}

/** Traces `true` once: a kernel or a container that forbids ptrace or seccomp filters fails here. */
function probe(binary: string): string | undefined {
  const dir = mkdtempSync(path.join(tmpdir(), 'a2rl-trace-probe-'));
  try {
    const out = path.join(dir, 'trace');
    const control = path.join(dir, 'control'); // empty: read at EOF, so nothing is held
    writeFileSync(out, '');
    writeFileSync(control, '');
    const r = spawnSync(binary, ['-o', out, '-c', control, '--', 'true'], { encoding: 'utf8', timeout: 10_000 });
    if (r.status !== 0) return `the ptrace tracer does not work here: ${(r.stderr || r.error?.message || `exit status ${r.status}`).trim()}`;
    // The command's exit returns here; the tracer, a detached grandchild, writes its last line just after.
    const traced = /execve\("[^"]*true".* = 0\n(?:.*\n)*.*\+\+\+ exited with 0 \+\+\+/;
    for (let waited = 0; waited < 5000; waited += 10) {
      if (traced.test(readFileSync(out, 'utf8'))) return undefined;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
    return `the ptrace tracer does not work here: it did not report tracing \`true\` (${JSON.stringify(readFileSync(out, 'utf8').slice(0, 300))})`;
  } catch (err) {
    return `the ptrace tracer does not work here: ${(err as Error).message}`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
