import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { getTask } from '../index.js';
import { checkProtocol, loadProtocol, ProtocolError } from './protocol.js';
import { loadPermutation, rowsRecipe } from './split-rows.js';
import { splitReport, SplitNotDerivedError } from './split-report.js';

const PAPER_TASKS = ['gsm8k', 'humaneval', 'alpacaeval', 'alfworld', 'webshop', 'deepsearchqa'] as const;
const sha256 = (xs: readonly number[]) => createHash('sha256').update(JSON.stringify(xs)).digest('hex');

describe('the paper tasks\' protocol files', () => {
  it('are loaded and checked with each pack, which carries them (so their hash is in the cache key)', () => {
    for (const id of PAPER_TASKS) expect(getTask(id).protocol).toEqual(loadProtocol(id));
  });

  it('state the paper harness\'s request settings: API, max tokens, stop sequences, temperature', () => {
    const requests = Object.fromEntries(PAPER_TASKS.map((id) => [id, loadProtocol(id).request]));
    expect(requests).toEqual({
      gsm8k: { api: 'chat', maxTokens: 512, stop: [], temperature: 0 },
      humaneval: { api: 'chat', maxTokens: 8192, stop: [], temperature: 0 },
      alpacaeval: { api: 'chat', maxTokens: 512, stop: [], temperature: 0 },
      alfworld: { api: 'completion', maxTokens: 100, stop: ['\n'], temperature: 0 },
      webshop: { api: 'chat', maxTokens: 100, stop: ['\n'], temperature: 0 },
      deepsearchqa: { api: 'completion', maxTokens: 256, stop: ['\nAction:', '\nThought:', '\nObservation:'], temperature: 0 },
    });
  });

  it('name every deliberate difference, each explained in docs/paper-tasks.md', async () => {
    const docs = await readFile(path.resolve('docs/paper-tasks.md'), 'utf8');
    const names = PAPER_TASKS.flatMap((id) => loadProtocol(id).deviations.map((d) => d.name));
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) expect(docs).toContain(`\`${name}\``);
  });

  it('refuse a malformed protocol with one line naming the file and the field', () => {
    const good = loadProtocol('humaneval');
    const bad = (change: (p: Record<string, unknown>) => void) => {
      const copy = structuredClone(good) as unknown as Record<string, unknown>;
      change(copy);
      return () => checkProtocol(copy, 'x/protocol.json');
    };
    expect(bad((p) => { (p.request as Record<string, unknown>).api = 'text'; })).toThrow(new ProtocolError('x/protocol.json: request.api must be "chat" or "completion"'));
    expect(bad((p) => { (p.request as Record<string, unknown>).maxTokens = 0; })).toThrow(/request\.maxTokens must be a positive integer/);
    expect(bad((p) => { (p.request as Record<string, unknown>).stop = ['']; })).toThrow(/request\.stop\[0\] must be a non-empty string/);
    expect(bad((p) => { p.deviations = [{ name: 'a', reason: 'r' }, { name: 'a', reason: 'r' }]; })).toThrow(/deviations names must be unique/);
    expect(bad((p) => { p.deviations = [{ name: 'Not Kebab', reason: 'r' }]; })).toThrow(/deviations\[0\]\.name must be kebab-case/);
    expect(bad((p) => { ((p.split as Record<string, unknown>).private as Record<string, unknown>).order = 'permutation'; })).toThrow(/split\.permutation is required/);
    expect(bad((p) => { ((p.split as Record<string, unknown>).visible as Record<string, unknown>).file = 'other.jsonl'; })).toThrow(/split\.visible\.file "other\.jsonl" has no entry in split\.expectedRows/);
    expect(() => loadProtocol('ref-arith')).toThrow(ProtocolError);
  });
});

