import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { InvalidCheckpointError, type TaskPack } from '../task-pack.js';
import { agentEnv, hashTree, materializeInTemp, runNode } from './spec-helpers.js';
import { startStubGradingServer } from './stub-grading-server.js';

/**
 * The behaviour every reference task pack and its reference-agent code must show; each pack's spec
 * calls this with its own specifics and adds its own checks.
 */
export interface ReferencePackCase {
  pack: TaskPack;
  /** modules/agents/reference/<task>/ (agent.mjs, diverge.mjs, train.mjs). */
  agentDir: string;
  /** Inclusive bounds the base model's score must fall in. */
  baseScoreRange: [number, number];
  /** Words that exist only in the held-out split. */
  heldoutOnlyWords: readonly string[];
  /** Key of a private-set row that must never appear as the same key's value in training. */
  itemKey: string;
  /** Checkpoint names the reference agent submits, in order. */
  agentSubmissions: readonly string[];
  /** Checkpoint files (name → content) that must be refused, with the expected message. */
  invalidCheckpoints: readonly [string, Record<string, string>, RegExp][];
}

type Layout = Awaited<ReturnType<typeof materializeInTemp>>;

export function describeReferencePack(c: ReferencePackCase): void {
  const { pack } = c;
  let layout: Layout;
  let baseScore: number;
  const temps: string[] = [];
  const freshLayout = async (): Promise<Layout> => {
    const own = await materializeInTemp(pack);
    temps.push(own.root);
    return own;
  };

  beforeAll(async () => {
    layout = await freshLayout();
    baseScore = (await pack.evaluate(layout.paths.modelDir, layout.paths.privateDir)).score;
  });
  afterAll(async () => {
    for (const dir of temps) await rm(dir, { recursive: true, force: true });
  });

  // How long materialising, grading and the reference agent take is `npm run bench -- timings`, not a spec.
  it('materialises byte-identical files every time', async () => {
    const again = await freshLayout();
    const dirs = (l: Layout): string[] => [l.paths.dataDir, l.paths.modelDir, l.paths.privateDir];
    expect(await hashTree(dirs(again))).toBe(await hashTree(dirs(layout)));
  });

  it('keeps every held-out item and held-out-only word out of the training data', async () => {
    const train = await readFile(join(layout.paths.dataDir, 'train.jsonl'), 'utf8');
    const test = (await readFile(join(layout.paths.privateDir, 'test.jsonl'), 'utf8')).trim().split('\n');
    const key = (line: string): unknown => (JSON.parse(line) as Record<string, unknown>)[c.itemKey];
    const trainItems = new Set(train.trim().split('\n').map(key));
    expect(test.length).toBeGreaterThan(0);
    for (const line of test) expect(trainItems.has(key(line))).toBe(false);
    for (const word of c.heldoutOnlyWords) expect(train.toLowerCase()).not.toMatch(new RegExp(`\\b${word.toLowerCase()}\\b`));
  });

  it('gives the base model a low score, the same on every evaluation', async () => {
    expect(baseScore).toBeGreaterThanOrEqual(c.baseScoreRange[0]);
    expect(baseScore).toBeLessThanOrEqual(c.baseScoreRange[1]);
    const again = await pack.evaluate(layout.paths.modelDir, layout.paths.privateDir);
    expect(again).toEqual(await pack.evaluate(layout.paths.modelDir, layout.paths.privateDir));
    expect(again.score).toBe(baseScore);
  });

  it('scores a checkpoint trained by the reference agent script above the base model', async () => {
    const code = join(layout.workspace, 'code');
    await mkdir(code, { recursive: true });
    await copyFile(join(c.agentDir, 'train.mjs'), join(code, 'train.mjs'));
    const out = join(layout.outputDir, 'spec-sft');
    const run = await runNode(join(code, 'train.mjs'), ['--data', layout.paths.dataDir, '--base', layout.paths.modelDir, '--out', out]);
    expect(run).toMatchObject({ code: 0 });
    expect((await pack.evaluate(out, layout.paths.privateDir)).score).toBeGreaterThan(baseScore + 10);
  });

  describe('refuses unloadable checkpoints with InvalidCheckpointError', () => {
    it.each(c.invalidCheckpoints)('%s', async (name, files, message) => {
      const dir = join(layout.outputDir, `invalid-${name.replace(/\W+/g, '-')}`);
      await mkdir(dir, { recursive: true });
      for (const [file, content] of Object.entries(files)) await writeFile(join(dir, file), content);
      const attempt = pack.evaluate(dir, layout.paths.privateDir);
      await expect(attempt).rejects.toBeInstanceOf(InvalidCheckpointError);
      await expect(attempt).rejects.toThrow(message);
    });
  });

  it('faulty-diverge (diverge.mjs) submits one checkpoint that scores below the base model', async () => {
    const own = await freshLayout();
    const server = await startStubGradingServer(pack, { workspace: own.workspace, privateDir: own.paths.privateDir, baselineScore: baseScore });
    try {
      const run = await runNode(join(c.agentDir, 'diverge.mjs'), [], agentEnv(pack, own, server.url));
      expect(run.code).toBe(0);
      expect(server.submissions).toHaveLength(1);
      expect(server.submissions[0]!.score).toBeLessThan(baseScore);
    } finally {
      await server.close();
    }
  }, 120_000);

  it('reference agent revises its code, trains, and submits improving checkpoints to the grading API', async () => {
    const own = await freshLayout();
    const server = await startStubGradingServer(pack, { workspace: own.workspace, privateDir: own.paths.privateDir, baselineScore: baseScore });
    try {
      const run = await runNode(join(c.agentDir, 'agent.mjs'), [], agentEnv(pack, own, server.url));
      expect(run.code).toBe(0);
      expect(server.submissions.map((s) => s.modelPath)).toEqual(c.agentSubmissions.map((name) => `output/${name}`));
      const scores = server.submissions.map((s) => s.score!);
      expect(scores[0]).toBeGreaterThan(baseScore);
      for (let i = 1; i < scores.length; i++) expect(scores[i]).toBeGreaterThan(scores[i - 1]!);
      const revised = await readFile(join(own.workspace, 'code', 'train.mjs'), 'utf8');
      expect(revised).not.toBe(await readFile(join(c.agentDir, 'train.mjs'), 'utf8'));
      expect(run.stdout).toMatch(/\[agent\] revised code\/train\.mjs/);
    } finally {
      await server.close();
    }
  }, 120_000); // a real training run: generous on a loaded machine
}
