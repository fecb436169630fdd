import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { testEvaluationContext } from '../../test/servers/openai-test-server.js';
import { DatasetMissingError } from '../paper-common/dataset.js';
import type { TaskPaths } from '../task-pack.js';
import { buildProgram, extractCode, type HumanEvalProblem } from './completion.js';
import { humaneval, passAt1, splitProblems } from './index.js';
import { runPythonSandboxed, type SandboxLimits } from './sandbox.js';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const FAST: SandboxLimits = { timeMs: 3_000, memoryBytes: 512 * 1024 ** 2, outputBytes: 64 * 1024 };

const problem: HumanEvalProblem = {
  task_id: 'Spec/0',
  prompt: 'import math\n\n\ndef double(x: int) -> int:\n    """Return twice x."""\n',
  canonical_solution: '    return 2 * x\n',
  test: 'def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-3) == -6\n',
  entry_point: 'double',
};
const run = (reply: string) => runPythonSandboxed(buildProgram(problem, reply), FAST);

describe('turning a model reply into the tested program', () => {
  it('takes the first fenced block (```python, bare ``` or unterminated), else the whole reply', () => {
    expect(extractCode('Sure:\n```python\nA\n```\nthen\n```\nB\n```')).toBe('A\n');
    expect(extractCode('```\nbare\n```')).toBe('bare\n');
    expect(extractCode('```py\nopen ended')).toBe('open ended');
    expect(extractCode('    return 1\n')).toBe('    return 1\n');
  });

  it('replaces the stub with a full definition (keeping the prompt imports) or appends a body', async () => {
    const full = buildProgram(problem, '```python\ndef double(x):\n    return math.floor(2 * x)\n```');
    expect(full).toContain('import math');
    expect(full).toMatch(/"""Return twice x."""\n    pass\n\ndef double\(x\):/);
    expect(buildProgram(problem, '    return 2 * x\n')).toContain('"""Return twice x."""\n    return 2 * x\n');
    expect((await runPythonSandboxed(full, FAST)).outcome).toBe('passed');
  });
});

describe('running completions in the sandbox (bwrap, no network, limits)', () => {
  it('passes a correct body and a correct full function', async () => {
    expect((await run('    return 2 * x\n')).outcome).toBe('passed');
    expect((await run('```python\ndef double(x: int) -> int:\n    return x + x\n```')).outcome).toBe('passed');
  });

  it('fails a wrong answer and a syntax error', async () => {
    expect((await run('    return x\n')).outcome).toBe('failed');
    expect((await run('I cannot help with that.')).outcome).toBe('failed');
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
      expect(result.output).toMatch(/Connection refused|unreachable|URLError/);
    } finally {
      server.close();
    }
  });

  it('sees a read-only system and cannot write outside its tmpfs', async () => {
    const result = await run('    open("/usr/a2rl-probe", "w")\n');
    expect(result.outcome).toBe('failed');
    expect(result.output).toMatch(/Read-only file system|Permission denied/);
  });
});

describe('pass@1 and the split', () => {
  it('is the fraction of passed problems (one greedy sample each)', () => {
    expect(passAt1(['passed', 'failed', 'timeout', 'passed'])).toBe(0.5);
    expect(passAt1(['output_limit'])).toBe(0);
    expect(passAt1([])).toBe(0);
  });

  it('shows the first half of the problems and holds out the rest (82/82 for 164)', () => {
    const all = Array.from({ length: 164 }, (_, i) => i);
    const { visible, held } = splitProblems(all);
    expect([visible.length, held.length, visible.at(-1), held[0]]).toEqual([82, 82, 81, 82]);
  });
});

describe('the humaneval pack on the fixture dataset', () => {
  let root: string;
  let paths: TaskPaths;
  const stopped: string[] = [];
  const ctx = testEvaluationContext({ stopped });

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-humaneval-'));
    paths = { datasetDir: fixtures, dataDir: path.join(root, 'data'), modelDir: path.join(root, 'model'), privateDir: path.join(root, 'private') };
    await humaneval.materialize(paths);
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('materialises problems 0–2 as visible data and 3–5 as the private set', async () => {
    const ids = async (file: string) => (await readFile(file, 'utf8')).trimEnd().split('\n').map((l) => (JSON.parse(l) as HumanEvalProblem).task_id);
    expect(await ids(path.join(paths.dataDir, 'humaneval.jsonl'))).toEqual(['Fixture/0', 'Fixture/1', 'Fixture/2']);
    expect(await ids(path.join(paths.privateDir, 'humaneval.jsonl'))).toEqual(['Fixture/3', 'Fixture/4', 'Fixture/5']);
  });

  it('scores the base checkpoint 1/3 and the better one 3/3 (pass@1 × 100)', async () => {
    const base = await humaneval.evaluate(paths.modelDir, paths.privateDir, undefined, ctx);
    expect(base.score).toBe(33.33);
    expect(base.details).toMatchObject({ passed: 1, total: 3, passedTasks: ['Fixture/3'] });
    const good = await humaneval.evaluate(path.join(fixtures, 'good-model'), paths.privateDir, undefined, ctx);
    expect(good.score).toBe(100);
    expect(stopped).toEqual([paths.modelDir, path.join(fixtures, 'good-model')]);
  });

  it('says to run `a2rl data fetch humaneval` when the dataset is missing', async () => {
    const attempt = humaneval.materialize({ ...paths, datasetDir: path.join(root, 'nowhere') });
    await expect(attempt).rejects.toBeInstanceOf(DatasetMissingError);
    await expect(humaneval.materialize({ ...paths, datasetDir: path.join(root, 'nowhere') })).rejects.toThrow(/a2rl data fetch humaneval/);
  });
});
