import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, mkdirSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { EvaluatorError, InvalidCheckpointError, type TaskPaths } from '../task-pack.js';
import { TRAIN_SEED_LIMIT, refHousehold, trainingLayout, trainingSession } from './index.js';
import { EpisodeView, actionFeatures } from './policy.js';
import { Rng } from './prng.js';
import { HouseholdGame, MAX_STEPS, expertAction, layoutFingerprint, type Layout } from './world.js';

const AGENT_LIB = fileURLToPath(new URL('../../modules/agents/reference/ref-household/lib/', import.meta.url));
const run = promisify(execFile);

function paths(root: string): TaskPaths {
  return { dataDir: join(root, 'data'), modelDir: join(root, 'model'), privateDir: join(root, 'private') };
}

function hashTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const p = join(e.parentPath, e.name);
    out[p.slice(dir.length)] = createHash('sha256').update(readFileSync(p)).digest('hex');
  }
  return out;
}

function evalLayouts(privateDir: string): Layout[] {
  return (JSON.parse(readFileSync(join(privateDir, 'eval.json'), 'utf8')) as { layouts: Layout[] }).layouts;
}

function solveWithExpert(layout: Layout): { reward: number; steps: number } {
  const game = new HouseholdGame(layout);
  let r = { reward: 0, done: false };
  let steps = 0;
  while (!r.done) {
    r = game.step(expertAction(game));
    steps++;
  }
  return { reward: r.reward, steps };
}

