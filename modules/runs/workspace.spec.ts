import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fakeTask } from './testing/fake-task.js';
import { epochSeconds, prepareWorkspace, RunMeta } from './workspace.js';
import { WorkspaceError } from '../workspace-fs/layout.js';
import { sha } from '../../test/testing/helpers.js';


describe('prepareWorkspace', () => {
  let home: string;
  beforeEach(() => {
    home = mkdtempSync(join(tmpdir(), 'a2rl-ws-'));
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));
  const opts = (runId: string, task = fakeTask()) => ({
    workspacesRoot: join(home, 'workspaces'),
    taskCacheDir: join(home, 'tasks'),
    runId,
    task,
    instructions: 'Improve the model.\n',
    budgetSeconds: 90,
  });

  it('lays out the workspace as in the paper, with read-only data and base model and the private set outside', async () => {
    const { layout, privateDir, dataManifest, runMeta } = await prepareWorkspace(opts('run-1'));
    expect(layout.root).toBe(join(home, 'workspaces', 'run-1'));
    expect(readdirSync(layout.root).sort()).toEqual(['code', 'data', 'description.md', 'instructions.md', 'models', 'output', 'run_meta.json']);
    expect(readdirSync(layout.modelsDir)).toEqual(['tiny-base']);
    expect(readFileSync(layout.descriptionFile, 'utf8')).toBe('# Fake task\n\nLearn to add.\n');
    expect(readFileSync(layout.instructionsFile, 'utf8')).toBe('Improve the model.\n');
    expect(JSON.parse(readFileSync(layout.runMetaFile, 'utf8'))).toEqual({ start_time: null, timeout_s: 90, last_submit_time: null, end_time: null });
    expect(runMeta.current.timeout_s).toBe(90);

    for (const p of [layout.dataDir, join(layout.dataDir, 'splits'), layout.modelsDir, layout.baseModelDir]) {
      expect(statSync(p).mode & 0o777).toBe(0o555);
    }
    expect(statSync(join(layout.dataDir, 'train.jsonl')).mode & 0o777).toBe(0o444);
    expect(statSync(join(layout.baseModelDir, 'manifest.json')).mode & 0o777).toBe(0o444);
    expect(statSync(layout.codeDir).mode & 0o200).toBeTruthy();

    expect(privateDir.startsWith(layout.root)).toBe(false);
    expect(readdirSync(privateDir)).toEqual(['heldout.jsonl']);
    expect(readdirSync(layout.root)).not.toContain('private');

    expect(dataManifest).toEqual([
      { path: 'data/splits/dev.jsonl', sha256: sha('{"q":"2+2","a":"4"}\n'), size: 20 },
      { path: 'data/train.jsonl', sha256: sha('{"q":"1+1","a":"2"}\n'), size: 20 },
      { path: 'models/tiny-base/manifest.json', sha256: sha('{"format":"a2rl-ref/fake-task/1"}\n'), size: 34 },
    ]);
  });

  it('materialises a pack once and reuses it until the evaluator version changes', async () => {
    const task = fakeTask();
    const first = await prepareWorkspace(opts('run-1', task));
    const second = await prepareWorkspace(opts('run-2', task));
    expect(task.materializations).toBe(1);
    expect(second.privateDir).toBe(first.privateDir);
    expect(second.dataManifest).toEqual(first.dataManifest);

    const bumped = fakeTask({ evaluatorVersion: '2' });
    await prepareWorkspace(opts('run-3', bumped));
    expect(bumped.materializations).toBe(1);
    expect(readdirSync(join(home, 'tasks'))).toEqual(['fake-task']); // no temp or stale leftovers
  });

  it('replaces an incomplete cache entry (no completion marker)', async () => {
    await mkdir(join(home, 'tasks', 'fake-task', 'data'), { recursive: true });
    await writeFile(join(home, 'tasks', 'fake-task', 'data', 'half-written'), 'x');
    const task = fakeTask();
    const { layout } = await prepareWorkspace(opts('run-1', task));
    expect(task.materializations).toBe(1);
    expect(readdirSync(layout.dataDir).sort()).toEqual(['splits', 'train.jsonl']);
  });

  it('converges on one cache copy when two runs prepare concurrently', async () => {
    const a = fakeTask();
    const b = fakeTask();
    const [x, y] = await Promise.all([prepareWorkspace(opts('run-a', a)), prepareWorkspace(opts('run-b', b))]);
    expect(x.privateDir).toBe(y.privateDir);
    expect(readdirSync(join(home, 'tasks'))).toEqual(['fake-task']);
  });

  it('refuses a run id that already has a workspace or is not a plain directory name', async () => {
    await prepareWorkspace(opts('run-1'));
    await expect(prepareWorkspace(opts('run-1'))).rejects.toThrow(WorkspaceError);
    await expect(prepareWorkspace(opts('../escape'))).rejects.toThrow(/not a safe directory name/);
    await expect(prepareWorkspace({ ...opts('run-2'), taskCacheDir: join(home, 'workspaces', 'cache') })).rejects.toThrow(/must not overlap/);
  });
});

describe('RunMeta', () => {
  it('keeps run_meta.json current with serialised atomic writes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'a2rl-meta-'));
    try {
      const file = join(dir, 'run_meta.json');
      const meta = await RunMeta.create(file, { timeout_s: 60 });
      const start = epochSeconds(new Date('2025-01-01T00:00:00Z'));
      await Promise.all([
        meta.update({ start_time: start }),
        meta.update({ last_submit_time: start + 10 }),
        meta.update({ end_time: start + 60 }),
      ]);
      expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({
        start_time: 1735689600,
        timeout_s: 60,
        last_submit_time: 1735689610,
        end_time: 1735689660,
      });
      expect(readdirSync(dir)).toEqual(['run_meta.json']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