describe('the splits a2rl derives (a2rl data split), pinned', () => {
  const pinned = {
    gsm8k: { visible: [7473, 0, 7472, 'e09605460815ef2c0d8447da037a491f55088feb51dcd8e5d7514ca59ae67f1c'], private: [1319, 0, 1318, '69d6744016699073a7ad0e561dab501fffe5a1197aa7dbe66907c4f14bfd22df'] },
    humaneval: { visible: [82, 0, 81, 'a79cd03ba41f9b160913c87fe043b40c8f29c026adce89d1a9a03e268293f906'], private: [82, 82, 163, '0b58d213417d7536c9c01d7b8ceeb7b1e1ff5c865318f03d64a08ec2b583f1b5'] },
    alpacaeval: { visible: [2000, 0, 1999, '494b15107deb77d9741606b7bddfecb8b350a486bb5a751655b294d4ebc6f1a4'], private: [805, 0, 804, 'e24e126c951439e5a016768f9b3d821d017cdbddf138fb4aad755de81788476c'] },
    // numpy.random.default_rng(42).permutation(900)[0:100] and [100:300]; the same sums as derive-permutation.py prints.
    deepsearchqa: { visible: [100, 420, 86, 'bb0182a2f647c2517f836fcc88a76da02d51c5769a2c8a76464b5daf03108f16'], private: [200, 538, 664, '00dcd7fa338645d60c3b1e22dae94016435655abf62d1fb6fbcabfb74e4dfa7c'] },
  };

  it.each(Object.entries(pinned))('%s: counts, first and last source rows, sha256 of each index list', async (task, sides) => {
    const report = await splitReport(task, null, {});
    const summary = (xs: number[]) => [xs.length, xs[0], xs.at(-1), sha256(xs)];
    expect({ visible: summary(report.visible), private: summary(report.private) }).toEqual(sides);
    expect(report.rowCounts).toBe('expected');
  });

  it('follows A2RL_ALPACAEVAL_TRAIN_COUNT for the visible alpaca rows', async () => {
    const report = await splitReport('alpacaeval', null, { A2RL_ALPACAEVAL_TRAIN_COUNT: '50' });
    expect([report.visible.length, report.visible.at(-1), report.private.length]).toEqual([50, 49, 805]);
  });

  it('says that ALFWorld\'s and WebShop\'s splits are their environments\' own', async () => {
    await expect(splitReport('alfworld', null)).rejects.toThrow(SplitNotDerivedError);
    await expect(splitReport('webshop', null)).rejects.toThrow(/not derived by a2rl.*goal list/);
  });

  describe('with fetched files', () => {
    let root: string;
    beforeAll(async () => {
      root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-split-'));
    });
    afterAll(() => rm(root, { recursive: true, force: true }));

    it('counts the fetched file\'s rows (a Python slice stops at the end) and refuses a DeepSearchQA file that is not the 900-row release', async () => {
      await writeFile(path.join(root, 'HumanEval.jsonl'), Array.from({ length: 100 }, (_, i) => `{"i":${i}}\n`).join(''));
      const humaneval = await splitReport('humaneval', root, {});
      expect([humaneval.rowCounts, humaneval.visible.length, humaneval.private[0], humaneval.private.at(-1)]).toEqual(['fetched', 82, 82, 99]);
      await writeFile(path.join(root, 'dsqa_full.csv'), 'problem,answer\n"a, b",c\n"multi\nline",d\n');
      await expect(splitReport('deepsearchqa', root, {})).rejects.toThrow(/dsqa_full\.csv has 2 rows, the shipped permutation orders 900/);
    });

    it('refuses a shipped permutation that was edited (its sha256 is in the protocol)', async () => {
      const pkg = path.join(root, 'pkg');
      await mkdir(path.join(pkg, 'tasks', 'deepsearchqa'), { recursive: true });
      await cp(path.resolve('tasks/deepsearchqa/protocol.json'), path.join(pkg, 'tasks', 'deepsearchqa', 'protocol.json'));
      const shipped = JSON.parse(await readFile(path.resolve('tasks/deepsearchqa/hf-shuffle-seed42.json'), 'utf8')) as { permutation: number[] };
      const recipe = rowsRecipe(loadProtocol('deepsearchqa', pkg));
      const file = path.join(pkg, 'tasks', 'deepsearchqa', 'hf-shuffle-seed42.json');
      await writeFile(file, JSON.stringify(shipped));
      expect(loadPermutation('deepsearchqa', recipe, pkg)).toEqual(shipped.permutation);
      const swapped = [...shipped.permutation];
      [swapped[0], swapped[1]] = [swapped[1]!, swapped[0]!];
      await writeFile(file, JSON.stringify({ permutation: swapped }));
      expect(() => loadPermutation('deepsearchqa', recipe, pkg)).toThrow(/sha256 of the permutation is .*, the protocol records 26b0860b/);
      await writeFile(file, JSON.stringify({ permutation: [...shipped.permutation.slice(1), shipped.permutation[1]] }));
      expect(() => loadPermutation('deepsearchqa', recipe, pkg)).toThrow(/must list each of 0\.\.899 once/);
    });
  });

  // Skipped without numpy only: re-deriving needs numpy's PCG64 permutation itself (the shipped list's
  // checksum and first/last indices are pinned above regardless). .ci/run installs python3-numpy.
  const numpy = spawnSync('python3', ['-c', 'import numpy'], { stdio: 'ignore' }).status === 0;
  (numpy ? it : it.skip)('re-derives the shipped permutation with numpy (tasks/deepsearchqa/derive-permutation.py --check)', () => {
    const out = execFileSync('python3', [path.resolve('tasks/deepsearchqa/derive-permutation.py'), '--check'], { encoding: 'utf8' });
    expect(out).toMatch(/matches numpy .*default_rng\(42\)\.permutation\(900\)/);
  });
});