describe('ref-household task pack', () => {
  let root: string;
  let p: TaskPaths;
  let baseline: number;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'ref-household-'));
    p = paths(join(root, 'a'));
    await refHousehold.materialize(p);
    baseline = (await refHousehold.evaluate(p.modelDir, p.privateDir)).score;
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('materialises byte-identical files every time', async () => {
    const again = paths(join(root, 'b'));
    await refHousehold.materialize(again);
    const tree = (t: TaskPaths) => ({ data: hashTree(t.dataDir), model: hashTree(t.modelDir), priv: hashTree(t.privateDir) });
    expect(tree(again)).toEqual(tree(p));
    expect(Object.keys(tree(p).data).sort()).toEqual(['/README.md', '/demos.jsonl']);
  });

  it('has an expert that solves every held-out layout well within the step limit', () => {
    const layouts = evalLayouts(p.privateDir);
    expect(layouts).toHaveLength(100);
    for (const layout of layouts) {
      const { reward, steps } = solveWithExpert(layout);
      expect(reward).toBe(1);
      expect(steps).toBeLessThanOrEqual(8);
    }
    expect(new Set(layouts.map((l) => l.goal.kind))).toEqual(new Set(['pick', 'clean', 'heat', 'cool']));
  });

  it('ships successful expert demonstrations on training layouts only', () => {
    const demos = readFileSync(join(p.dataDir, 'demos.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(demos.length).toBeGreaterThanOrEqual(100);
    for (const d of demos) {
      expect(d.reward).toBe(1);
      expect(d.seed).toBeLessThan(TRAIN_SEED_LIMIT);
      for (const s of d.steps) expect(s.admissible_actions).toContain(s.action);
    }
  });

  it('keeps training and held-out layouts disjoint', () => {
    const held = evalLayouts(p.privateDir);
    for (const l of held) expect(l.seed).toBeGreaterThanOrEqual(TRAIN_SEED_LIMIT);
    const heldPrints = new Set(held.map(layoutFingerprint));
    for (let seed = 0; seed < 2000; seed++) expect(heldPrints.has(layoutFingerprint(trainingLayout(seed)))).toBe(false);
  });

  it('refuses training sessions on held-out seeds or malformed seeds', () => {
    const env = refHousehold.environment!;
    for (const l of evalLayouts(p.privateDir).slice(0, 5)) expect(() => trainingSession(l.seed)).toThrow(RangeError);
    for (const bad of [-1, 1.5, TRAIN_SEED_LIMIT, Number.NaN]) expect(() => trainingSession(bad)).toThrow(RangeError);
  });

  it('plays by the rules: admissible actions, "Nothing happens.", sparse reward, episode ends at max steps', () => {
    const env = refHousehold.environment!;
    expect(env.maxSteps).toBe(MAX_STEPS);
    const session = trainingSession(42);
    const first = session.reset();
    expect(first.observation).toMatch(/Your task is to: .+\.$/);
    expect(first.admissibleActions).toEqual(expect.arrayContaining(['look', 'inventory']));
    expect(first.admissibleActions.some((a) => a.startsWith('go to '))).toBe(true);

    let last = session.step('fly to the moon');
    expect(last).toMatchObject({ observation: 'Nothing happens.', reward: 0, done: false });
    for (let i = 2; i <= MAX_STEPS; i++) last = session.step('look');
    expect(last).toMatchObject({ reward: 0, done: true, admissibleActions: [] });
    expect(session.step('look')).toMatchObject({ reward: 0, done: true });

    // reset() replays the same layout from the start; the expert then wins with reward 1 on the last step only.
    expect(session.reset().observation).toBe(first.observation);
    const game = session as HouseholdGame;
    const rewards: number[] = [];
    while (!game.done) rewards.push(game.step(expertAction(game)).reward);
    expect(rewards.at(-1)).toBe(1);
    expect(rewards.slice(0, -1).every((r) => r === 0)).toBe(true);
  });

  it('scores the weak base checkpoint low but above zero, deterministically', async () => {
    const again = await refHousehold.evaluate(p.modelDir, p.privateDir);
    expect(again.score).toBe(baseline);
    expect(baseline).toBeGreaterThan(0);
    expect(baseline).toBeLessThan(25);
    expect(again.details).toMatchObject({ episodes: 100, successByGoalKind: expect.any(Object) });
  });

  it('scores an SFT checkpoint trained by the reference training script well above the base', async () => {
    const out = join(root, 'sft');
    await run(process.execPath, [join(AGENT_LIB, 'train_sft.mjs'), '--data', join(p.dataDir, 'demos.jsonl'), '--init', p.modelDir, '--out', out]);
    const sft = await refHousehold.evaluate(out, p.privateDir);
    expect(sft.score).toBeGreaterThan(baseline + 30);
  });

  it("computes the same features in the agent's policy library as in the evaluator", async () => {
    const lib = (await import(pathToFileURL(join(AGENT_LIB, 'policy.mjs')).href)) as {
      EpisodeView: new (obs: string) => { observe(a: string, o: string): void; phase: string };
      features(view: unknown, action: string): string[];
    };
    const rng = new Rng(7);
    for (let seed = 0; seed < 60; seed++) {
      const game = new HouseholdGame(trainingLayout(seed));
      const first = game.reset();
      const ours = new EpisodeView(first.observation);
      const theirs = new lib.EpisodeView(first.observation);
      let actions = first.admissibleActions;
      while (!game.done) {
        for (const a of actions) expect(lib.features(theirs, a)).toEqual(actionFeatures(ours, a));
        // Mix expert moves with random ones so every phase (including "wrong") is visited.
        const action = rng.next() < 0.6 ? expertAction(game) : rng.pick(actions);
        const r = game.step(action);
        ours.observe(action, r.observation);
        theirs.observe(action, r.observation);
        actions = r.admissibleActions;
      }
    }
  });

  describe('rejects unloadable checkpoints with InvalidCheckpointError', () => {
    const cases: Array<[string, (dir: string) => void]> = [
      ['missing directory', (dir) => rmSync(dir, { recursive: true })],
      ['missing manifest', (dir) => rmSync(join(dir, 'manifest.json'))],
      ['wrong format', (dir) => writeFileSync(join(dir, 'manifest.json'), '{"format":"a2rl-ref/ref-arith/1"}')],
      ['garbled policy', (dir) => writeFileSync(join(dir, 'policy.json'), '{"weights": {')],
      ['missing weights', (dir) => writeFileSync(join(dir, 'policy.json'), '{"w": {}}')],
      ['non-numeric weight', (dir) => writeFileSync(join(dir, 'policy.json'), '{"weights": {"find:go": "1"}}')],
      ['null weight', (dir) => writeFileSync(join(dir, 'policy.json'), '{"weights": {"find:go": null}}')],
      [
        'too many weights',
        (dir) => writeFileSync(join(dir, 'policy.json'), JSON.stringify({ weights: Object.fromEntries(Array.from({ length: 20001 }, (_, i) => [`f${i}`, 1])) })),
      ],
    ];
    it.each(cases)('%s', async (_name, corrupt) => {
      const dir = join(root, `bad-${_name.replace(/\W+/g, '-')}`);
      mkdirSync(dir, { recursive: true });
      cpSync(p.modelDir, dir, { recursive: true });
      corrupt(dir);
      await expect(refHousehold.evaluate(dir, p.privateDir)).rejects.toThrow(InvalidCheckpointError);
    });
  });

  it('blames a missing held-out set on the evaluator, not the agent', async () => {
    await expect(refHousehold.evaluate(p.modelDir, join(root, 'nowhere'))).rejects.toThrow(EvaluatorError);
  });
});
